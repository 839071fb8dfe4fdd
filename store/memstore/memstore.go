package memstore

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// Store is an in-memory yaps.Store. The zero value is not usable; call New.
type Store struct {
	mu       sync.RWMutex // guards every field below and the listData contents
	lists    map[string]*listData
	perms    map[string]*yaps.Permission // by id
	byHash   map[string]*yaps.Permission // by string(code hash)
	accounts map[string]*yaps.Account
	acctHash map[string]*yaps.Account
	idem     map[idemKey]*yaps.IdempotencyRecord
	auditSeq int64
}

type idemKey struct{ scope, key string }

// listData is everything stored about one list.
type listData struct {
	lock     sync.Mutex // held by Update: serializes writers of this list
	list     yaps.List
	state    []byte
	stateSeq int64
	updates  [][]byte // seq stateSeq+1 ... list.DocVersion
	yaps     map[string]*yaps.Yap
	perms    []*yaps.Permission // creation order
	audit    []*yaps.AuditEntry
	clients  map[uint64]string // Yjs client ID -> permission ID (ClaimClients)
}

var _ yaps.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		lists:    map[string]*listData{},
		perms:    map[string]*yaps.Permission{},
		byHash:   map[string]*yaps.Permission{},
		accounts: map[string]*yaps.Account{},
		acctHash: map[string]*yaps.Account{},
		idem:     map[idemKey]*yaps.IdempotencyRecord{},
	}
}

func notFound(what string) error { return yaps.Errorf(yaps.ENOTFOUND, "%s not found", what) }

func conflict(format string, args ...any) error { return yaps.Errorf(yaps.ECONFLICT, format, args...) }

// CreateList implements yaps.Store.
func (s *Store) CreateList(ctx context.Context, l *yaps.List, owner *yaps.Permission, firstUpdate []byte, idem *yaps.IdempotencyRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.lists[l.Ref]; ok {
		return conflict("list %q already exists", l.Ref)
	}
	if owner != nil {
		if err := s.checkNewPermission(owner); err != nil {
			return err
		}
	}
	if idem != nil && s.idemTaken(idem) {
		return conflict("idempotency key already used")
	}
	ld := &listData{list: copyList(l), yaps: map[string]*yaps.Yap{}}
	ld.list.DocVersion = 0
	if firstUpdate != nil {
		ld.updates = append(ld.updates, bytes.Clone(firstUpdate))
		ld.list.DocVersion = 1
	}
	s.lists[l.Ref] = ld
	if owner != nil {
		s.addPermission(ld, owner)
	}
	if idem != nil {
		s.putIdem(idem)
	}
	return nil
}

func (s *Store) checkNewPermission(p *yaps.Permission) error {
	if _, ok := s.perms[p.ID]; ok {
		return conflict("permission %q already exists", p.ID)
	}
	if _, ok := s.byHash[string(p.CodeHash)]; ok {
		return conflict("permission code hash already exists")
	}
	return nil
}

func (s *Store) addPermission(ld *listData, p *yaps.Permission) {
	c := copyPermission(p)
	c.ListRef = ld.list.Ref
	s.perms[c.ID] = c
	s.byHash[string(c.CodeHash)] = c
	ld.perms = append(ld.perms, c)
}

// idemTaken reports whether r's (scope, key) holds a record that r does
// not replace (see IdempotencyRecord.ReplaceBefore). s.mu is held.
func (s *Store) idemTaken(r *yaps.IdempotencyRecord) bool {
	old, ok := s.idem[idemKey{r.Scope, r.Key}]
	return ok && !old.CreatedAt.Before(yaps.Truncate(r.ReplaceBefore))
}

// putIdem stores (or replaces) a record. s.mu is held for writing.
func (s *Store) putIdem(r *yaps.IdempotencyRecord) {
	c := *r
	c.RequestHash = bytes.Clone(r.RequestHash)
	c.Body = bytes.Clone(r.Body)
	c.CreatedAt = yaps.Truncate(r.CreatedAt)
	c.ReplaceBefore = time.Time{}
	s.idem[idemKey{r.Scope, r.Key}] = &c
}

