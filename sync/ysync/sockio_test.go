package ysync

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/internal/rawnet"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	other := <-accepted
	require.NotNil(t, other)
	t.Cleanup(func() { _ = dialed.Close(); _ = other.Close() })
	return dialed.(*net.TCPConn), other.(*net.TCPConn)
}

// The raw read path (rawnet.Reader through the socket's RawConn) reads what
// arrives, waits for it when nothing has, keeps the read deadline, and ends
// with io.EOF when the peer closes, as the socket's own Read does.
func TestReadWatchRawSocket(t *testing.T) {
	t.Parallel()
	local, peer := tcpPair(t)
	raw, err := local.SyscallConn()
	require.NoError(t, err)
	w := &readWatch{Conn: local, timeout: time.Minute, raw: rawnet.NewReader(raw)}

	// Arrives later: the read waits for the poller.
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = peer.Write([]byte("hello"))
	}()
	buf := make([]byte, 16)
	n, err := w.readSocket(buf)
	require.NoError(t, err)
	require.Equal(t, "hello", string(buf[:n]))

	// A deadline that passes with nothing to read.
	require.NoError(t, w.SetReadDeadline(time.Now().Add(30*time.Millisecond)))
	_, err = w.readSocket(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, w.SetReadDeadline(time.Time{}))

	// More than the buffer holds comes in pieces, in order.
	want := bytes.Repeat([]byte("0123456789"), 1000)
	go func() { _, _ = peer.Write(want) }()
	var got []byte
	for len(got) < len(want) {
		n, err := w.readSocket(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.Equal(t, want, got)

	// The peer closes: EOF.
	require.NoError(t, peer.Close())
	_, err = w.readSocket(buf)
	require.ErrorIs(t, err, io.EOF)

	// Our side closed: the socket's closed error, not a hang.
	require.NoError(t, local.Close())
	_, err = w.readSocket(buf)
	require.ErrorIs(t, err, net.ErrClosed)
}

// The server reads a plain TCP socket through its descriptor, and a TLS
// one through the TLS connection (the raw bytes there are ciphertext).
func TestServerReadsRawOnlyFromPlainSockets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		serve func(http.Handler) *httptest.Server
		raw   bool
	}{
		{"tcp", httptest.NewServer, true},
		{"tls", httptest.NewTLSServer, false},
		// yaps serve's sockets, which internal/rawnet wraps: plain too.
		{"rawnet", func(h http.Handler) *httptest.Server {
			ts := httptest.NewUnstartedServer(h)
			ts.Listener = rawnet.Listener(ts.Listener)
			ts.Start()
			return ts
		}, rawnet.Supported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, Config{}, tc.serve)
			dialer := *websocket.DefaultDialer
			if tc.name == "tls" {
				dialer.TLSClientConfig = e.ts.Client().Transport.(*http.Transport).TLSClientConfig
			}
			c, start := dialRawWith(t, &dialer, e.url("L1", "owner"), nil)
			start()
			require.Equal(t, uint64(SyncStep1), c.nextOf(MsgSync).SyncType)
			conns := *e.srv.room("L1").snapshot.Load()
			require.Len(t, conns, 1)
			require.Equal(t, tc.raw, conns[0].reads.raw != nil)
			// And it reads: an update comes back relayed.
			c.write(AppendUpdate(nil, []byte{7, 1}))
			require.Equal(t, []byte{7, 1}, c.nextOf(MsgSync).Payload)
		})
	}
}
