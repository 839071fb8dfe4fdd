package yaps_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// bus is an in-memory stand-in for Postgres LISTEN/NOTIFY: every notifier
// on it receives the notices of the others.
type bus struct {
	mu    sync.Mutex
	peers []*fakeNotifier
}

type fakeNotifier struct {
	bus       *bus
	id        string
	in        chan yaps.Notice
	listening chan struct{}
	once      sync.Once

	mu   sync.Mutex
	mute bool // drop published notices (a lost NOTIFY)
	sent []yaps.Notice
}

func (b *bus) notifier(id string) *fakeNotifier {
	n := &fakeNotifier{bus: b, id: id, in: make(chan yaps.Notice, 1000), listening: make(chan struct{})}
	b.mu.Lock()
	b.peers = append(b.peers, n)
	b.mu.Unlock()
	return n
}

func (f *fakeNotifier) Publish(_ context.Context, n yaps.Notice) error {
	n.Sender = f.id
	f.mu.Lock()
	f.sent = append(f.sent, n)
	mute := f.mute
	f.mu.Unlock()
	if mute {
		return nil
	}
	f.bus.mu.Lock()
	defer f.bus.mu.Unlock()
	for _, p := range f.bus.peers {
		if p != f {
			p.in <- n
		}
	}
	return nil
}

func (f *fakeNotifier) Listen(ctx context.Context, fn func(yaps.Notice)) error {
	f.once.Do(func() { close(f.listening) })
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case n := <-f.in:
			fn(n)
		}
	}
}

func (f *fakeNotifier) setMute(m bool) {
	f.mu.Lock()
	f.mute = m
	f.mu.Unlock()
}

func (f *fakeNotifier) published() []yaps.Notice {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]yaps.Notice(nil), f.sent...)
}

// twoProcesses returns two services on one store, each with its own
// notifier on one bus, polling effectively disabled on both.
func twoProcesses(t *testing.T, poll time.Duration) (e1 *env, s2 *yaps.Service, n1, n2 *fakeNotifier) {
	t.Helper()
	b := &bus{}
	n1, n2 = b.notifier("p1"), b.notifier("p2")
	e1 = newEnv(t, func(c *yaps.Config) { c.Notifier = n1; c.PollInterval = poll })
	s2, err := yaps.NewService(yaps.Config{Store: e1.store, Now: e1.clock.Now, PurgeInterval: -1, PollInterval: poll, Notifier: n2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	<-n1.listening
	<-n2.listening
	return e1, s2, n1, n2
}

func collect(s *yaps.Service, kinds ...yaps.EventKind) (<-chan yaps.Event, func()) {
	ch := make(chan yaps.Event, 100)
	return ch, s.Subscribe(func(ev yaps.Event) {
		for _, k := range kinds {
			if ev.Kind == k {
				ch <- ev
			}
		}
	})
}

func next(t *testing.T, ch <-chan yaps.Event, within time.Duration) yaps.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
		return yaps.Event{}
	}
}

func TestNotifierWriteReachesOtherProcess(t *testing.T) {
	t.Parallel()
	e1, s2, n1, _ := twoProcesses(t, time.Hour)
	a := e1.list()
	got, unsub := collect(s2, yaps.EventDocUpdate)
	defer unsub()
	unpin := s2.Pin(a.List.Ref)
	defer unpin()
	_, err := s2.StateVector(e1.ctx, a.List.Ref)
	require.NoError(t, err)

	y, _, err := e1.svc.CreateYap(e1.ctx, a, yaps.KindTask, task("from process 1"), "", nil)
	require.NoError(t, err)
	ev := next(t, got, time.Second)
	require.Equal(t, a.List.Ref, ev.ListRef)
	require.EqualValues(t, 2, ev.Seq)

	// A sync write on process 1 travels too, and process 2's copy equals
	// process 1's.
	d := yjs.NewDoc()
	sv, err := e1.svc.StateVector(e1.ctx, a.List.Ref)
	require.NoError(t, err)
	snap, _, err := e1.svc.Snapshot(e1.ctx, a, nil)
	require.NoError(t, err)
	require.NoError(t, d.ApplyUpdate(snap, nil))
	var upd []byte
	un := d.OnUpdate(func(u []byte, _ any) { upd = u })
	ym, _ := d.GetMap("yaps").Get(y.ID)
	ct, _ := ym.(*yjs.Map).Get("content")
	ct.(*yjs.Text).Insert(0, "sync ", nil)
	un()
	require.NoError(t, e1.svc.ApplyUpdate(e1.ctx, a, upd, "conn"))
	ev = next(t, got, time.Second)
	require.EqualValues(t, 3, ev.Seq)
	require.Nil(t, ev.Origin, "the origin of another process is not known")
	_ = sv

	full, err := s2.EncodeState(e1.ctx, a.List.Ref, nil)
	require.NoError(t, err)
	c := yjs.NewDoc()
	require.NoError(t, c.ApplyUpdate(full, nil))
	require.Equal(t, d.ToJSON(), c.ToJSON())

	// Process 1 published one document notice per write, with the seq.
	var seqs []int64
	for _, n := range n1.published() {
		if n.Kind == yaps.NoticeDoc && n.ListRef == a.List.Ref {
			seqs = append(seqs, n.Seq)
		}
	}
	require.Equal(t, []int64{2, 3}, seqs)
}

