package bunstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The writer does not checkpoint in its commits (wal_autocheckpoint=0 on
// its connection); the background checkpointer must move the WAL into the
// database file while writes go on, or the WAL would grow without bound.
func TestSQLiteBackgroundCheckpoint(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ckpt.db")
	s := open(t, "sqlite:"+path)
	ref := benchList(t, s, 0)
	ctx := context.Background()
	start, err := os.Stat(path)
	require.NoError(t, err)
	update := make([]byte, 1000)
	const writes = 2000 // about 2 MB of updates
	for i := range writes {
		require.NoError(t, write(ctx, s, ref, int64(i), update))
	}
	require.Eventually(t, func() bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Size() >= start.Size()+writes*1000
	}, 10*time.Second, 20*time.Millisecond, "the database file did not grow: no checkpoint ran")

	// Every write is still there after a reopen.
	require.NoError(t, s.Close())
	s2 := open(t, "sqlite:"+path)
	dl, err := s2.Doc(ctx, ref, 0)
	require.NoError(t, err)
	require.Len(t, dl.Updates, writes+1) // plus the list's first update
}
