package bunstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

func open(t *testing.T, dsn string) *bunstore.Store {
	t.Helper()
	s, err := bunstore.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestSQLiteFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) yaps.Store {
		return open(t, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
	})
}

func TestSQLiteMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) yaps.Store { return open(t, "sqlite::memory:") })
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.PostgresDSN(t) // skips early when unconfigured
	storetest.Run(t, func(t *testing.T) yaps.Store { return open(t, storetest.PostgresDSN(t)) })
}

// Two stores on one database stand in for two server processes: their
// writers to one list must still produce one gapless log.
func TestTwoStoresOneDatabase(t *testing.T) {
	t.Parallel()
	t.Run("SQLiteFile", func(t *testing.T) {
		t.Parallel()
		testTwoStores(t, "sqlite:"+filepath.Join(t.TempDir(), "shared.db"))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		testTwoStores(t, storetest.PostgresDSN(t))
	})
}

func testTwoStores(t *testing.T, dsn string) {
	ctx := context.Background()
	a, b := open(t, dsn), open(t, dsn) // the second Open finds the schema migrated
	l := &yaps.List{Ref: "shared", Kind: yaps.KindTask, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	require.NoError(t, a.CreateList(ctx, l, nil, []byte("u1"), nil))

	const perStore = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*perStore)
	for i := range 2 * perStore {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			errs <- s.Update(ctx, l.Ref, func(tx yaps.Tx) error {
				_, err := tx.AppendUpdate(fmt.Appendf(nil, "w%d", i))
				return err
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	d, err := b.Doc(ctx, l.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, int64(2*perStore+1), d.LastSeq)
	require.Len(t, d.Updates, 2*perStore+1)
	seen := map[string]bool{}
	for _, u := range d.Updates {
		require.False(t, seen[string(u)], "update %s stored twice", u)
		seen[string(u)] = true
	}
	got, err := a.List(ctx, l.Ref)
	require.NoError(t, err)
	require.Equal(t, d.LastSeq, got.DocVersion)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"", "mysql://x", "sqlite:", "postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2",
		"postgres://nobody@127.0.0.1:1/none?connect_timeout=2&password=secret"} {
		_, err := bunstore.Open(context.Background(), dsn)
		require.Error(t, err, dsn)
		require.NotContains(t, err.Error(), "secret", "DSN passwords stay out of errors")
	}
	// A database that cannot be opened is named.
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "y.db")
	_, err := bunstore.Open(context.Background(), "sqlite:"+missing)
	require.ErrorContains(t, err, missing)
	_, err = bunstore.Open(context.Background(), "postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2")
	require.ErrorContains(t, err, "127.0.0.1:1/none")
}

func TestPostgresMissingSchema(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	dsn = strings.Replace(dsn, "search_path=yaps_test_", "search_path=nosuch_", 1)
	_, err := bunstore.Open(context.Background(), dsn)
	require.ErrorContains(t, err, "search_path")
}

// Servers starting together on a fresh database migrate it once between
// them; none fails.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(t *testing.T) string{
		"SQLiteFile": func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "fresh.db") },
		"Postgres":   func(t *testing.T) string { return storetest.PostgresDSN(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := dsn(t)
			var wg sync.WaitGroup
			stores := make([]*bunstore.Store, 4)
			errs := make([]error, 4)
			for i := range stores {
				wg.Go(func() { stores[i], errs[i] = bunstore.Open(context.Background(), dsn) })
			}
			wg.Wait()
			for i, s := range stores {
				require.NoError(t, errs[i])
				require.NoError(t, s.CreateAccount(context.Background(), &yaps.Account{ID: fmt.Sprint(i), CreatedAt: time.Now()}))
				require.NoError(t, s.Close())
			}
		})
	}
}

// The settings the crash and concurrency guarantees rest on, on every
// pooled connection.
func TestSQLitePragmas(t *testing.T) {
	t.Parallel()
	s := open(t, "sqlite:"+filepath.Join(t.TempDir(), "p.db"))
	ctx := context.Background()
	for range 3 { // several connections at once
		conn, err := s.DB().DB.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		for pragma, want := range map[string]string{
			"journal_mode": "wal", "synchronous": "1", "foreign_keys": "1", "busy_timeout": "10000", "cache_size": "-16000",
		} {
			var got string
			require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got))
			require.Equal(t, want, got, pragma)
		}
	}
}

