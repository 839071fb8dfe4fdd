package bunstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// Update implements yaps.Store. On Postgres the list row is locked with
// SELECT ... FOR UPDATE, which serializes writers of the list across
// processes; on SQLite the transaction holds the database's write lock.
// The (list_ref, seq) primary key of the update log is the last line of
// defence: a second writer appending the same seq fails with ECONFLICT
// instead of forking the document.
//
// Writes go to the database as fn makes them and the transaction rolls
// back if fn fails. The list row itself is written once, at the end:
// SaveList only records the new values, and DocVersion is always set to
// the log's last seq.
//
// fn must reach the database only through tx. On SQLite a nested Update
// (of any list) waits forever for the process's write mutex, and on
// sqlite::memory: even a plain read waits for the single connection the
// transaction holds.
func (s *Store) Update(ctx context.Context, listRef string, fn func(tx yaps.Tx) error) error {
	return s.update(ctx, listRef, fn, false)
}

var _ yaps.ReplayableUpdater = (*Store)(nil)

// UpdateReplayable implements yaps.ReplayableUpdater: on a SQLite file, a
// batch of such writes commits without a savepoint per write (group.go).
func (s *Store) UpdateReplayable(ctx context.Context, listRef string, fn func(tx yaps.Tx) error) error {
	return s.update(ctx, listRef, fn, true)
}

func (s *Store) update(ctx context.Context, listRef string, fn func(tx yaps.Tx) error, replayable bool) error {
	return s.writeTxOf(ctx, func(sqlTx *wtx) error {
		t := &tx{ctx: ctx, s: s, q: s.q, tx: sqlTx}
		var cache *writerCache
		if sqlTx.w != nil {
			cache = &sqlTx.w.cache
		}
		if l, stateSeq, ok := cache.listOK(listRef); ok {
			t.start, t.stateSeq = l, stateSeq
		} else {
			l, err := scanList(s.queryRow(ctx, sqlTx, s.q.listForUpdate, listRef), &t.stateSeq)
			if err != nil {
				return wrap(err, "list")
			}
			t.start = *l
			if cache != nil {
				cache.putList(l, t.stateSeq)
			}
		}
		t.lastSeq = t.start.DocVersion
		err := fn(t)
		t.done = true
		if err != nil {
			return err
		}
		var saved yaps.List
		switch {
		case t.saved != nil:
			if cache != nil {
				delete(cache.lists, listRef)
				saved = storedList(t.saved, t.start, t.lastSeq)
			}
			_, err = s.exec(ctx, sqlTx, s.q.saveList, sqlTx.args().saveListArgs(t.saved, t.lastSeq)...)
		case t.lastSeq != t.start.DocVersion:
			if cache != nil {
				delete(cache.lists, listRef)
				saved = t.start
				saved.DocVersion = t.lastSeq
			}
			_, err = s.exec(ctx, sqlTx, s.q.setDocVersion, listRef, t.lastSeq)
		default:
			return nil
		}
		if err != nil {
			return wrap(err, "save list")
		}
		if cache != nil {
			cache.putList(&saved, t.stateSeq)
		}
		return nil
	}, replayable)
}

// tx is the yaps.Tx of one Update.
type tx struct {
	ctx      context.Context
	s        *Store
	q        *queries
	tx       *wtx
	start    yaps.List
	stateSeq int64
	lastSeq  int64
	saved    *yaps.List
	done     bool
}

var errDone = yaps.Errorf(yaps.EINTERNAL, "bunstore: tx used after Update returned")

func (t *tx) List() *yaps.List { return t.start.Clone() }

func (t *tx) SaveList(l *yaps.List) error {
	if t.done {
		return errDone
	}
	if l.Ref != t.start.Ref {
		return yaps.Errorf(yaps.EINVALID, "SaveList of list %q inside the tx of %q", l.Ref, t.start.Ref)
	}
	c := *l
	t.saved = &c
	return nil
}

var _ yaps.DocTx = (*tx)(nil)

// Doc implements yaps.DocTx: the list row's lock (Postgres) or the
// database's write lock (SQLite) keeps writers and compactions out.
func (t *tx) Doc() (*yaps.DocLog, error) {
	if t.done {
		return nil, errDone
	}
	return t.s.doc(t.ctx, t.tx, t.start.Ref, 0)
}

func (t *tx) UpdatesSince(seq int64) ([][]byte, error) {
	if t.done {
		return nil, errDone
	}
	if seq < t.stateSeq {
		return nil, yaps.Errorf(yaps.ENOTFOUND, "updates after %d were compacted", seq)
	}
	if seq >= t.lastSeq {
		return nil, nil
	}
	rows, err := t.s.query(t.ctx, t.tx, t.q.updatesSince, t.start.Ref, seq)
	if err != nil {
		return nil, wrap(err, "updates")
	}
	defer rows.Close()
	out := make([][]byte, 0, t.lastSeq-seq)
	for rows.Next() {
		var (
			last, n int64
			b       []byte
		)
		if err := rows.Scan(&last, &n, &b); err != nil {
			return nil, wrap(err, "updates")
		}
		if out, err = appendRowUpdates(out, last, n, b, seq); err != nil {
			return nil, err
		}
	}
	return out, wrap(rows.Err(), "updates")
}

