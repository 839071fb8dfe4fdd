package memstore

import (
	"bytes"
	"context"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

var _ yaps.ReplayableUpdater = (*Store)(nil)

// UpdateReplayable implements yaps.ReplayableUpdater: it is Update (the
// store runs each write alone).
func (s *Store) UpdateReplayable(ctx context.Context, listRef string, fn func(tx yaps.Tx) error) error {
	return s.Update(ctx, listRef, fn)
}

// Update implements yaps.Store. fn runs with the list's lock held but
// without the store-wide lock, so readers are never blocked by a slow fn;
// its changes are buffered in the tx and applied at once when it returns nil.
func (s *Store) Update(ctx context.Context, listRef string, fn func(tx yaps.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	ld, ok := s.lists[listRef]
	s.mu.RUnlock()
	if !ok {
		return notFound("list")
	}
	ld.lock.Lock()
	defer ld.lock.Unlock()

	s.mu.RLock()
	t := &tx{s: s, ld: ld, start: ld.list, lastSeq: ld.list.DocVersion}
	s.mu.RUnlock()
	err := fn(t)
	t.done = true
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.commit()
}

// tx buffers one Update's writes. Only the goroutine running fn touches it.
type tx struct {
	s       *Store
	ld      *listData
	start   yaps.List
	done    bool
	saved   *yaps.List
	lastSeq int64
	appends [][]byte
	puts    map[string]*yaps.Yap
	dels    map[string]bool
	perms   []*yaps.Permission
	revokes map[string]time.Time
	audit   []*yaps.AuditEntry
	idem    []*yaps.IdempotencyRecord
}

var errDone = yaps.Errorf(yaps.EINTERNAL, "memstore: tx used after Update returned")

var _ yaps.DocTx = (*tx)(nil)

// Doc implements yaps.DocTx. The list's lock keeps writers and compactions
// out until the tx ends.
func (t *tx) Doc() (*yaps.DocLog, error) {
	if t.done {
		return nil, errDone
	}
	return t.s.Doc(context.Background(), t.start.Ref, 0)
}

func (t *tx) List() *yaps.List {
	l := t.start
	return &l
}

func (t *tx) SaveList(l *yaps.List) error {
	if t.done {
		return errDone
	}
	if l.Ref != t.start.Ref {
		return yaps.Errorf(yaps.EINVALID, "SaveList of list %q inside the tx of %q", l.Ref, t.start.Ref)
	}
	c := copyList(l)
	t.saved = &c
	return nil
}

func (t *tx) UpdatesSince(seq int64) ([][]byte, error) {
	if t.done {
		return nil, errDone
	}
	t.s.mu.RLock()
	defer t.s.mu.RUnlock()
	if seq < t.ld.stateSeq {
		return nil, yaps.Errorf(yaps.ENOTFOUND, "updates after %d were compacted", seq)
	}
	var out [][]byte
	for i := seq - t.ld.stateSeq; i < int64(len(t.ld.updates)); i++ {
		out = append(out, bytes.Clone(t.ld.updates[i]))
	}
	base := t.ld.list.DocVersion
	for i, u := range t.appends {
		if base+int64(i)+1 > seq {
			out = append(out, bytes.Clone(u))
		}
	}
	return out, nil
}

func (t *tx) AppendUpdate(update []byte) (int64, error) {
	if t.done {
		return 0, errDone
	}
	t.appends = append(t.appends, bytes.Clone(update))
	t.lastSeq++
	return t.lastSeq, nil
}

func (t *tx) AppendUpdates(updates [][]byte) (int64, error) {
	if t.done {
		return 0, errDone
	}
	for _, u := range updates {
		if _, err := t.AppendUpdate(u); err != nil {
			return 0, err
		}
	}
	return t.lastSeq, nil
}

func (t *tx) PutYap(y *yaps.Yap) error {
	if t.done {
		return errDone
	}
	c := copyYap(y)
	c.ListRef = t.start.Ref
	if t.puts == nil {
		t.puts = map[string]*yaps.Yap{}
	}
	t.puts[c.ID] = c
	delete(t.dels, c.ID)
	return nil
}

func (t *tx) DeleteYap(id string) error {
	if t.done {
		return errDone
	}
	if t.dels == nil {
		t.dels = map[string]bool{}
	}
	t.dels[id] = true
	delete(t.puts, id)
	return nil
}

// permission finds a permission of this list as the tx sees it (pending
// revocations applied) without copying it.
func (t *tx) permission(id string) (yaps.Permission, bool) {
	for _, p := range t.perms {
		if p.ID == id {
			return t.withRevoke(p), true
		}
	}
	t.s.mu.RLock()
	defer t.s.mu.RUnlock()
	p, ok := t.s.perms[id]
	if !ok || p.ListRef != t.start.Ref {
		return yaps.Permission{}, false
	}
	return t.withRevoke(p), true
}

func (t *tx) withRevoke(p *yaps.Permission) yaps.Permission {
	c := *p
	if at, ok := t.revokes[p.ID]; ok && c.RevokedAt == nil {
		c.RevokedAt = &at
	}
	return c
}

func (t *tx) Permission(id string) (*yaps.Permission, error) {
	if t.done {
		return nil, errDone
	}
	p, ok := t.permission(id)
	if !ok {
		return nil, notFound("permission")
	}
	return copyPermission(&p), nil
}

var _ yaps.PermissionActiveTx = (*tx)(nil)

// PermissionActive implements yaps.PermissionActiveTx without copying the
// permission.
func (t *tx) PermissionActive(id string) (found, active bool, err error) {
	if t.done {
		return false, false, errDone
	}
	p, ok := t.permission(id)
	return ok, ok && p.Active(), nil
}

func (t *tx) CreatePermission(p *yaps.Permission) error {
	if t.done {
		return errDone
	}
	t.s.mu.RLock()
	err := t.s.checkNewPermission(p)
	t.s.mu.RUnlock()
	if err != nil {
		return err
	}
	for _, q := range t.perms {
		if q.ID == p.ID || bytes.Equal(q.CodeHash, p.CodeHash) {
			return conflict("permission already exists")
		}
	}
	c := copyPermission(p)
	c.ListRef = t.start.Ref
	t.perms = append(t.perms, c)
	return nil
}

func (t *tx) RevokePermission(id string, at time.Time) error {
	if t.done {
		return errDone
	}
	p, ok := t.permission(id)
	if !ok {
		return notFound("permission")
	}
	if p.RevokedAt != nil {
		return nil // keep the first revocation time
	}
	if t.revokes == nil {
		t.revokes = map[string]time.Time{}
	}
	t.revokes[id] = yaps.Truncate(at)
	return nil
}

func (t *tx) ActiveOwners() (int, error) {
	if t.done {
		return 0, errDone
	}
	n := 0
	count := func(p *yaps.Permission) {
		if _, revoked := t.revokes[p.ID]; p.Role == yaps.RoleOwner && p.RevokedAt == nil && !revoked {
			n++
		}
	}
	t.s.mu.RLock()
	for _, p := range t.ld.perms {
		count(p)
	}
	t.s.mu.RUnlock()
	for _, p := range t.perms {
		count(p)
	}
	return n, nil
}

func (t *tx) AppendAudit(e *yaps.AuditEntry) error {
	if t.done {
		return errDone
	}
	t.s.mu.Lock()
	t.s.auditSeq++
	e.Seq = t.s.auditSeq
	t.s.mu.Unlock()
	c := *e
	c.ListRef = t.start.Ref
	c.At = yaps.Truncate(e.At)
	t.audit = append(t.audit, &c)
	return nil
}

func (t *tx) PutIdempotency(r *yaps.IdempotencyRecord) error {
	if t.done {
		return errDone
	}
	for _, q := range t.idem {
		if q.Scope == r.Scope && q.Key == r.Key {
			return conflict("idempotency key already used")
		}
	}
	t.s.mu.RLock()
	taken := t.s.idemTaken(r)
	t.s.mu.RUnlock()
	if taken {
		return conflict("idempotency key already used")
	}
	t.idem = append(t.idem, r)
	return nil
}

// commit applies the buffered writes under the store lock. Conflicts that
// another list's writer could have caused since they were checked (global
// permission and idempotency keys) are checked again first, so commit
// either applies everything or nothing.
func (t *tx) commit() error {
	s, ld := t.s, t.ld
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range t.perms {
		if err := s.checkNewPermission(p); err != nil {
			return err
		}
	}
	for _, r := range t.idem {
		if s.idemTaken(r) {
			return conflict("idempotency key already used")
		}
	}
	if t.saved != nil {
		l := *t.saved
		l.CreatedAt = ld.list.CreatedAt
		l.DocVersion = ld.list.DocVersion
		ld.list = l
	}
	ld.updates = append(ld.updates, t.appends...)
	ld.list.DocVersion += int64(len(t.appends))
	for id, y := range t.puts {
		ld.yaps[id] = y
	}
	for id := range t.dels {
		delete(ld.yaps, id)
	}
	for _, p := range t.perms {
		s.addPermission(ld, p)
	}
	for id, at := range t.revokes {
		if p := s.perms[id]; p != nil && p.RevokedAt == nil {
			at := at
			p.RevokedAt = &at
		}
	}
	ld.audit = append(ld.audit, t.audit...)
	for _, r := range t.idem {
		s.putIdem(r)
	}
	return nil
}