// List implements yaps.Store.
func (s *Store) List(ctx context.Context, ref string) (*yaps.List, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ld, ok := s.lists[ref]
	if !ok {
		return nil, notFound("list")
	}
	l := ld.list
	return &l, nil
}

// ListsByAccount implements yaps.Store.
func (s *Store) ListsByAccount(ctx context.Context, accountID string, after *yaps.ListCursor, limit int) ([]*yaps.List, error) {
	cmp := func(at time.Time, ref string, b *yaps.List) int {
		if c := at.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(ref, b.Ref)
	}
	s.mu.RLock()
	var out []*yaps.List
	for _, ld := range s.lists {
		if accountID == "" || ld.list.AccountID != accountID {
			continue
		}
		// Stored times are whole milliseconds; so is the cursor's.
		if after != nil && cmp(yaps.Truncate(after.CreatedAt), after.Ref, &ld.list) >= 0 {
			continue
		}
		l := ld.list
		out = append(out, &l)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *yaps.List) int { return cmp(a.CreatedAt, a.Ref, b) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// PermissionByHash implements yaps.Store.
func (s *Store) PermissionByHash(ctx context.Context, hash []byte) (*yaps.Permission, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.byHash[string(hash)]
	if !ok || len(hash) == 0 {
		return nil, notFound("permission")
	}
	return copyPermission(p), nil
}

// Permissions implements yaps.Store.
func (s *Store) Permissions(ctx context.Context, listRef string) ([]*yaps.Permission, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ld, ok := s.lists[listRef]
	if !ok {
		return nil, nil
	}
	out := make([]*yaps.Permission, 0, len(ld.perms))
	for _, p := range ld.perms {
		if p.RevokedAt == nil {
			out = append(out, copyPermission(p))
		}
	}
	slices.SortStableFunc(out, func(a, b *yaps.Permission) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Yap implements yaps.Store.
func (s *Store) Yap(ctx context.Context, listRef, id string) (*yaps.Yap, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ld, ok := s.lists[listRef]
	if !ok {
		return nil, notFound("yap")
	}
	y, ok := ld.yaps[id]
	if !ok {
		return nil, notFound("yap")
	}
	return copyYap(y), nil
}

func compareYap(a, b *yaps.Yap) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Yaps implements yaps.Store. A Limit <= 0 means no limit.
func (s *Store) Yaps(ctx context.Context, listRef string, q yaps.YapQuery) ([]*yaps.Yap, error) {
	s.mu.RLock()
	ld, ok := s.lists[listRef]
	if !ok {
		s.mu.RUnlock()
		return nil, nil
	}
	var after *yaps.Yap
	if q.After != nil {
		after = &yaps.Yap{CreatedAt: yaps.Truncate(q.After.CreatedAt), ID: q.After.ID}
	}
	sel := make([]*yaps.Yap, 0, len(ld.yaps))
	for _, y := range ld.yaps {
		if !q.IncludeDeleted && y.DeletedAt != nil {
			continue
		}
		if after != nil && compareYap(y, after) <= 0 {
			continue
		}
		sel = append(sel, y)
	}
	slices.SortFunc(sel, compareYap)
	if q.Limit > 0 && len(sel) > q.Limit {
		sel = sel[:q.Limit]
	}
	out := make([]*yaps.Yap, len(sel))
	for i, y := range sel {
		out[i] = copyYap(y)
	}
	s.mu.RUnlock()
	return out, nil
}

// Doc implements yaps.Store.
func (s *Store) Doc(ctx context.Context, listRef string, afterSeq int64) (*yaps.DocLog, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ld, ok := s.lists[listRef]
	if !ok {
		return nil, notFound("list")
	}
	d := &yaps.DocLog{StateSeq: ld.stateSeq, LastSeq: ld.list.DocVersion}
	from := afterSeq
	if afterSeq < ld.stateSeq {
		d.State = bytes.Clone(ld.state)
		from = ld.stateSeq
	}
	for i := from - ld.stateSeq; i >= 0 && i < int64(len(ld.updates)); i++ {
		d.Updates = append(d.Updates, bytes.Clone(ld.updates[i]))
	}
	return d, nil
}

// CompactDoc implements yaps.Store. Compacting to a seq at or below the
// current state's is a no-op (a slower compactor lost the race); a seq past
// the log's end is EINVALID.
//
// Like the SQL stores it waits for the list's writer, so an Update never
// sees the log shrink under it.
func (s *Store) CompactDoc(ctx context.Context, listRef string, seq int64, state []byte) error {
	s.mu.RLock()
	ld, ok := s.lists[listRef]
	s.mu.RUnlock()
	if !ok {
		return notFound("list")
	}
	ld.lock.Lock()
	defer ld.lock.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > ld.list.DocVersion {
		return yaps.Errorf(yaps.EINVALID, "compaction seq %d is past the log end %d", seq, ld.list.DocVersion)
	}
	if seq <= ld.stateSeq {
		return nil
	}
	ld.updates = slices.Clone(ld.updates[seq-ld.stateSeq:])
	ld.state = bytes.Clone(state)
	ld.stateSeq = seq
	return nil
}

// ListVersions implements yaps.Store.
func (s *Store) ListVersions(ctx context.Context, refs []string) (map[string]yaps.ListVersion, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]yaps.ListVersion, len(refs))
	for _, ref := range refs {
		ld, ok := s.lists[ref]
		if !ok {
			continue
		}
		v := yaps.ListVersion{DocVersion: ld.list.DocVersion, Permissions: int64(len(ld.perms))}
		for _, p := range ld.perms {
			if p.RevokedAt != nil {
				v.Revoked++
			}
		}
		out[ref] = v
	}
	return out, nil
}

// UpdateCount implements yaps.Store.
func (s *Store) UpdateCount(ctx context.Context, listRef string) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ld, ok := s.lists[listRef]
	if !ok {
		return 0, notFound("list")
	}
	return int64(len(ld.updates)), nil
}

// DeletedYapsBefore implements yaps.Store.
func (s *Store) DeletedYapsBefore(ctx context.Context, t time.Time, limit int) ([]yaps.YapKey, error) {
	type hit struct {
		at  time.Time
		key yaps.YapKey
	}
	s.mu.RLock()
	var hits []hit
	for ref, ld := range s.lists {
		for id, y := range ld.yaps {
			if y.DeletedAt != nil && y.DeletedAt.Before(t) {
				hits = append(hits, hit{*y.DeletedAt, yaps.YapKey{ListRef: ref, ID: id}})
			}
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(hits, func(a, b hit) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if c := strings.Compare(a.key.ListRef, b.key.ListRef); c != 0 {
			return c
		}
		return strings.Compare(a.key.ID, b.key.ID)
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]yaps.YapKey, len(hits))
	for i, h := range hits {
		out[i] = h.key
	}
	return out, nil
}

// CreateAccount implements yaps.Store.
func (s *Store) CreateAccount(ctx context.Context, a *yaps.Account) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[a.ID]; ok {
		return conflict("account already exists")
	}
	if len(a.KeyHash) > 0 {
		if _, ok := s.acctHash[string(a.KeyHash)]; ok {
			return conflict("account key hash already exists")
		}
	}
	c := copyAccount(a)
	s.accounts[c.ID] = c
	if len(c.KeyHash) > 0 {
		s.acctHash[string(c.KeyHash)] = c
	}
	return nil
}

// AccountByHash implements yaps.Store.
func (s *Store) AccountByHash(ctx context.Context, hash []byte) (*yaps.Account, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.acctHash[string(hash)]
	if !ok || len(hash) == 0 {
		return nil, notFound("account")
	}
	return copyAccount(a), nil
}

// ClaimClients implements yaps.Store.
func (s *Store) ClaimClients(ctx context.Context, listRef, permissionID string, clients []uint64) (map[uint64]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ld, ok := s.lists[listRef]
	if !ok {
		return nil, notFound("list")
	}
	if ld.clients == nil {
		ld.clients = map[uint64]string{}
	}
	out := make(map[uint64]string, len(clients))
	for _, c := range clients {
		if _, taken := ld.clients[c]; !taken {
			ld.clients[c] = permissionID
		}
		out[c] = ld.clients[c]
	}
	return out, nil
}

// Account implements yaps.Store.
func (s *Store) Account(ctx context.Context, id string) (*yaps.Account, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.accounts[id]
	if !ok {
		return nil, notFound("account")
	}
	return copyAccount(a), nil
}

// Audit implements yaps.Store. A limit <= 0 means no limit.
func (s *Store) Audit(ctx context.Context, listRef string, afterSeq int64, limit int) ([]*yaps.AuditEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ld, ok := s.lists[listRef]
	if !ok {
		return nil, nil
	}
	i, _ := slices.BinarySearchFunc(ld.audit, afterSeq+1, func(e *yaps.AuditEntry, seq int64) int {
		return int(e.Seq - seq)
	})
	var out []*yaps.AuditEntry
	for ; i < len(ld.audit) && (limit <= 0 || len(out) < limit); i++ {
		e := *ld.audit[i]
		out = append(out, &e)
	}
	return out, nil
}

// Idempotency implements yaps.Store.
func (s *Store) Idempotency(ctx context.Context, scope, key string) (*yaps.IdempotencyRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.idem[idemKey{scope, key}]
	if !ok {
		return nil, notFound("idempotency record")
	}
	c := *r
	c.RequestHash = bytes.Clone(r.RequestHash)
	c.Body = bytes.Clone(r.Body)
	return &c, nil
}

// DeleteIdempotencyBefore implements yaps.Store.
func (s *Store) DeleteIdempotencyBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t = yaps.Truncate(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []idemKey
	for k, r := range s.idem {
		if r.CreatedAt.Before(t) {
			old = append(old, k)
		}
	}
	if limit > 0 && len(old) > limit {
		slices.SortFunc(old, func(a, b idemKey) int { return s.idem[a].CreatedAt.Compare(s.idem[b].CreatedAt) })
		old = old[:limit]
	}
	for _, k := range old {
		delete(s.idem, k)
	}
	return len(old), nil
}

// Close implements yaps.Store. The data stays readable; Close exists for
// interface symmetry.
func (s *Store) Close() error { return nil }

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := yaps.Truncate(*t)
	return &c
}