func TestNotifierRevocationRollupArchive(t *testing.T) {
	t.Parallel()
	e1, s2, _, _ := twoProcesses(t, -1)
	owner := e1.list()
	ed := e1.actor(owner, yaps.RoleEditor)
	events, unsub := collect(s2, yaps.EventCodeRevoked, yaps.EventListChanged)
	defer unsub()
	unpin := s2.Pin(owner.List.Ref)
	defer unpin()

	require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, ed.Permission.ID))
	ev := next(t, events, time.Second)
	require.Equal(t, yaps.EventCodeRevoked, ev.Kind)
	require.Equal(t, ed.Permission.ID, ev.PermissionID)

	code, err := e1.svc.RotateOwner(e1.ctx, owner)
	require.NoError(t, err)
	ev = next(t, events, time.Second)
	require.Equal(t, yaps.EventCodeRevoked, ev.Kind)
	require.Equal(t, owner.Permission.ID, ev.PermissionID)
	owner, err = e1.svc.Authenticate(e1.ctx, owner.List.Ref, code)
	require.NoError(t, err)

	acct, _, err := e1.svc.CreateAccount(e1.ctx)
	require.NoError(t, err)
	merged, err := e1.svc.Rollup(e1.ctx, owner, acct)
	require.NoError(t, err)
	require.True(t, merged)
	ev = next(t, events, time.Second)
	require.Equal(t, yaps.EventListChanged, ev.Kind)

	require.NoError(t, e1.svc.ArchiveList(e1.ctx, owner, ""))
	ev = next(t, events, time.Second)
	require.Equal(t, yaps.EventListChanged, ev.Kind)
	require.Equal(t, owner.List.Ref, ev.ListRef)
}

func TestNotifierIgnoresUnwatchedLists(t *testing.T) {
	t.Parallel()
	e1, s2, _, n2 := twoProcesses(t, -1)
	a := e1.list()
	got, unsub := collect(s2, yaps.EventDocUpdate, yaps.EventAwareness)
	defer unsub()
	_, _, err := e1.svc.CreateYap(e1.ctx, a, yaps.KindTask, task("nobody listens"), "", nil)
	require.NoError(t, err)
	require.NoError(t, e1.svc.PublishAwareness(e1.ctx, a.List.Ref, []byte{1, 2, 3}))
	select {
	case ev := <-got:
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}
	require.Empty(t, n2.published(), "process 2 wrote nothing")
}

