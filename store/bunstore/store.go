package bunstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/yaps-dev/yaps/yaps"
)

func notFound(what string) error { return yaps.Errorf(yaps.ENOTFOUND, "%s not found", what) }

// wrap gives a database error context; sql.ErrNoRows becomes ENOTFOUND,
// and a database that is busy or out of capacity EUNAVAILABLE (see
// temporary).
func wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(what)
	}
	var ye *yaps.Error
	if errors.As(err, &ye) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	err = fmt.Errorf("bunstore: %s: %w", what, err)
	if temporary(err) {
		return &yaps.Error{Code: yaps.EUNAVAILABLE, Message: msgBusy, Err: err}
	}
	return err
}

const msgBusy = "the database is busy; try again"

// temporary reports whether err says the database could not do the work
// now but may shortly, not that the request or the server is wrong: SQLite
// busy or locked past the busy timeout (another process holds the write
// lock), or Postgres out of connections or other resources, starting up,
// a lock or statement timeout a host set, a serialization failure or
// deadlock, or no connection at all. Clients get 503 (a sync connection
// closes with CloseOverloaded) instead of 500, which would report a fault.
func temporary(err error) bool {
	if c, ok := sqliteCode(err); ok {
		return c == sqliteBusy || c == sqliteLocked
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case sqlstateLockNotAvailable, "40001", "40P01", "57P03", "57014":
			return true
		}
		return strings.HasPrefix(pe.Code, "53") // insufficient resources
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// SQLite primary result codes (the low byte of an extended code).
const (
	sqliteBusy   = 5
	sqliteLocked = 6
)

// sqliteCode returns the primary result code of a SQLite error in err.
func sqliteCode(err error) (int, bool) {
	var se interface{ Code() int } // modernc.org/sqlite's *Error
	if !errors.As(err, &se) {
		return 0, false
	}
	return se.Code() & 0xff, true
}

// insertOnce runs an INSERT ... ON CONFLICT DO NOTHING (or DO UPDATE ...
// WHERE) and turns "no row inserted" into ECONFLICT.
func (s *Store) insertOnce(ctx context.Context, tx *wtx, what, query string, args ...any) error {
	res, err := s.exec(ctx, tx, query, args...)
	if err != nil {
		return wrap(err, what)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap(err, what)
	}
	if n == 0 {
		return yaps.Errorf(yaps.ECONFLICT, "%s already exists", what)
	}
	return nil
}

// writeTx runs fn in a write transaction: on SQLite under the process's
// write mutex, on the writer connection with BEGIN IMMEDIATE (see db.go)
// and committed together with other writes queued meanwhile (group.go),
// on Postgres in a READ COMMITTED transaction whose callers lock rows as
// needed.
func (s *Store) writeTx(ctx context.Context, fn func(tx *wtx) error) (err error) {
	return s.writeTxOf(ctx, fn, false)
}

// writeTxOf is writeTx; replayable says fn may run again from the start
// with the same effect (group.go).
func (s *Store) writeTxOf(ctx context.Context, fn func(tx *wtx) error, replayable bool) (err error) {
	if s.closed.Load() {
		return errClosed
	}
	if s.pg {
		// The transaction is begun without ctx's cancellation: database/sql
		// rolls a transaction back the moment its context ends, and a
		// Commit after that said sql.ErrTxDone, reported as a fault (500)
		// instead of a client that went away. Statements still run under
		// ctx; one that ended by the commit rolls back with its error, and
		// a COMMIT once sent runs to its end, so its outcome is known.
		return s.sqlTx(context.WithoutCancel(ctx), func(tx *wtx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return ctx.Err()
		})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n := s.sqldb.Stats().MaxOpenConnections; n == 1 {
		// sqlite::memory: (one connection, shared with readers).
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		return s.sqlTx(noCancel, fn)
	}
	return s.groupWrite(ctx, fn, replayable)
}

// dropWriterLocked discards the writer connection; the next write opens
// another. writeMu is held.
func (s *Store) dropWriterLocked() {
	if s.writer != nil {
		s.writer.close()
		s.writer = nil
	}
}

// sqlTx runs fn in a *sql.Tx begun with txCtx.
func (s *Store) sqlTx(txCtx context.Context, fn func(tx *wtx) error) (err error) {
	tx, err := s.sqldb.BeginTx(txCtx, nil)
	if err != nil {
		return wrap(err, "begin")
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(&wtx{tx: tx}); err != nil {
		return err
	}
	return wrap(tx.Commit(), "commit")
}

// CreateList implements yaps.Store. The list's DocVersion is set by the
// store: 1 with a first update, 0 without.
func (s *Store) CreateList(ctx context.Context, l *yaps.List, owner *yaps.Permission, firstUpdate []byte, idem *yaps.IdempotencyRecord) error {
	return s.writeTx(ctx, func(tx *wtx) error {
		if tx.w != nil {
			delete(tx.w.cache.lists, l.Ref)
			if owner != nil {
				delete(tx.w.cache.perms, owner.ID)
			}
		}
		c := *l
		c.DocVersion = 0
		if firstUpdate != nil {
			c.DocVersion = 1
		}
		if err := s.insertOnce(ctx, tx, "list", s.q.insertList, listArgs(&c)...); err != nil {
			return err
		}
		if owner != nil {
			if err := s.insertOnce(ctx, tx, "permission", s.q.insertPerm, permArgs(owner, l.Ref)...); err != nil {
				return err
			}
		}
		if firstUpdate != nil {
			if _, err := s.exec(ctx, tx, s.q.insertUpdate, l.Ref, int64(1), int64(1), firstUpdate); err != nil {
				return wrap(err, "append update")
			}
		}
		if idem != nil {
			return s.putIdem(ctx, tx, idem)
		}
		return nil
	})
}

// List implements yaps.Store.
func (s *Store) List(ctx context.Context, ref string) (*yaps.List, error) {
	l, err := scanList(s.queryRow(ctx, nil, s.q.listByRef, ref))
	return l, wrap(err, "list")
}

// ListsByAccount implements yaps.Store.
func (s *Store) ListsByAccount(ctx context.Context, accountID string, after *yaps.ListCursor, limit int) ([]*yaps.List, error) {
	afterAt, afterRef := int64(math.MinInt64), ""
	if after != nil {
		afterAt, afterRef = ms(after.CreatedAt), after.Ref
	}
	n := int64(limit)
	if n <= 0 {
		n = math.MaxInt32
	}
	rows, err := s.query(ctx, nil, s.q.listsByAccount, accountID, afterAt, afterRef, n)
	if err != nil {
		return nil, wrap(err, "lists")
	}
	defer rows.Close()
	var out []*yaps.List
	for rows.Next() {
		l, err := scanList(rows)
		if err != nil {
			return nil, wrap(err, "lists")
		}
		out = append(out, l)
	}
	return out, wrap(rows.Err(), "lists")
}

// PermissionByHash implements yaps.Store.
func (s *Store) PermissionByHash(ctx context.Context, hash []byte) (*yaps.Permission, error) {
	if len(hash) == 0 {
		return nil, notFound("permission")
	}
	p, err := scanPermission(s.queryRow(ctx, nil, s.q.permByHash, hash))
	return p, wrap(err, "permission")
}

// Permissions implements yaps.Store.
func (s *Store) Permissions(ctx context.Context, listRef string) ([]*yaps.Permission, error) {
	rows, err := s.query(ctx, nil, s.q.permsOfList, listRef)
	if err != nil {
		return nil, wrap(err, "permissions")
	}
	defer rows.Close()
	var out []*yaps.Permission
	for rows.Next() {
		p, err := scanPermission(rows)
		if err != nil {
			return nil, wrap(err, "permissions")
		}
		out = append(out, p)
	}
	return out, wrap(rows.Err(), "permissions")
}

// Yap implements yaps.Store.
func (s *Store) Yap(ctx context.Context, listRef, id string) (*yaps.Yap, error) {
	var (
		yid     string
		created int64
		deleted sql.NullInt64
		data    []byte
	)
	if err := s.queryRow(ctx, nil, s.q.yapByID, listRef, id).Scan(&yid, &created, &deleted, &data); err != nil {
		return nil, wrap(err, "yap")
	}
	return decodeYap(listRef, yid, created, deleted, data)
}

// Yaps implements yaps.Store. A Limit <= 0 means no limit.
func (s *Store) Yaps(ctx context.Context, listRef string, q yaps.YapQuery) ([]*yaps.Yap, error) {
	afterAt, afterID := int64(math.MinInt64), ""
	if q.After != nil {
		afterAt, afterID = ms(q.After.CreatedAt), q.After.ID
	}
	limit := int64(q.Limit)
	if limit <= 0 {
		limit = math.MaxInt32
	}
	query := s.q.yapsPageLive
	if q.IncludeDeleted {
		query = s.q.yapsPage
	}
	rows, err := s.query(ctx, nil, query, listRef, afterAt, afterID, limit)
	if err != nil {
		return nil, wrap(err, "yaps")
	}
	defer rows.Close()
	out := make([]*yaps.Yap, 0, min(limit, 64))
	var (
		id      string
		created int64
		deleted sql.NullInt64
		data    sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&id, &created, &deleted, &data); err != nil {
			return nil, wrap(err, "yaps")
		}
		y, err := decodeYap(listRef, id, created, deleted, data)
		if err != nil {
			return nil, err
		}
		out = append(out, y)
	}
	return out, wrap(rows.Err(), "yaps")
}

// Doc implements yaps.Store.
func (s *Store) Doc(ctx context.Context, listRef string, afterSeq int64) (*yaps.DocLog, error) {
	return s.doc(ctx, nil, listRef, afterSeq)
}

// doc is Doc, inside tx when not nil.
func (s *Store) doc(ctx context.Context, tx *wtx, listRef string, afterSeq int64) (*yaps.DocLog, error) {
	rows, err := s.query(ctx, tx, s.q.docHeaderAndUpdates, listRef, afterSeq)
	if err != nil {
		return nil, wrap(err, "doc")
	}
	defer rows.Close()
	var (
		d      *yaps.DocLog
		seq, a int64
		b      int64
		data   []byte
	)
	for rows.Next() {
		data = nil
		if err := rows.Scan(&seq, &a, &b, &data); err != nil {
			return nil, wrap(err, "doc")
		}
		if seq == 0 {
			d = &yaps.DocLog{State: data, StateSeq: a, LastSeq: b}
			continue
		}
		if d == nil {
			return nil, fmt.Errorf("bunstore: doc of %s: updates before the header", listRef)
		}
		// a is the row's n. A row that a compaction at a seq of the
		// caller's choosing cut through holds updates the state has.
		if d.Updates, err = appendRowUpdates(d.Updates, seq, a, data, max(afterSeq, d.StateSeq)); err != nil {
			return nil, fmt.Errorf("bunstore: doc of %s: %w", listRef, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(err, "doc")
	}
	if d == nil {
		return nil, notFound("list")
	}
	return d, nil
}

// CompactDoc implements yaps.Store. Compacting to a seq at or below the
// current state's is a no-op (a slower compactor lost the race); a seq past
// the log's end is EINVALID.
func (s *Store) CompactDoc(ctx context.Context, listRef string, seq int64, state []byte) error {
	return s.writeTx(ctx, func(tx *wtx) error {
		if tx.w != nil {
			delete(tx.w.cache.lists, listRef)
		}
		var last, stateSeq int64
		if err := s.queryRow(ctx, tx, s.q.compactRead, listRef).Scan(&last, &stateSeq); err != nil {
			return wrap(err, "list")
		}
		if seq > last {
			return yaps.Errorf(yaps.EINVALID, "compaction seq %d is past the log end %d", seq, last)
		}
		if seq <= stateSeq {
			return nil
		}
		if s.pg {
			if _, err := s.exec(ctx, tx, s.q.compactWrite, listRef, state, seq); err != nil {
				return wrap(err, "compact")
			}
		} else {
			if _, err := s.exec(ctx, tx, s.q.compactState, listRef, state); err != nil {
				return wrap(err, "compact")
			}
			if _, err := s.exec(ctx, tx, s.q.compactWrite, listRef, seq); err != nil {
				return wrap(err, "compact")
			}
		}
		_, err := s.exec(ctx, tx, s.q.compactDelete, listRef, seq)
		return wrap(err, "compact")
	})
}

// ListVersions implements yaps.Store: one statement per listVersionsMax
// refs.
func (s *Store) ListVersions(ctx context.Context, refs []string) (map[string]yaps.ListVersion, error) {
	out := make(map[string]yaps.ListVersion, len(refs))
	for len(refs) > 0 {
		n := min(len(refs), listVersionsMax)
		if err := s.listVersions(ctx, refs[:n], out); err != nil {
			return nil, wrap(err, "list versions")
		}
		refs = refs[n:]
	}
	return out, nil
}

// listVersions adds the versions of refs (1 to listVersionsMax of them) to
// out.
func (s *Store) listVersions(ctx context.Context, refs []string, out map[string]yaps.ListVersion) error {
	i, size := 0, listVersionsMin
	for size < len(refs) {
		i, size = i+1, size*2
	}
	args := make([]any, size)
	for j := range args {
		args[j] = refs[min(j, len(refs)-1)]
	}
	rows, err := s.query(ctx, nil, s.q.listVersions[i], args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ref string
			v   yaps.ListVersion
		)
		if err := rows.Scan(&ref, &v.DocVersion, &v.Permissions, &v.Revoked); err != nil {
			return err
		}
		out[ref] = v
	}
	return rows.Err()
}

// UpdateCount implements yaps.Store.
func (s *Store) UpdateCount(ctx context.Context, listRef string) (int64, error) {
	var n int64
	err := s.queryRow(ctx, nil, s.q.updateCount, listRef).Scan(&n)
	return n, wrap(err, "list")
}

// DeletedYapsBefore implements yaps.Store.
func (s *Store) DeletedYapsBefore(ctx context.Context, t time.Time, limit int) ([]yaps.YapKey, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	rows, err := s.query(ctx, nil, s.q.deletedBefore, ms(t), int64(limit))
	if err != nil {
		return nil, wrap(err, "deleted yaps")
	}
	defer rows.Close()
	var out []yaps.YapKey
	for rows.Next() {
		var k yaps.YapKey
		if err := rows.Scan(&k.ListRef, &k.ID); err != nil {
			return nil, wrap(err, "deleted yaps")
		}
		out = append(out, k)
	}
	return out, wrap(rows.Err(), "deleted yaps")
}

// ClaimClients implements yaps.Store: one transaction that inserts the
// claims no one holds (ON CONFLICT DO NOTHING, so concurrent claims leave
// one writer) and reads back the writer of each ID. The IDs are claimed in
// ascending order: on Postgres, two claims of the same IDs in different
// orders would each wait for the other's row and one would be aborted as
// a deadlock.
func (s *Store) ClaimClients(ctx context.Context, listRef, permissionID string, clients []uint64) (map[uint64]string, error) {
	clients = slices.Compact(slices.Sorted(slices.Values(clients)))
	out := make(map[uint64]string, len(clients))
	err := s.writeTx(ctx, func(tx *wtx) error {
		for _, c := range clients {
			if _, err := s.exec(ctx, tx, s.q.claimClient, listRef, int64(c), permissionID); err != nil {
				return err
			}
			var p string
			if err := s.queryRow(ctx, tx, s.q.clientWriter, listRef, int64(c)).Scan(&p); err != nil {
				return err
			}
			out[c] = p
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "client claims")
	}
	return out, nil
}

// CreateAccount implements yaps.Store.
func (s *Store) CreateAccount(ctx context.Context, a *yaps.Account) error {
	// Through the writer, not a pool connection taken under the write lock
	// (which could wait forever for the checkpointer's, on a small pool).
	return s.writeTx(ctx, func(tx *wtx) error {
		return s.insertOnce(ctx, tx, "account", s.q.insertAccount, a.ID, ms(a.CreatedAt), nullBytes(a.KeyHash))
	})
}

func (s *Store) account(ctx context.Context, query string, arg any) (*yaps.Account, error) {
	var (
		a       yaps.Account
		created int64
	)
	if err := s.queryRow(ctx, nil, query, arg).Scan(&a.ID, &created, &a.KeyHash); err != nil {
		return nil, wrap(err, "account")
	}
	a.CreatedAt = fromMs(created)
	return &a, nil
}

// AccountByHash implements yaps.Store.
func (s *Store) AccountByHash(ctx context.Context, hash []byte) (*yaps.Account, error) {
	if len(hash) == 0 {
		return nil, notFound("account")
	}
	return s.account(ctx, s.q.accountByHash, hash)
}

// Account implements yaps.Store.
func (s *Store) Account(ctx context.Context, id string) (*yaps.Account, error) {
	return s.account(ctx, s.q.accountByID, id)
}

// Audit implements yaps.Store. A limit <= 0 means no limit.
func (s *Store) Audit(ctx context.Context, listRef string, afterSeq int64, limit int) ([]*yaps.AuditEntry, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	rows, err := s.query(ctx, nil, s.q.auditPage, listRef, afterSeq, int64(limit))
	if err != nil {
		return nil, wrap(err, "audit")
	}
	defer rows.Close()
	var out []*yaps.AuditEntry
	for rows.Next() {
		var (
			e  yaps.AuditEntry
			at int64
		)
		if err := rows.Scan(&e.Seq, &e.ListRef, &at, &e.PermissionID, &e.Role, &e.Action, &e.YapID, &e.Detail); err != nil {
			return nil, wrap(err, "audit")
		}
		e.At = fromMs(at)
		out = append(out, &e)
	}
	return out, wrap(rows.Err(), "audit")
}

// Idempotency implements yaps.Store.
func (s *Store) Idempotency(ctx context.Context, scope, key string) (*yaps.IdempotencyRecord, error) {
	r := &yaps.IdempotencyRecord{Scope: scope, Key: key}
	var created int64
	if err := s.queryRow(ctx, nil, s.q.idemByKey, scope, key).Scan(&r.RequestHash, &r.Status, &r.Body, &created); err != nil {
		return nil, wrap(err, "idempotency record")
	}
	r.CreatedAt = fromMs(created)
	return r, nil
}