func copyList(l *yaps.List) yaps.List {
	c := *l
	c.CreatedAt = yaps.Truncate(l.CreatedAt)
	c.UpdatedAt = yaps.Truncate(l.UpdatedAt)
	c.ArchivedAt = copyTime(l.ArchivedAt)
	c.RolledUpAt = copyTime(l.RolledUpAt)
	return c
}

func copyPermission(p *yaps.Permission) *yaps.Permission {
	c := *p
	c.Scopes = slices.Clone(p.Scopes)
	c.CreatedAt = yaps.Truncate(p.CreatedAt)
	c.RevokedAt = copyTime(p.RevokedAt)
	c.CodeHash = bytes.Clone(p.CodeHash)
	return &c
}

func copyAccount(a *yaps.Account) *yaps.Account {
	c := *a
	c.CreatedAt = yaps.Truncate(a.CreatedAt)
	c.KeyHash = bytes.Clone(a.KeyHash)
	return &c
}

func copyString(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

func copyYap(y *yaps.Yap) *yaps.Yap {
	c := *y
	c.CreatedAt = yaps.Truncate(y.CreatedAt)
	c.UpdatedAt = yaps.Truncate(y.UpdatedAt)
	c.DeletedAt = copyTime(y.DeletedAt)
	c.DueAt = copyTime(y.DueAt)
	c.StartsAt = copyTime(y.StartsAt)
	c.EndsAt = copyTime(y.EndsAt)
	if y.Priority != nil {
		p := *y.Priority
		c.Priority = &p
	}
	c.Tags = slices.Clone(y.Tags)
	c.Title = copyString(y.Title)
	c.Location = copyString(y.Location)
	return &c
}
