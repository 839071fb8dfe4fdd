package bunstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	"github.com/yaps-dev/yaps/yaps"
)

// On a host's pool of two connections, the writer holds one and the
// checkpointer the other; a write that needs the write lock and a pool
// connection (CreateAccount did) waited for the checkpointer, which waited
// for the write lock: a deadlock until the write's deadline (SQLite store
// review). The hook makes the interleaving certain.
func TestCheckpointerSmallHostPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "host.db")
	sqldb, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	require.NoError(t, err)
	defer sqldb.Close()
	sqldb.SetMaxOpenConns(2)
	s, err := New(bun.NewDB(sqldb, sqlitedialect.New()))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	defer s.Close()
	now := time.Now()
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "l", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))

	var once sync.Once
	accountErr := make(chan error, 1)
	s.writeMu.Lock()
	c := s.ckpt
	s.writeMu.Unlock()
	hook := func() {
		once.Do(func() {
			// A CreateAccount arrives while the checkpointer is between its passes.
			go func() {
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				accountErr <- s.CreateAccount(actx, &yaps.Account{ID: "a1", CreatedAt: now})
			}()
			time.Sleep(200 * time.Millisecond)
		})
	}
	c.afterFirstPass.Store(&hook)
	require.NoError(t, s.Update(ctx, "l", func(tx yaps.Tx) error { // kicks the checkpointer
		_, err := tx.AppendUpdate([]byte("u1"))
		return err
	}))
	select {
	case err := <-accountErr:
		require.NoError(t, err, "CreateAccount")
	case <-time.After(10 * time.Second):
		t.Fatal("CreateAccount did not return")
	}
}
