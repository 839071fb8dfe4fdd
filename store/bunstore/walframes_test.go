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

// A SQLite store writes each WAL frame with its page, and what it wrote
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

// The wrapped calls on a plain file: appended frames are buffered until
// the commit frame's page, and anything else on the descriptor writes them
// first.
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
	// 24 bytes; the second field, the database size after a commit, is
	// zero in every frame but a commit frame.
	header := func(i int) string { return fmt.Sprintf("hdr\x00\x00\x00\x00\x00%16d", i) }
	commitHeader := func(i int) string { return fmt.Sprintf("hdr\x00\x00\x00\x00\x07%16d", i) }
	page := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 4096) }
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
	buffered := func() int64 {
		walFrames.mu.Lock()
		defer walFrames.mu.Unlock()
		return walFrames.fds[fd].n
	}

	// The WAL header (32 bytes at 0) is no frame header.
	pwrite(strings.Repeat("w", walHeaderSize), 0)
	require.Len(t, content(), walHeaderSize)

	// Frames 0 and 1 wait for the commit frame, 2; then all three go out
	// in one pwrite.
	flushes := walFrames.flushes.Load()
	pwrite(header(0), frame(0))
	pwrite(page(0), frame(0)+walFrameHeaderSize)
	pwrite(header(1), frame(1))
	pwrite(page(1), frame(1)+walFrameHeaderSize)
	pwrite(commitHeader(2), frame(2))
	require.Len(t, content(), walHeaderSize, "a frame was written before the commit frame's page")
	pwrite(page(2), frame(2)+walFrameHeaderSize)
	require.Equal(t, header(0)+page(0)+header(1)+page(1)+commitHeader(2)+page(2), content()[frame(0):])
	require.Equal(t, int64(0), buffered())
	require.GreaterOrEqual(t, walFrames.flushes.Load()-flushes, int64(1))

	// Buffered frames are written before a pread of the descriptor reads.
	pwrite(header(3), frame(3))
	pwrite(page(3), frame(3)+walFrameHeaderSize)
	require.Len(t, content(), int(frame(3)))
	buf := cbytes(strings.Repeat("?", walFrameHeaderSize))
	require.Equal(t, int64(walFrameHeaderSize), framePread(tls, fd, buf, walFrameHeaderSize, frame(3)))
	require.Equal(t, header(3), string(libc.GoBytes(buf, walFrameHeaderSize)))

	// ... and before a write elsewhere (a spilled page rewritten in place),
	// which then goes where it was sent.
	pwrite(header(4), frame(4))
	pwrite(page(4), frame(4)+walFrameHeaderSize)
	pwrite(page(9), frame(3)+walFrameHeaderSize)
	require.Equal(t, header(3)+page(9)+header(4)+page(4), content()[frame(3):])

	// ... and before a write that continues them but is no part of a frame
	// (SQLite splits a write at a sync point).
	pwrite(header(5), frame(5))
	pwrite("split", frame(5)+walFrameHeaderSize)
	require.Equal(t, header(5)+"split", content()[frame(5):])
	require.Equal(t, int64(0), buffered())

	// A 24-byte write where no frame header can start is not buffered.
	pwrite(page(6), frame(5)+walFrameHeaderSize)
	pwrite(header(6), frame(5)+walFrameHeaderSize+8)
	require.Equal(t, int64(0), buffered())

	// A header rewritten where the last write did not end (SQLite's
	// checksum rewrite at COMMIT: no page follows) is written at once.
	pwrite(commitHeader(1), frame(1))
	require.Equal(t, commitHeader(1), content()[frame(1):frame(1)+walFrameHeaderSize])
	require.Equal(t, int64(0), buffered())

	// A full buffer is written without waiting for the commit frame.
	pwrite(page(6), frame(6)+walFrameHeaderSize) // the last write ends at frame 7
	flushes = walFrames.flushes.Load()
	const many = frameBufSize/(walFrameHeaderSize+4096) + 10
	for i := 7; i < 7+many; i++ {
		pwrite(header(i), frame(i))
		pwrite(page(i), frame(i)+walFrameHeaderSize)
	}
	require.Equal(t, int64(1), walFrames.flushes.Load()-flushes)
	require.Equal(t, frame(7)+frameBufSize, int64(len(content())))
	require.Positive(t, buffered())

	// Closing writes the buffered frames and forgets the descriptor.
	require.Equal(t, int32(0), frameClose(tls, fd))
	got := content()
	require.Len(t, got, int(frame(7+many)))
	for i := 7; i < 7+many; i++ {
		require.Equal(t, header(i)+page(i), got[frame(i):frame(i+1)], "frame %d", i)
	}
	walFrames.mu.Lock()
	_, known := walFrames.fds[fd]
	walFrames.mu.Unlock()
	require.False(t, known)
}
