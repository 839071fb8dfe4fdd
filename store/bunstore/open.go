package bunstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/migrate"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/yaps-dev/yaps/internal/rawnet"
	"github.com/yaps-dev/yaps/yaps"
)

//go:embed migrations
var migrationsFS embed.FS

// Store is a yaps.Store on SQLite or Postgres. It is safe for concurrent use.
type Store struct {
	db     *bun.DB
	sqldb  *sql.DB
	pg     bool
	q      *queries
	ownsDB bool

	// writeMu serializes this process's SQLite writers. SQLite allows one
	// writer per file anyway; waiting here is a cheap handoff, while
	// waiting in SQLite's busy handler is a sleep-and-retry loop that
	// collapses throughput under contention. Unused on Postgres.
	writeMu sync.Mutex
	writer  *writer // SQLite file: the write connection (db.go), under writeMu
	group   batchQueue[*writeReq]
	ckpt    *checkpointer // SQLite file: see checkpoint.go; set under writeMu
	// savepoints counts the savepoints group commits took (tests).
	savepoints atomic.Int64
	closed     atomic.Bool // Close was called

	stmts atomic.Pointer[map[string]*sql.Stmt] // SQLite only, see db.go

	// Postgres prepared writes (prepared.go).
	prepGroup  prepGroup
	noPipeline atomic.Bool // the driver is not pgx's: decline them

	// afterMigrationStatus, when set (tests), runs once applyMigrations
	// has read which migrations are applied.
	afterMigrationStatus func()
}

var _ yaps.Store = (*Store)(nil)

// Open connects to the database named by dsn, runs the migrations and
// returns the store. Accepted forms:
//
//	sqlite:PATH               a SQLite file, created if missing
//	sqlite::memory:           a private in-memory SQLite database
//	postgres://... or postgresql://...
//
// SQLite runs in WAL mode with synchronous=NORMAL (durable against a
// process crash; an OS crash may lose the last transactions), a busy
// timeout, foreign keys on, and write transactions that take the write lock
// up front (BEGIN IMMEDIATE) so concurrent writers queue instead of failing
// with SQLITE_BUSY. Opening a SQLite file also makes SQLite write each WAL
// frame with one pwrite, process-wide (see walframes.go). Query parameters
// of a postgres DSN are passed to pgx, so e.g. search_path=myschema works.
func Open(ctx context.Context, dsn string) (*Store, error) {
	var (
		sqldb *sql.DB
		db    *bun.DB
		err   error
	)
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return nil, errors.New("bunstore: a sqlite DSN needs a path (or :memory:)")
		}
		sqldb, err = openSQLite(path)
		if err != nil {
			return nil, err
		}
		db = bun.NewDB(sqldb, sqlitedialect.New())
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		sqldb, err = openPostgres(dsn)
		if err != nil {
			return nil, fmt.Errorf("bunstore: open postgres: %w", err)
		}
		n := max(8, 4*runtime.GOMAXPROCS(0))
		sqldb.SetMaxOpenConns(n)
		sqldb.SetMaxIdleConns(n)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		db = bun.NewDB(sqldb, pgdialect.New())
	default:
		return nil, fmt.Errorf("bunstore: unsupported DSN %q: want sqlite:PATH, sqlite::memory: or postgres://", redact(dsn))
	}
	if err := retryBusy(ctx, func() error { return sqldb.PingContext(ctx) }); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("bunstore: connect to %s: %w", dbName(dsn), err)
	}
	if db.Dialect().Name() == dialect.SQLite && dsn != "sqlite::memory:" {
		// WAL is a property of the file: set once here, not per connection.
		if err := retryBusy(ctx, func() error {
			_, err := sqldb.ExecContext(ctx, "PRAGMA journal_mode=WAL")
			return err
		}); err != nil {
			_ = sqldb.Close()
			return nil, fmt.Errorf("bunstore: sqlite WAL: %w", err)
		}
	}
	s, err := New(db)
	if err != nil {
		_ = sqldb.Close()
		return nil, err
	}
	s.ownsDB = true
	if err := s.Migrate(ctx); err != nil {
		_ = sqldb.Close()
		return nil, err
	}
	return s, nil
}

// retryBusy runs fn until it does not fail with SQLITE_BUSY: switching a
// fresh file to WAL needs an exclusive lock for which SQLite does not wait,
// so servers starting together on a new file would otherwise fail.
func retryBusy(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if c, _ := sqliteCode(err); err == nil || attempt == 100 || c != sqliteBusy {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dbName names the database of dsn for an error message: the SQLite path,
// or the Postgres host and database (no user, password or parameters).
func dbName(dsn string) string {
	if p, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		return p
	}
	if u, err := url.Parse(dsn); err == nil {
		return "postgres " + u.Host + u.Path
	}
	return "postgres"
}

// redact drops the password from a DSN for error messages.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return dsn
}

func openSQLite(path string) (*sql.DB, error) {
	memory := path == ":memory:"
	if !memory {
		installWALFrameWrites()
	}
	params := url.Values{}
	// cache_size is per connection (16 MiB instead of 2): the working set
	// of a busy server is the lists' hot pages.
	for _, p := range []string{"busy_timeout(10000)", "foreign_keys(1)", "synchronous(NORMAL)",
		"cache_size(-16000)", "temp_store(MEMORY)", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit)} {
		params.Add("_pragma", p)
	}
	// Read-only transactions still begin DEFERRED (modernc honours
	// TxOptions.ReadOnly); write transactions lock at BEGIN.
	params.Set("_txlock", "immediate")
	name := "file:" + path
	if memory {
		name = ":memory:"
	}
	sqldb, err := sql.Open("sqlite", name+"?"+params.Encode())
	if err != nil {
		return nil, fmt.Errorf("bunstore: open sqlite: %w", err)
	}
	if memory {
		// Every connection to :memory: is a separate database: keep one.
		sqldb.SetMaxOpenConns(1)
		sqldb.SetMaxIdleConns(1)
		sqldb.SetConnMaxLifetime(0)
		sqldb.SetConnMaxIdleTime(0)
	} else {
		n := max(4, 2*runtime.GOMAXPROCS(0))
		sqldb.SetMaxOpenConns(n)
		sqldb.SetMaxIdleConns(n)
	}
	return sqldb, nil
}