func TestNotifierAwareness(t *testing.T) {
	t.Parallel()
	e1, s2, _, _ := twoProcesses(t, -1)
	a := e1.list()
	other := e1.list()
	aw1, unsub1 := collect(e1.svc, yaps.EventAwareness)
	defer unsub1()
	aw2, unsub2 := collect(s2, yaps.EventAwareness)
	defer unsub2()
	unpin := s2.Pin(a.List.Ref)
	defer unpin()

	payload := []byte{1, 42, 1, 2, '{', '}'}
	require.NoError(t, e1.svc.PublishAwareness(e1.ctx, other.List.Ref, []byte("not watched on 2")))
	require.NoError(t, e1.svc.PublishAwareness(e1.ctx, a.List.Ref, payload))
	payload[1] = 0 // the service copied it
	ev := next(t, aw2, time.Second)
	require.Equal(t, a.List.Ref, ev.ListRef)
	require.Equal(t, []byte{1, 42, 1, 2, '{', '}'}, ev.Update)
	select {
	case ev := <-aw1:
		t.Fatalf("own awareness came back: %+v", ev)
	case ev := <-aw2:
		t.Fatalf("awareness of an unwatched list: %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}

	ctx, cancel := context.WithCancel(e1.ctx)
	cancel()
	require.ErrorIs(t, e1.svc.PublishAwareness(ctx, a.List.Ref, payload), context.Canceled)

	// Without a Notifier it is a no-op.
	e3 := newEnv(t)
	require.NoError(t, e3.svc.PublishAwareness(e3.ctx, a.List.Ref, payload))
}

// A lost notice is made up for by NoticeResync (a Notifier reconnected).
func TestNotifierResync(t *testing.T) {
	t.Parallel()
	e1, s2, n1, n2 := twoProcesses(t, -1)
	a := e1.list()
	ed := e1.actor(a, yaps.RoleEditor)
	events, unsub := collect(s2, yaps.EventDocUpdate, yaps.EventCodeRevoked)
	defer unsub()
	unpin := s2.Pin(a.List.Ref)
	defer unpin()
	_, err := s2.StateVector(e1.ctx, a.List.Ref)
	require.NoError(t, err)
	require.NoError(t, s2.Refresh(e1.ctx, a.List.Ref))
	// Let process 2 learn the permissions once (as the poller would).
	n2.in <- yaps.Notice{Kind: yaps.NoticeResync}
	time.Sleep(50 * time.Millisecond)

	n1.setMute(true)
	_, _, err = e1.svc.CreateYap(e1.ctx, a, yaps.KindTask, task("lost notice"), "", nil)
	require.NoError(t, err)
	require.NoError(t, e1.svc.RevokePermission(e1.ctx, a, ed.Permission.ID))
	select {
	case ev := <-events:
		t.Fatalf("event without a notice and without polling: %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}
	n2.in <- yaps.Notice{Kind: yaps.NoticeResync}
	seen := map[yaps.EventKind]yaps.Event{}
	for len(seen) < 2 {
		ev := next(t, events, time.Second)
		seen[ev.Kind] = ev
	}
	require.Equal(t, ed.Permission.ID, seen[yaps.EventCodeRevoked].PermissionID)
	require.EqualValues(t, 2, seen[yaps.EventDocUpdate].Seq)
}

// Many writes in a burst: process 2 ends up with every update, in seq
// order, whatever the notices merged.
func TestNotifierBurst(t *testing.T) {
	t.Parallel()
	e1, s2, _, _ := twoProcesses(t, -1)
	a := e1.list()
	got, unsub := collect(s2, yaps.EventDocUpdate)
	defer unsub()
	unpin := s2.Pin(a.List.Ref)
	defer unpin()
	_, err := s2.StateVector(e1.ctx, a.List.Ref)
	require.NoError(t, err)
	const n = 40
	for i := range n {
		_, _, err := e1.svc.CreateYap(e1.ctx, a, yaps.KindTask, task(fmt.Sprint("t", i)), "", nil)
		require.NoError(t, err)
	}
	for i := range n {
		ev := next(t, got, time.Second)
		require.EqualValues(t, 2+i, ev.Seq)
	}
}

// gatedBatcher is a Notifier with PublishBatch whose first Publish waits
// for gate, so notices queue up behind it.
type gatedBatcher struct {
	gate    chan struct{}
	started chan struct{}
	mu      sync.Mutex
	calls   [][]yaps.Notice
}

func (g *gatedBatcher) Publish(_ context.Context, n yaps.Notice) error {
	g.mu.Lock()
	first := len(g.calls) == 0
	g.calls = append(g.calls, []yaps.Notice{n})
	g.mu.Unlock()
	if first {
		close(g.started)
		<-g.gate
	}
	return nil
}

func (g *gatedBatcher) PublishBatch(_ context.Context, ns []yaps.Notice) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, append([]yaps.Notice(nil), ns...))
	return nil
}

func (g *gatedBatcher) Listen(ctx context.Context, _ func(yaps.Notice)) error {
	<-ctx.Done()
	return ctx.Err()
}

// Notices that queue while one is being published go out as one batch, in
// order, to a Notifier that is a BatchPublisher.
func TestNoticesPublishedInBatches(t *testing.T) {
	t.Parallel()
	g := &gatedBatcher{gate: make(chan struct{}), started: make(chan struct{})}
	e := newEnv(t, func(c *yaps.Config) { c.Notifier = g; c.PollInterval = -1 })
	for i := range 5 {
		require.NoError(t, e.svc.PublishAwareness(e.ctx, "r", []byte{byte(i)}))
		if i == 0 {
			<-g.started
		}
	}
	close(g.gate)
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		n := 0
		for _, c := range g.calls {
			n += len(c)
		}
		return n == 5
	}, 2*time.Second, 5*time.Millisecond)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.calls, 2, "one Publish, then one PublishBatch")
	var payloads []byte
	for _, c := range g.calls {
		for _, n := range c {
			payloads = append(payloads, n.Payload...)
		}
	}
	require.Equal(t, []byte{0, 1, 2, 3, 4}, payloads)
}

