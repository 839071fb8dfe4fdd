package bunstore

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	s := hostStore(t, filepath.Join(t.TempDir(), "host.db"), 10000, 2)
	now := time.Now()

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
	require.NoError(t, appendUpdate(ctx, s, "l", "u1")) // kicks the checkpointer
	select {
	case err := <-accountErr:
		require.NoError(t, err, "CreateAccount")
	case <-time.After(10 * time.Second):
		t.Fatal("CreateAccount did not return")
	}
}
