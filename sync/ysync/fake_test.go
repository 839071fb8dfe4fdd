package ysync

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// fakeService stands in for yaps.Service in the relay tests: it keeps each
// list's updates in order and emits events like the service does, without
// any CRDT semantics (the real service is covered by the integration and
// interop tests).
type fakeService struct {
	mu      sync.Mutex
	lists   map[string]*fakeList
	subs    map[int]func(yaps.Event)
	nextSub int
	applied int
	pins    map[string]int

	attempts, maxAttempts int

	// gate, when set, holds every ApplyUpdates call until it can receive
	// from it; batches records the size of each call.
	gate    chan struct{}
	batches []int

	// encodeDelay slows EncodeState; encodes counts its calls and
	// maxEncoding the most that ran at once.
	encodeDelay       time.Duration
	encodes, encoding int
	maxEncoding       int
	stateVectors      int // StateVector calls
	// svHook, when set, runs in StateVector (the upgrade calls it after
	// Authenticate, before the connection is registered).
	svHook func()
	fresh  int // AuthenticateFresh calls

	// claims records each ClaimClientIDs call: the permission and IDs.
	claims []fakeClaim
}

type fakeClaim struct {
	perm string
	ids  []uint64
}

type fakeList struct {
	list    *yaps.List
	codes   map[string]*yaps.Permission
	updates [][]byte
}

func newFake() *fakeService {
	return &fakeService{lists: map[string]*fakeList{}, subs: map[int]func(yaps.Event){}, pins: map[string]int{}}
}

// addList creates a list with one code per role, named after the role.
func (f *fakeService) addList(ref string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &fakeList{list: &yaps.List{Ref: ref}, codes: map[string]*yaps.Permission{}}
	for _, r := range []yaps.Role{yaps.RoleOwner, yaps.RoleEditor, yaps.RoleViewer, yaps.RoleAgent} {
		l.codes[string(r)] = &yaps.Permission{ID: ref + "-" + string(r), ListRef: ref, Role: r}
	}
	f.lists[ref] = l
}

func (f *fakeService) Authenticate(_ context.Context, ref, code string) (*yaps.Actor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lists[ref]
	if l == nil {
		return nil, yaps.Errorf(yaps.ENOTFOUND, "list not found")
	}
	p := l.codes[code]
	if p == nil || !p.Active() {
		return nil, yaps.Errorf(yaps.EUNAUTHORIZED, "invalid or revoked code")
	}
	lc := *l.list
	return &yaps.Actor{List: &lc, Permission: p}, nil
}

func (f *fakeService) AuthenticateFresh(ctx context.Context, ref, code string) (*yaps.Actor, error) {
	f.mu.Lock()
	f.fresh++
	f.mu.Unlock()
	return f.Authenticate(ctx, ref, code)
}

func (f *fakeService) CanWrite(a *yaps.Actor) bool {
	return a.Permission.Role != yaps.RoleViewer && !a.List.Archived()
}

func (f *fakeService) StateVector(_ context.Context, ref string) ([]byte, error) {
	f.mu.Lock()
	hook := f.svHook
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stateVectors++
	return []byte{byte(len(f.lists[ref].updates))}, nil
}

// Holds reports whether update is byte for byte one the list has stored
// (the fake's updates are opaque).
func (f *fakeService) Holds(_ context.Context, ref string, update []byte) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.lists[ref].updates {
		if bytes.Equal(u, update) {
			return true, nil
		}
	}
	return false, nil
}

// ClaimClientIDs records the call; the fake never refuses a write for it.
func (f *fakeService) ClaimClientIDs(_ context.Context, a *yaps.Actor, ids []uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, fakeClaim{a.Permission.ID, slices.Clone(ids)})
	return nil
}