func (t *tx) AppendUpdate(update []byte) (int64, error) {
	return t.AppendUpdates([][]byte{update})
}

// AppendUpdates appends updates as one row (updaterows.go).
func (t *tx) AppendUpdates(updates [][]byte) (int64, error) {
	if t.done {
		return 0, errDone
	}
	if len(updates) == 0 {
		return t.lastSeq, nil
	}
	data := packUpdates(updates)
	if data == nil {
		data = []byte{} // data is NOT NULL
	}
	n := int64(len(updates))
	last := t.lastSeq + n
	args := t.tx.args().updateArgs(t.start.Ref, last, n, data)
	if err := t.s.insertOnce(t.ctx, t.tx, "document update", t.q.insertUpdate, args...); err != nil {
		return 0, err
	}
	t.lastSeq = last
	return last, nil
}

func (t *tx) PutYap(y *yaps.Yap) error {
	if t.done {
		return errDone
	}
	args := t.tx.args().yapArgs(t.start.Ref, y)
	w := t.tx.w
	if w == nil {
		_, err := t.s.exec(t.ctx, t.tx, t.q.putYap, args...)
		return wrap(err, "put yap")
	}
	// On the SQLite writer, a row this connection last wrote with the same
	// times (the usual edit) gets its data rewritten only. The hint may be
	// stale (a write rolled back to its savepoint): the UPDATE then
	// matches no row and the upsert below writes it.
	created, deleted := ms(y.CreatedAt), msPtr(y.DeletedAt)
	if w.cache.yapStored(t.start.Ref, y.ID, created, deleted) {
		res, err := t.s.exec(t.ctx, t.tx, t.q.putYapData, args...)
		if err != nil {
			return wrap(err, "put yap")
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			return nil
		}
	}
	if _, err := t.s.exec(t.ctx, t.tx, t.q.putYap, args...); err != nil {
		return wrap(err, "put yap")
	}
	w.cache.putYap(t.start.Ref, y.ID, created, deleted)
	return nil
}

func (t *tx) DeleteYap(id string) error {
	if t.done {
		return errDone
	}
	if w := t.tx.w; w != nil {
		delete(w.cache.yaps, yapKey{t.start.Ref, id})
	}
	_, err := t.s.exec(t.ctx, t.tx, t.q.deleteYap, t.start.Ref, id)
	return wrap(err, "delete yap")
}

func (t *tx) Permission(id string) (*yaps.Permission, error) {
	if t.done {
		return nil, errDone
	}
	p, err := scanPermission(t.s.queryRow(t.ctx, t.tx, t.q.permOfList, id, t.start.Ref))
	return p, wrap(err, "permission")
}

var _ yaps.PermissionActiveTx = (*tx)(nil)

// PermissionActive implements yaps.PermissionActiveTx.
func (t *tx) PermissionActive(id string) (found, active bool, err error) {
	if t.done {
		return false, false, errDone
	}
	var cache *writerCache
	if t.tx.w != nil {
		cache = &t.tx.w.cache
		if active, ok := cache.perm(id, t.start.Ref); ok {
			return true, active, nil
		}
	}
	err = t.s.queryRow(t.ctx, t.tx, t.q.permActive, id, t.start.Ref).Scan(&active)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, wrap(err, "permission")
	}
	if cache != nil {
		cache.putPerm(id, t.start.Ref, active)
	}
	return true, active, nil
}

func (t *tx) CreatePermission(p *yaps.Permission) error {
	if t.done {
		return errDone
	}
	return t.s.insertOnce(t.ctx, t.tx, "permission", t.q.insertPerm, permArgs(p, t.start.Ref)...)
}

func (t *tx) RevokePermission(id string, at time.Time) error {
	if t.done {
		return errDone
	}
	if t.tx.w != nil {
		delete(t.tx.w.cache.perms, id)
	}
	res, err := t.s.exec(t.ctx, t.tx, t.q.revokePerm, id, t.start.Ref, ms(at))
	if err != nil {
		return wrap(err, "revoke permission")
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return wrap(err, "revoke permission")
	}
	// Nothing changed: unknown, or already revoked (keep the first time).
	_, err = t.Permission(id)
	return err
}

func (t *tx) ActiveOwners() (int, error) {
	if t.done {
		return 0, errDone
	}
	var n int
	err := t.s.queryRow(t.ctx, t.tx, t.q.activeOwners, t.start.Ref).Scan(&n)
	return n, wrap(err, "active owners")
}

func (t *tx) AppendAudit(e *yaps.AuditEntry) error {
	if t.done {
		return errDone
	}
	args := t.tx.args().auditArgs(t.start.Ref, e)
	if t.s.pg {
		return wrap(t.s.queryRow(t.ctx, t.tx, t.q.insertAudit, args...).Scan(&e.Seq), "append audit")
	}
	// SQLite: seq is the rowid; Exec skips RETURNING's result-set machinery.
	res, err := t.s.exec(t.ctx, t.tx, t.q.insertAuditRowid, args...)
	if err == nil {
		e.Seq, err = res.LastInsertId()
	}
	return wrap(err, "append audit")
}

func (t *tx) PutIdempotency(r *yaps.IdempotencyRecord) error {
	if t.done {
		return errDone
	}
	return t.s.putIdem(t.ctx, t.tx, r)
}
