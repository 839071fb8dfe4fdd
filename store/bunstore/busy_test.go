package bunstore

import (
	"context"
	"database/sql"
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
	sqldb, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(50)&_txlock=immediate")
	require.NoError(t, err)
	defer sqldb.Close()
	s, err := New(bun.NewDB(sqldb, sqlitedialect.New()))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	defer s.Close()
	now := time.Now()
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "l", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))

	// Another process's writer, as far as SQLite can tell.
	other, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer other.Close()
	hold, err := other.Conn(ctx)
	require.NoError(t, err)
	defer hold.Close()
	_, err = hold.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)

	err = s.Update(ctx, "l", func(tx yaps.Tx) error {
		_, err := tx.AppendUpdate([]byte("u1"))
		return err
	})
	require.Error(t, err)
	require.Equal(t, yaps.EUNAVAILABLE, yaps.ErrorCode(err), "%v", err)
	require.Equal(t, msgBusy, yaps.ErrorMessage(err))
	err = s.CreateAccount(ctx, &yaps.Account{ID: "a1", CreatedAt: now})
	require.Equal(t, yaps.EUNAVAILABLE, yaps.ErrorCode(err), "%v", err)

	_, err = hold.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, s.Update(ctx, "l", func(tx yaps.Tx) error { // and it recovers
		_, err := tx.AppendUpdate([]byte("u1"))
		return err
	}))
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

	err = s.Update(ctx, "l", func(tx yaps.Tx) error {
		_, err := tx.AppendUpdate([]byte("u1"))
		return err
	})
	require.Error(t, err)
	require.Equal(t, yaps.EUNAVAILABLE, yaps.ErrorCode(err), "%v", err)
	require.NoError(t, tx.Rollback())
	require.NoError(t, s.Update(ctx, "l", func(tx yaps.Tx) error {
		_, err := tx.AppendUpdate([]byte("u1"))
		return err
	}))
}
