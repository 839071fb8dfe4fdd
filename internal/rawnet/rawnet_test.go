package rawnet_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/internal/rawnet"
)

// pair returns a wrapped accepted socket and the plain socket dialed to it.
func pair(t *testing.T, network string) (wrapped, peer net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	require.NoError(t, err)
	ln = rawnet.Listener(ln)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	peer, err = net.Dial(network, ln.Addr().String())
	require.NoError(t, err)
	wrapped = <-accepted
	require.NotNil(t, wrapped)
	t.Cleanup(func() { _ = wrapped.Close(); _ = peer.Close() })
	return wrapped, peer
}

func raw() bool { return runtime.GOOS == "linux" }

// Bytes cross both ways intact, in amounts that fill the socket (writes
// that wait for room, partial writes), and the end is io.EOF.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			c, peer := pair(t, network)
			if raw() {
				require.NotSame(t, rawnet.Plain(c), c, "wrapped")
			}
			require.IsType(t, map[string]net.Conn{"tcp": &net.TCPConn{}, "unix": &net.UnixConn{}}[network], rawnet.Plain(c))

			big := make([]byte, 8<<20)
			_, _ = rand.Read(big)
			var wg sync.WaitGroup
			var got []byte
			var readErr error
			wg.Go(func() { got, readErr = io.ReadAll(peer) })
			n, err := c.Write(big)
			require.NoError(t, err)
			require.Equal(t, len(big), n)
			require.NoError(t, c.(interface{ CloseWrite() error }).CloseWrite())
			wg.Wait()
			require.NoError(t, readErr)
			require.True(t, bytes.Equal(big, got))

			wg.Go(func() {
				_, _ = peer.Write(big)
				_ = peer.Close()
			})
			got, err = io.ReadAll(c)
			require.NoError(t, err, "io.EOF at the end")
			require.True(t, bytes.Equal(big, got))
			wg.Wait()

			n, err = c.Read(make([]byte, 10))
			require.Equal(t, 0, n)
			require.ErrorIs(t, err, io.EOF)
			n, err = c.Read(nil)
			require.Equal(t, 0, n)
			require.NoError(t, err)
			n, err = c.Write(nil)
			require.Equal(t, 0, n)
			require.NoError(t, err)
		})
	}
}

// Deadlines hold for reads and for writes that wait for room, with the
// errors a socket gives.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	c, _ := pair(t, "tcp")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := c.Read(make([]byte, 10))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "read", oe.Op)
	require.Equal(t, c.RemoteAddr(), oe.Addr)

	// The peer reads nothing: the write fills the socket's buffers and
	// waits until its deadline, having written part. The 64 MiB are
	// allocated first: zeroing them took longer than the deadline on a
	// loaded machine (CI), and the write then started too late to write
	// anything.
	big := make([]byte, 64<<20)
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(100*time.Millisecond)))
	n, err := c.Write(big)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Positive(t, n)
	require.Less(t, n, 64<<20)
}

// Closed locally: net.ErrClosed. Reset by the peer: the system's error.
func TestErrors(t *testing.T) {
	t.Parallel()
	c, _ := pair(t, "tcp")
	require.NoError(t, c.Close())
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)

	c, peer := pair(t, "tcp")
	require.NoError(t, peer.(*net.TCPConn).SetLinger(0)) // close sends a reset
	require.NoError(t, peer.Close())
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.ECONNRESET)
	var se *os.SyscallError
	if raw() {
		require.ErrorAs(t, err, &se)
	}
	_, err = c.Write(make([]byte, 1<<20))
	require.True(t, errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET), "%v", err)
}

// Reads and writes may come from different goroutines at once (as from
// net/http's background read while a response is written), and several
// writers may write at once, each write whole.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	c, peer := pair(t, "tcp")
	const writers, chunk, chunks = 4, 1000, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			b := bytes.Repeat([]byte{byte('a' + w)}, chunk)
			for range chunks {
				_, err := c.Write(b)
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	echoed := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		echoed <- b
	}()
	got := make([]byte, writers*chunk*chunks)
	_, err := io.ReadFull(peer, got)
	require.NoError(t, err)
	wg.Wait()
	for i := 0; i < len(got); i += chunk {
		require.Equal(t, bytes.Repeat(got[i:i+1], chunk), got[i:i+chunk], "write %d whole", i/chunk)
	}
	_, err = peer.Write(got[:5000])
	require.NoError(t, err)
	require.NoError(t, peer.Close())
	require.Equal(t, got[:5000], <-echoed)
}

// Wrap leaves other connections alone; SyscallConn is the socket's.
func TestWrapOnlySockets(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	require.Same(t, a, rawnet.Wrap(a))
	require.Same(t, a, rawnet.Plain(a))

	c, _ := pair(t, "tcp")
	sc, ok := c.(syscall.Conn)
	require.True(t, ok)
	rc, err := sc.SyscallConn()
	require.NoError(t, err)
	var fd uintptr
	require.NoError(t, rc.Control(func(f uintptr) { fd = f }))
	require.NotZero(t, fd)
}

// ReadFD and WriteFD report the system's errors as they are: EAGAIN with
// nothing to read, the reset after the peer's.
func TestReadWriteFDErrors(t *testing.T) {
	t.Parallel()
	if !rawnet.Supported {
		t.Skip("no raw socket calls on " + runtime.GOOS)
	}
	local, peer := pair(t, "tcp")
	raw, err := rawnet.Plain(local).(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var rerr syscall.Errno
	require.NoError(t, raw.Read(func(fd uintptr) bool {
		_, rerr = rawnet.ReadFD(fd, make([]byte, 8))
		return true
	}))
	require.Equal(t, syscall.EAGAIN, rerr, "nothing to read on a non-blocking socket")
	n, e := rawnet.ReadFD(0, nil)
	require.Equal(t, 0, n)
	require.Zero(t, e, "an empty read makes no call")

	require.NoError(t, peer.(*net.TCPConn).SetLinger(0))
	require.NoError(t, peer.Close())
	var werr syscall.Errno
	require.Eventually(t, func() bool {
		require.NoError(t, raw.Write(func(fd uintptr) bool {
			_, werr = rawnet.WriteFD(fd, []byte("x"))
			return true
		}))
		return werr != 0
	}, 5*time.Second, 5*time.Millisecond)
	require.True(t, errors.Is(werr, syscall.ECONNRESET) || errors.Is(werr, syscall.EPIPE), "got %v", werr)
}