// A store made with New on the host's SQLite pool hands its write
// connection back discarded, so its wal_autocheckpoint=0 reaches no one.
func TestNewReleasesWriteConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "host.db")
	sqldb, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqldb.Close() })
	sqldb.SetMaxOpenConns(2)
	s, err := bunstore.New(bun.NewDB(sqldb, sqlitedialect.New()))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	at := time.Unix(1, 0)
	l := &yaps.List{Ref: "list-1", Title: "t", Kind: yaps.KindTask, CreatedAt: at, UpdatedAt: at}
	owner := &yaps.Permission{ID: "perm-1", ListRef: l.Ref, Role: yaps.RoleOwner, CreatedAt: at, CodeHash: []byte("h")}
	require.NoError(t, s.CreateList(ctx, l, owner, nil, nil)) // a write: the store takes its connection
	require.NoError(t, s.Close())

	conns := make([]*sql.Conn, 2) // every connection of the pool at once
	for i := range conns {
		conns[i], err = sqldb.Conn(ctx)
		require.NoError(t, err)
		defer conns[i].Close()
	}
	for i, c := range conns {
		var n int
		require.NoError(t, c.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&n))
		require.Equal(t, 1000, n, "connection %d", i)
	}
}

// A store on a host's SQLite database refuses writes once closed, instead
// of taking a connection from the host's pool again (and starting its
// checkpointer) until another Close.
func TestWriteAfterCloseOnHostDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "host.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	t.Cleanup(func() { _ = db.Close() })
	st, err := bunstore.New(db)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	svc, err := yaps.NewService(yaps.Config{Store: st, PurgeInterval: -1, PollInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	_, err = svc.CreateList(ctx, yaps.CreateListInput{})
	require.NoError(t, err)

	require.NoError(t, st.Close())
	require.Zero(t, sqldb.Stats().InUse)
	_, err = svc.CreateList(ctx, yaps.CreateListInput{})
	require.True(t, yaps.IsCode(err, yaps.EUNAVAILABLE), "%v", err)
	require.Zero(t, sqldb.Stats().InUse, "a connection of the host's pool is held")
}

// Every write after Close fails with EUNAVAILABLE, on each kind of
// database: on Postgres it was a 500 (the pool was closed) or, on a host's
// database, simply written.
func TestWritesAfterClose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *bunstore.Store
	}{
		{"SQLiteFile", func(t *testing.T) *bunstore.Store {
			s, err := bunstore.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
			require.NoError(t, err)
			return s
		}},
		{"SQLiteMemory", func(t *testing.T) *bunstore.Store {
			s, err := bunstore.Open(context.Background(), "sqlite::memory:")
			require.NoError(t, err)
			return s
		}},
		{"Postgres", func(t *testing.T) *bunstore.Store {
			s, err := bunstore.Open(context.Background(), storetest.PostgresDSN(t))
			require.NoError(t, err)
			return s
		}},
		{"PostgresHostDB", func(t *testing.T) *bunstore.Store {
			sqldb, err := sql.Open("pgx", storetest.PostgresDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = sqldb.Close() })
			s, err := bunstore.New(bun.NewDB(sqldb, pgdialect.New()))
			require.NoError(t, err)
			require.NoError(t, s.Migrate(context.Background()))
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := tc.open(t)
			at := time.UnixMilli(time.Now().UnixMilli()).UTC()
			l := &yaps.List{Ref: "list-1", Title: "t", Kind: yaps.KindTask, CreatedAt: at, UpdatedAt: at}
			owner := &yaps.Permission{ID: "perm-1", ListRef: l.Ref, Role: yaps.RoleOwner, CreatedAt: at, CodeHash: []byte("h")}
			require.NoError(t, s.CreateList(ctx, l, owner, []byte("u1"), nil))
			row, err := s.List(ctx, l.Ref)
			require.NoError(t, err)
			require.NoError(t, s.Close())

			unavailable := func(what string, err error) {
				t.Helper()
				require.Truef(t, yaps.IsCode(err, yaps.EUNAVAILABLE), "%s after Close: %v", what, err)
			}
			unavailable("Update", s.Update(ctx, l.Ref, func(tx yaps.Tx) error {
				_, err := tx.AppendUpdate([]byte("u2"))
				return err
			}))
			l2 := *l
			l2.Ref = "list-2"
			owner2 := *owner
			owner2.ID, owner2.ListRef = "perm-2", l2.Ref
			unavailable("CreateList", s.CreateList(ctx, &l2, &owner2, nil, nil))
			unavailable("CreateAccount", s.CreateAccount(ctx, &yaps.Account{ID: "acct-1", CreatedAt: at}))
			_, err = s.ClaimClients(ctx, l.Ref, owner.ID, []uint64{1})
			unavailable("ClaimClients", err)
			unavailable("CompactDoc", s.CompactDoc(ctx, l.Ref, 1, []byte("state")))
			next := row.Clone()
			next.DocVersion++
			_, err = s.WritePrepared(ctx, &yaps.PreparedWrite{Expect: row, List: next, PermissionID: owner.ID,
				Ops: []yaps.PreparedOp{{Update: []byte("u2")}}})
			if !errors.Is(err, yaps.ErrPreparedUnsupported) {
				unavailable("WritePrepared", err)
			}
		})
	}
}
