package bunstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// A write that cannot get the database's write lock within the busy
// timeout (another process holds it) is EUNAVAILABLE, a 503, not an
// internal error: nothing is wrong with the request or the server.
func TestBusyDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "host.db")
	s := hostStore(t, path, 50, 0)

	// Another process's writer, as far as SQLite can tell.
	other, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer other.Close()
	hold, err := other.Conn(ctx)
	require.NoError(t, err)
	defer hold.Close()
	_, err = hold.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)

	err = appendUpdate(ctx, s, "l", "u1")
	require.Error(t, err)
	require.Equal(t, yaps.EUNAVAILABLE, yaps.ErrorCode(err), "%v", err)
	require.Equal(t, msgBusy, yaps.ErrorMessage(err))
	err = s.CreateAccount(ctx, &yaps.Account{ID: "a1", CreatedAt: time.Now()})
	require.Equal(t, yaps.EUNAVAILABLE, yaps.ErrorCode(err), "%v", err)

	_, err = hold.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, appendUpdate(ctx, s, "l", "u1")) // and it recovers
	log, err := s.Doc(ctx, "l", 0)
	require.NoError(t, err)
	require.Len(t, log.Updates, 2)
}

// On Postgres, a lock timeout the host configured (a run-time parameter of
// the DSN here) is EUNAVAILABLE too.
func TestLockTimeoutUnavailablePostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.PostgresDSN(t)
	s, err := Open(ctx, dsn+"&lock_timeout=50")
	require.NoError(t, err)
	defer s.Close()
	now := time.Now()
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "l", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))

	other, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, "SELECT 1 FROM lists WHERE ref = 'l' FOR UPDATE")
	require.NoError(t, err)

	err = appendUpdate(ctx, s, "l", "u1")
	require.Error(t, err)
	require.Equal(t, yaps.EUNAVAILABLE, yaps.ErrorCode(err), "%v", err)
	require.NoError(t, tx.Rollback())
	require.NoError(t, appendUpdate(ctx, s, "l", "u1"))
}

// hostStore is a store on a host's own SQLite database at path (New, then
// Migrate), with the given busy timeout in milliseconds and at most
// maxConns connections (0: no bound), holding list "l" with one update.
func hostStore(t *testing.T, path string, busyMS, maxConns int) *Store {
	t.Helper()
	ctx := context.Background()
	sqldb, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=busy_timeout(%d)&_txlock=immediate", path, busyMS))
	require.NoError(t, err)
	t.Cleanup(func() { sqldb.Close() })
	sqldb.SetMaxOpenConns(maxConns)
	s, err := New(bun.NewDB(sqldb, sqlitedialect.New()))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "l", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))
	return s
}

// appendUpdate appends update to the log of list ref in a write of its own.
func appendUpdate(ctx context.Context, s *Store, ref, update string) error {
	return s.Update(ctx, ref, func(tx yaps.Tx) error {
		_, err := tx.AppendUpdate([]byte(update))
		return err
	})
}

// A Postgres DSN may trade durability for throughput as the README
// describes: synchronous_commit=off reaches the store's connections, which
// the batches of prepared writes use too (their settings leave it alone).
func TestPostgresSynchronousCommitOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ param, want string }{{"", "on"}, {"&synchronous_commit=off", "off"}} {
		s, err := Open(ctx, storetest.PostgresDSN(t)+tc.param)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		conn, err := s.sqldb.Conn(ctx)
		require.NoError(t, err)
		var got string
		require.NoError(t, conn.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&got))
		require.Equal(t, tc.want, got, tc.param)
		require.NoError(t, conn.Close())
	}
}