// New wraps a Bun database the application already opened (SQLite or
// Postgres dialect). It does not migrate (call Migrate) and Close does not
// close db. For SQLite, open db with the pragmas Open uses (WAL, busy
// timeout, _txlock=immediate) to get the same behaviour; the store then
// holds one connection of db's pool for its writes (set to
// wal_autocheckpoint=0: it checkpoints in the background) until Close,
// which has the pool discard it, so call Close before closing db.
func New(db *bun.DB) (*Store, error) {
	s := &Store{db: db, sqldb: db.DB}
	switch db.Dialect().Name() {
	case dialect.PG:
		s.pg = true
	case dialect.SQLite:
	default:
		return nil, fmt.Errorf("bunstore: unsupported dialect %s", db.Dialect().Name())
	}
	s.q = buildQueries(s.pg)
	return s, nil
}

// DB returns the underlying Bun database, e.g. for health checks.
func (s *Store) DB() *bun.DB { return s.db }

// Migrate brings the schema up to date with the migrations embedded in the
// binary. On Postgres it holds an advisory lock meanwhile, so several
// processes starting at once migrate one after another.
func (s *Store) Migrate(ctx context.Context) error {
	dir := "migrations/sqlite"
	if s.pg {
		dir = "migrations/postgres"
	}
	sub, err := fs.Sub(migrationsFS, dir)
	if err != nil {
		return err
	}
	return s.migrate(ctx, sub)
}

// migrationsTable records the applied migrations (bun's format).
const migrationsTable = "yaps_migrations"

// migrator returns bun's migrator for the migrations in sub and their
// statements by migration.
func (s *Store) migrator(sub fs.FS) (*migrate.Migrator, map[string][]string, error) {
	ms := migrate.NewMigrations()
	if err := ms.Discover(sub); err != nil {
		return nil, nil, fmt.Errorf("bunstore: migrations: %w", err)
	}
	queries, err := migrationQueries(sub)
	if err != nil {
		return nil, nil, fmt.Errorf("bunstore: migrations: %w", err)
	}
	return migrate.NewMigrator(s.db, ms,
		migrate.WithTableName(migrationsTable),
		migrate.WithLocksTableName("yaps_migration_locks")), queries, nil
}

func (s *Store) migrate(ctx context.Context, sub fs.FS) error {
	m, queries, err := s.migrator(sub)
	if err != nil {
		return err
	}

	if s.pg {
		conn, err := s.sqldb.Conn(ctx)
		if err != nil {
			return fmt.Errorf("bunstore: migrate: %w", err)
		}
		defer conn.Close()
		// The key is per schema so parallel test schemas don't wait on
		// each other.
		var schema sql.NullString
		if err := conn.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return fmt.Errorf("bunstore: migrate: %w", err)
		}
		if !schema.Valid {
			return errors.New("bunstore: migrate: no schema of the search_path exists")
		}
		h := fnv.New64a()
		h.Write([]byte("yaps-migrate:" + schema.String))
		key := int64(h.Sum64())
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
			return fmt.Errorf("bunstore: migrate lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key) //nolint:errcheck
	} else {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	// On SQLite another process may be migrating the same file at the same
	// moment; its migration then makes ours fail, and a retry finds the
	// work done. (Postgres runs under the advisory lock.)
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		if err = m.Init(ctx); err != nil {
			err = fmt.Errorf("bunstore: migrate init: %w", err)
			continue
		}
		if err = s.applyMigrations(ctx, m, queries); err != nil {
			err = fmt.Errorf("bunstore: migrate: %w", err)
			if errors.Is(err, errNewerSchema) {
				return err // no retry can help
			}
			continue
		}
		return s.prepare(ctx)
	}
	return err
}

// Close stops the background checkpointer and releases the SQLite write
// connection (see New), and closes the database if Open opened it.
//
// Writes after Close fail with yaps.EUNAVAILABLE: on a host's database
// they would otherwise take a connection from the host's pool again and
// restart the checkpointer, and keep both until the next Close.
func (s *Store) Close() error {
	s.writeMu.Lock()
	s.closed.Store(true)
	ck := s.ckpt
	s.ckpt = nil
	s.writeMu.Unlock()
	ck.close()
	s.closeStmts()
	if !s.ownsDB {
		return nil
	}
	return s.db.Close()
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// sqlText turns a query written with Postgres placeholders ($1) into the
// dialect's form (?1 for SQLite).
func sqlText(pg bool, q string) string {
	if pg {
		return q
	}
	return placeholder.ReplaceAllString(q, "?$1")
}

// openPostgres opens dsn through pgx, its sockets read and written with
// raw system calls (internal/rawnet): every write waits on a round trip to
// Postgres, and a write or read the scheduler counts as a system call
// keeps the runtime's monitor polling.
func openPostgres(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(pgReadDSN(dsn))
	if err != nil {
		return nil, err
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawnet.Wrap(c), nil
	}
	return stdlib.OpenDB(*cfg), nil
}
