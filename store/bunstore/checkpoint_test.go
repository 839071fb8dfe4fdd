package bunstore_test

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
)

// The writer does not checkpoint in its commits (wal_autocheckpoint=0 on
// its connection); the background checkpointer must move the WAL into the
// database file while writes go on, or the WAL would grow without bound.
func TestSQLiteBackgroundCheckpoint(t *testing.T) {
	t.Parallel()
	path, s, ref := sqliteFileList(t)
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

// Under a steady stream of writes the writer has always committed more by
// the time a checkpoint's copy ends, and SQLite starts the WAL over only
// when a write begins with every frame copied. The checkpoint's second
// pass, under the write lock, copies what was committed during the first,
// so the next write starts the WAL over instead of growing the file.
func TestSQLiteWALStartsOverUnderSteadyWrites(t *testing.T) {
	t.Parallel()
	path, s, ref := sqliteFileList(t)
	ctx := context.Background()
	update := make([]byte, 1000)
	n := int64(0)
	writeOne := func() {
		n++
		require.NoError(t, write(ctx, s, ref, n, update))
	}
	writeOne()

	// Only a checkpoint whose first pass ends after armed is set counts:
	// one kicked by the writes above may already be under way.
	var armed, wrote atomic.Bool
	var once sync.Once
	done := make(chan struct{})
	bunstore.SetCheckpointHooks(t, s, func() {
		if !armed.Load() {
			return
		}
		// A write lands between the passes, as one always does under
		// steady load.
		once.Do(func() {
			require.NoError(t, write(ctx, s, ref, -1, update))
			wrote.Store(true)
		})
	}, func() {
		if !wrote.Load() {
			return
		}
		select {
		case <-done:
		default:
			close(done)
		}
	})
	armed.Store(true)
	writeOne() // kicks the checkpointer
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no checkpoint ran")
	}
	before := walCheckpointSeq(t, path)
	writeOne()
	require.Greater(t, walCheckpointSeq(t, path), before,
		"the write after the checkpoint did not start the WAL over")
}

// sqliteFileList opens a store on a new SQLite file and creates a list.
func sqliteFileList(t *testing.T) (path string, s *bunstore.Store, ref string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "yaps.db")
	s = open(t, "sqlite:"+path)
	return path, s, benchList(t, s, 0)
}

// walCheckpointSeq reads the checkpoint sequence number from the WAL
// header of the database at path: SQLite adds one each time the WAL starts
// over.
func walCheckpointSeq(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path + "-wal")
	require.NoError(t, err)
	defer f.Close()
	var hdr [32]byte
	_, err = io.ReadFull(f, hdr[:])
	require.NoError(t, err)
	return binary.BigEndian.Uint32(hdr[12:16])
}