// EncodeState returns all updates joined (not a valid Yjs update; the tests
// only compare bytes).
func (f *fakeService) EncodeState(_ context.Context, ref string, sv []byte) ([]byte, error) {
	f.mu.Lock()
	f.encodes++
	f.encoding++
	f.maxEncoding = max(f.maxEncoding, f.encoding)
	delay := f.encodeDelay
	f.mu.Unlock()
	time.Sleep(delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.encoding--
	if len(f.lists[ref].updates) == 0 {
		return emptyUpdate, nil
	}
	return bytes.Join(f.lists[ref].updates, nil), nil
}

// ApplyUpdates stores each acceptable update and emits them as one write
// does: More on all but the last.
func (f *fakeService) ApplyUpdates(_ context.Context, ref string, ups []yaps.ClientUpdate) []error {
	f.mu.Lock()
	gate := f.gate
	f.batches = append(f.batches, len(ups))
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	errs := make([]error, len(ups))
	var evs []yaps.Event
	f.mu.Lock()
	l := f.lists[ref]
	for i, u := range ups {
		switch {
		case !f.CanWrite(u.Actor) || l.list.Archived():
			errs[i] = yaps.Errorf(yaps.EFORBIDDEN, "read-only")
		case u.Update[0] == 0xEE:
			errs[i] = yaps.Errorf(yaps.EINVALID, "malformed update")
		case u.Update[0] == 0xEF:
			errs[i] = yaps.Errorf(yaps.EFORBIDDEN, "refused")
		default:
			l.updates = append(l.updates, append([]byte(nil), u.Update...))
			f.applied++
			evs = append(evs, yaps.Event{Kind: yaps.EventDocUpdate, ListRef: ref, Update: u.Update, Origin: u.Origin, More: true})
		}
	}
	f.mu.Unlock()
	for i, ev := range evs {
		ev.More = i < len(evs)-1
		f.emit(ev)
	}
	return errs
}

func (f *fakeService) Subscribe(fn func(yaps.Event)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextSub
	f.nextSub++
	f.subs[id] = fn
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, id)
	}
}

// fakeAccountKey is the one account key the fake knows.
const fakeAccountKey = yaps.AccountKeyPrefix + "good"

func (f *fakeService) RequestAccount(_ context.Context, authorization, xAccountKey string) (*yaps.Account, error) {
	key := xAccountKey
	if tok, ok := yaps.BearerToken(authorization); ok && key == "" && strings.HasPrefix(tok, yaps.AccountKeyPrefix) {
		key = tok
	}
	switch key {
	case "":
		return nil, nil
	case fakeAccountKey:
		return &yaps.Account{ID: "A1"}, nil
	}
	return nil, yaps.Errorf(yaps.EUNAUTHORIZED, "the account key is not valid")
}

func (f *fakeService) Limit(_ context.Context, _ yaps.LimitGroup, ip string, _ *yaps.Account, _ *yaps.Actor) (yaps.LimitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.maxAttempts == 0 {
		return yaps.LimitResult{Allowed: true, Limit: -1, Remaining: -1}, nil
	}
	res := yaps.LimitResult{Allowed: f.attempts <= f.maxAttempts, Limit: int64(f.maxAttempts),
		Remaining: int64(f.maxAttempts - f.attempts), Reset: time.Now().Add(3 * time.Second)} // "3": rounded up, while the answer takes under a second
	if !res.Allowed {
		res.RetryAfter = 3 * time.Second
		return res, &yaps.Error{Code: yaps.ERATELIMITED, Message: "rate limit exceeded; retry later", RetryAfter: res.RetryAfter}
	}
	return res, nil
}

func (f *fakeService) PublishAwareness(context.Context, string, []byte) error { return nil }

func (f *fakeService) Pin(ref string) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pins[ref]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pins[ref]--
	}
}

func (f *fakeService) pinned(ref string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pins[ref]
}

func (f *fakeService) emit(ev yaps.Event) {
	f.mu.Lock()
	subs := make([]func(yaps.Event), 0, len(f.subs))
	for _, fn := range f.subs {
		subs = append(subs, fn)
	}
	f.mu.Unlock()
	for _, fn := range subs {
		fn(ev)
	}
}

func (f *fakeService) revoke(ref, code string) {
	f.mu.Lock()
	p := f.lists[ref].codes[code]
	delete(f.lists[ref].codes, code)
	f.mu.Unlock()
	f.emit(yaps.Event{Kind: yaps.EventCodeRevoked, ListRef: ref, PermissionID: p.ID})
}

func (f *fakeService) archive(ref string, on bool) {
	f.mu.Lock()
	if on {
		t := yaps.Truncate(timeNow())
		f.lists[ref].list.ArchivedAt = &t
	} else {
		f.lists[ref].list.ArchivedAt = nil
	}
	f.mu.Unlock()
	f.emit(yaps.Event{Kind: yaps.EventListChanged, ListRef: ref})
}

func (f *fakeService) appliedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func eventUpdate(ref string, u []byte) yaps.Event {
	return yaps.Event{Kind: yaps.EventDocUpdate, ListRef: ref, Update: u}
}

func (f *fakeService) batchSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batches...)
}