// A process that reloads a document (the log was compacted past what it
// had) reports the archive and unarchive it learns of that way, so sync
// rooms re-check their connections (found in review: they stayed
// read-only after an unarchive).
func TestReloadReportsListChange(t *testing.T) {
	t.Parallel()
	e1, s2, n1, _ := twoProcesses(t, -1)
	owner := e1.list()
	ref := owner.List.Ref
	unpin := s2.Pin(ref)
	defer unpin()
	require.NoError(t, s2.Refresh(e1.ctx, ref))
	events, unsub := collect(s2, yaps.EventListChanged)
	defer unsub()
	n1.setMute(true) // process 2 hears nothing of the following

	for _, archive := range []bool{true, false} {
		if archive {
			require.NoError(t, e1.svc.ArchiveList(e1.ctx, owner, ""))
		} else {
			_, err := e1.svc.UpdateList(e1.ctx, e1.reauth(owner), yaps.ListPatch{ArchivedAt: yaps.Null[time.Time]()}, "")
			require.NoError(t, err)
		}
		require.NoError(t, e1.svc.CompactNow(e1.ctx, ref))
		require.NoError(t, s2.Refresh(e1.ctx, ref))
		ev := next(t, events, time.Second)
		require.Equal(t, ref, ev.ListRef, "archive %v", archive)
	}
	require.NoError(t, s2.Refresh(e1.ctx, ref))
	select {
	case ev := <-events:
		t.Fatalf("a refresh that changed nothing reported %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}

// While its Notifier is not listening (NoticeLost until NoticeResync), a
// process does not answer from its auth cache: a revoking process cannot
// reach it, and would not wait for it (found in review: a read on the
// other process still got 200 right after the revocation). The resync
// then has every connection's code checked again (EventListChanged for
// each watched list), since a revocation missed meanwhile may not show in
// the permission list's difference.
func TestNotifierLostSuspendsAuthCache(t *testing.T) {
	t.Parallel()
	e1, s2, n1, n2 := twoProcesses(t, -1)
	owner := e1.list()
	ref := owner.List.Ref
	ip, err := e1.svc.IssuePermission(e1.ctx, owner, yaps.RoleViewer, "v", nil)
	require.NoError(t, err)
	_, err = s2.Authenticate(e1.ctx, ref, ip.Code) // cached on process 2
	require.NoError(t, err)
	unpin := s2.Pin(ref)
	defer unpin()
	events, unsub := collect(s2, yaps.EventAwareness, yaps.EventListChanged)
	defer unsub()

	// Notices are handled in order: once the awareness notice after it
	// arrived, NoticeLost was handled.
	n2.in <- yaps.Notice{Kind: yaps.NoticeLost}
	n2.in <- yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: ref, Payload: []byte{0}}
	require.Equal(t, yaps.EventAwareness, next(t, events, time.Second).Kind)

	n1.setMute(true) // the revocation's notice is lost
	require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, ip.Permission.ID))
	_, err = s2.Authenticate(e1.ctx, ref, ip.Code)
	require.True(t, yaps.IsCode(err, yaps.EUNAUTHORIZED), "got %v", err)

	n2.in <- yaps.Notice{Kind: yaps.NoticeResync}
	ev := next(t, events, time.Second)
	require.Equal(t, yaps.EventListChanged, ev.Kind)
	require.Equal(t, ref, ev.ListRef)
}
