package bunstore

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"github.com/yaps-dev/yaps/yaps"
)

// SQLite statements are prepared once per connection and reused: parsing
// and planning was a quarter of a point query's cost in modernc's SQLite.
// Postgres needs no help here, pgx already caches prepared statements per
// connection by SQL text.
//
// Writes to a SQLite file go through one dedicated connection (the
// writer), whose statements are prepared on it once: a transaction is
// BEGIN IMMEDIATE ... COMMIT on that connection, so a write neither takes
// a connection from the pool nor re-binds every statement to a *sql.Tx
// (Tx.StmtContext allocates and registers a statement per call). Its
// statements run with a context that is never cancelled: modernc's driver
// starts a goroutine per statement to watch a cancellable context, which
// was a fifth of a small write's cost. The caller's context is checked
// before the transaction begins; once begun, a write runs to its end (its
// statements are point queries).

// noCancel is the context of statements inside a SQLite write transaction.
var noCancel = context.Background()

// prepare prepares every query (after Migrate, when the tables exist).
func (s *Store) prepare(ctx context.Context) error {
	if s.pg || s.stmts.Load() != nil {
		return nil
	}
	m := map[string]*sql.Stmt{}
	for _, q := range s.q.all() {
		st, err := s.sqldb.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range m {
				_ = st.Close()
			}
			return wrap(err, "prepare")
		}
		m[q] = st
	}
	s.stmts.Store(&m)
	return nil
}

// wtx is one write transaction: the SQLite writer connection, or a
// *sql.Tx (Postgres, and sqlite::memory:, whose single connection cannot
// be set aside for writes).
type wtx struct {
	w     *writer
	tx    *sql.Tx
	wrote bool // a statement that writes ran (Store.exec)
}

// writer is the dedicated SQLite write connection, used under writeMu.
type writer struct {
	conn   *sql.Conn
	stmts  map[string]*sql.Stmt // prepared on conn
	direct *direct              // conn's SQLite handle, nil if not modernc's (direct.go)
	cache  writerCache          // see cache.go
	args   writeArgs            // see writeargs.go
}

const (
	sqlBegin       = "BEGIN IMMEDIATE"
	sqlCommit      = "COMMIT"
	sqlRollback    = "ROLLBACK"
	sqlDataVersion = "PRAGMA data_version"
	// One savepoint at a time, see group.go.
	sqlSavepoint  = "SAVEPOINT w"
	sqlRelease    = "RELEASE w"
	sqlRollbackTo = "ROLLBACK TO w"
)

func (w *writer) stmt(q string) (*sql.Stmt, error) {
	if st := w.stmts[q]; st != nil {
		return st, nil
	}
	st, err := w.conn.PrepareContext(noCancel, q)
	if err != nil {
		return nil, err
	}
	w.stmts[q] = st
	return st, nil
}

// exec runs q on the connection's SQLite handle directly if it can
// (direct.go), through database/sql if not.
func (w *writer) exec(q string, args ...any) (sql.Result, error) {
	if w.direct != nil {
		if res, ok, err := w.direct.exec(q, args); ok {
			return res, err
		}
	}
	st, err := w.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(noCancel, args...)
}

// close releases the connection, and has the pool discard it rather than
// reuse it: a transaction may still be open on it, and it carries
// wal_autocheckpoint=0, which must not reach the pool's other users (a
// host's *sql.DB given to New).
func (w *writer) close() {
	for _, st := range w.stmts {
		_ = st.Close()
	}
	if w.direct != nil {
		w.direct.close()
	}
	_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = w.conn.Close()
}

var errClosed = yaps.Errorf(yaps.EUNAVAILABLE, "bunstore: the store is closed")

// writerLocked returns the writer connection, opening it if needed.
// writeMu is held.
func (s *Store) writerLocked(ctx context.Context) (*writer, error) {
	if s.writer != nil {
		return s.writer, nil
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	c, err := s.sqldb.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// Checkpoints run beside the writer, not in its commits (checkpoint.go).
	if _, err := c.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0"); err != nil {
		_ = c.Close()
		return nil, err
	}
	if s.ckpt == nil {
		s.startCheckpointer()
	}
	s.writer = &writer{conn: c, stmts: map[string]*sql.Stmt{}}
	_ = c.Raw(func(dc any) error {
		s.writer.direct = directOf(dc)
		return nil
	})
	return s.writer, nil
}

// stmt returns the prepared form of q, bound to tx if tx is not nil, or nil
// if q is not prepared.
func (s *Store) stmt(ctx context.Context, tx *sql.Tx, q string) *sql.Stmt {
	m := s.stmts.Load()
	if m == nil {
		return nil
	}
	st := (*m)[q]
	if st != nil && tx != nil {
		return tx.StmtContext(ctx, st)
	}
	return st
}

// ctxOf returns the context for a statement of t: never cancelled inside
// a SQLite write transaction.
func (s *Store) ctxOf(ctx context.Context, t *wtx) context.Context {
	if t != nil && !s.pg {
		return noCancel
	}
	return ctx
}

func (s *Store) exec(ctx context.Context, t *wtx, q string, args ...any) (sql.Result, error) {
	if t != nil {
		t.wrote = true
	}
	if t != nil && t.w != nil {
		return t.w.exec(q, args...)
	}
	var tx *sql.Tx
	if t != nil {
		tx = t.tx
	}
	ctx = s.ctxOf(ctx, t)
	if st := s.stmt(ctx, tx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	if tx != nil {
		return tx.ExecContext(ctx, q, args...)
	}
	return s.sqldb.ExecContext(ctx, q, args...)
}

func (s *Store) query(ctx context.Context, t *wtx, q string, args ...any) (*sql.Rows, error) {
	if t != nil && t.w != nil {
		st, err := t.w.stmt(q)
		if err != nil {
			return nil, err
		}
		return st.QueryContext(noCancel, args...)
	}
	var tx *sql.Tx
	if t != nil {
		tx = t.tx
	}
	ctx = s.ctxOf(ctx, t)
	if st := s.stmt(ctx, tx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	if tx != nil {
		return tx.QueryContext(ctx, q, args...)
	}
	return s.sqldb.QueryContext(ctx, q, args...)
}

// row is a single-row result, like *sql.Row, that also carries an error
// from preparing the statement.
type row struct {
	r   *sql.Row
	err error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.r.Scan(dest...)
}

func (s *Store) queryRow(ctx context.Context, t *wtx, q string, args ...any) row {
	if t != nil && t.w != nil {
		st, err := t.w.stmt(q)
		if err != nil {
			return row{err: err}
		}
		return row{r: st.QueryRowContext(noCancel, args...)}
	}
	var tx *sql.Tx
	if t != nil {
		tx = t.tx
	}
	ctx = s.ctxOf(ctx, t)
	if st := s.stmt(ctx, tx, q); st != nil {
		return row{r: st.QueryRowContext(ctx, args...)}
	}
	if tx != nil {
		return row{r: tx.QueryRowContext(ctx, q, args...)}
	}
	return row{r: s.sqldb.QueryRowContext(ctx, q, args...)}
}

func (s *Store) closeStmts() {
	if !s.pg {
		s.writeMu.Lock()
		s.dropWriterLocked()
		s.writeMu.Unlock()
	}
	if m := s.stmts.Swap(nil); m != nil {
		for _, st := range *m {
			_ = st.Close()
		}
	}
}
