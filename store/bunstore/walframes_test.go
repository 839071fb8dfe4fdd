//go:build linux && (amd64 || arm64)

package bunstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"modernc.org/libc"

	"github.com/yaps-dev/yaps/yaps"
)

// A SQLite store writes each WAL frame with one pwrite, and what it wrote
// reads back, after a reopen too (the WAL recovery checks every frame's
// checksum, so a misplaced byte would drop the commits).
func TestWALFramesOnePwrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "frames.db")
	s, err := Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	now := time.Now()
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "frames", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))

	before := walFrames.merged.Load()
	const n = 40
	for i := 1; i <= n; i++ {
		require.NoError(t, s.Update(ctx, "frames", func(tx yaps.Tx) error {
			_, err := tx.AppendUpdate(fmt.Appendf(nil, "u%d-%s", i, strings.Repeat("x", 300*i)))
			return err
		}))
	}
	// Other tests' stores write too, so only a lower bound holds: every
	// commit writes at least one frame.
	require.GreaterOrEqual(t, walFrames.merged.Load()-before, int64(n))
	require.NoError(t, s.Close())

	s, err = Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	var check string
	require.NoError(t, s.sqldb.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check))
	require.Equal(t, "ok", check)
	d, err := s.Doc(ctx, "frames", 0)
	require.NoError(t, err)
	require.Len(t, d.Updates, n+1)
	for i := 1; i <= n; i++ {
		require.Equal(t, fmt.Sprintf("u%d-%s", i, strings.Repeat("x", 300*i)), string(d.Updates[i]))
	}
}

// The wrapped calls on a plain file: a frame header is held until its page
// follows, and anything else on the descriptor writes it first.
func TestWALFrameCalls(t *testing.T) {
	installWALFrameWrites()
	require.NotNil(t, walFrames.orig.pwrite, "the unix VFS's pwrite was not wrapped")
	tls := libc.NewTLS()
	defer tls.Close()
	cbytes := func(s string) uintptr {
		p, err := libc.CString(s)
		require.NoError(t, err)
		t.Cleanup(func() { libc.Xfree(tls, p) })
		return p
	}
	header := func(i int) string { return fmt.Sprintf("frame header %11d", i) } // 24 bytes
	page := strings.Repeat("p", 4096)
	frame := func(i int) int64 { return walHeaderSize + int64(i)*(walFrameHeaderSize+4096) }

	path := filepath.Join(t.TempDir(), "calls-wal")
	file, err := os.Create(path)
	require.NoError(t, err)
	defer file.Close()
	// A descriptor of our own, which frameClose may close.
	dup, err := syscall.Dup(int(file.Fd()))
	require.NoError(t, err)
	fd := int32(dup)
	content := func() string {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(b)
	}
	pwrite := func(s string, off int64) {
		t.Helper()
		require.Equal(t, int64(len(s)), framePwrite(tls, fd, cbytes(s), uint64(len(s)), off))
	}

	// The WAL header (32 bytes at 0) is no frame header.
	pwrite(strings.Repeat("w", walHeaderSize), 0)
	require.Len(t, content(), walHeaderSize)

	// Frame 0: the header waits for its page, then both are in the file.
	merged := walFrames.merged.Load()
	pwrite(header(0), frame(0))
	require.Len(t, content(), walHeaderSize, "the header was written before its page")
	pwrite(page, frame(0)+walFrameHeaderSize)
	require.Equal(t, header(0)+page, content()[frame(0):])
	require.GreaterOrEqual(t, walFrames.merged.Load()-merged, int64(1))

	// A held header is written before a pread of the descriptor reads.
	pwrite(header(1), frame(1))
	buf := cbytes(strings.Repeat("?", walFrameHeaderSize))
	require.Equal(t, int64(walFrameHeaderSize), framePread(tls, fd, buf, walFrameHeaderSize, frame(1)))
	require.Equal(t, header(1), string(libc.GoBytes(buf, walFrameHeaderSize)))

	// ... and before a write elsewhere, which then goes where it was sent.
	pwrite(page, frame(1)+walFrameHeaderSize)
	pwrite(header(2), frame(2))
	require.Len(t, content(), int(frame(2)), "the appended header was written before its page")
	pwrite("elsewhere", frame(5))
	require.Equal(t, header(2), content()[frame(2):frame(2)+walFrameHeaderSize])
	require.Equal(t, "elsewhere", content()[frame(5):])

	// A 24-byte write where no frame header can start is not held.
	pwrite(header(3), frame(2)+walFrameHeaderSize)
	require.Equal(t, header(3), content()[frame(2)+walFrameHeaderSize:frame(2)+2*walFrameHeaderSize])

	// A header rewritten where the last write did not end (SQLite's
	// checksum rewrite at COMMIT: no page follows) is written at once.
	pwrite(header(1), frame(1))
	require.Equal(t, header(1), content()[frame(1):frame(1)+walFrameHeaderSize])
	walFrames.mu.Lock()
	held := walFrames.fds[fd].held
	walFrames.mu.Unlock()
	require.False(t, held)

	// Closing writes a held header and forgets the descriptor.
	pwrite(page, frame(3)+walFrameHeaderSize) // the write before ends at frame 4
	pwrite(header(4), frame(4))
	walFrames.mu.Lock()
	held = walFrames.fds[fd].held
	walFrames.mu.Unlock()
	require.True(t, held, "an appended header is held")
	require.Equal(t, int32(0), frameClose(tls, fd))
	require.Equal(t, header(4), content()[frame(4):frame(4)+walFrameHeaderSize])
	walFrames.mu.Lock()
	_, known := walFrames.fds[fd]
	walFrames.mu.Unlock()
	require.False(t, known)
}
