package ysync

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// wsPair returns a gorilla client and the server side of its socket,
// wrapped for writeNow the way the server wraps it.
func wsPair(t *testing.T) (*websocket.Conn, *websocket.Conn, *coalescingConn) {
	t.Helper()
	got := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		got <- ws
	}))
	t.Cleanup(srv.Close)
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	server := <-got
	t.Cleanup(func() { _ = server.Close() })
	nc := server.UnderlyingConn()
	raw, err := nc.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	out := &coalescingConn{Conn: nc, raw: raw, restWait: 10 * time.Second, more: func() bool { return false }}
	out.handshakeDone()
	return client, server, out
}

// Frames of every length class reach a real WebSocket client whole.
func TestWriteNowFrames(t *testing.T) {
	t.Parallel()
	client, _, out := wsPair(t)
	sizes := []int{0, 1, 125, 126, 127, 1000, 30000, maxCoalesce - maxFrameHeader}
	type result struct {
		msg []byte
		err error
	}
	got := make(chan result, 2*len(sizes))
	go func() {
		for {
			_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, msg, err := client.ReadMessage()
			got <- result{msg, err}
			if err != nil {
				return
			}
		}
	}()
	idle := func() bool { return true }
	var bg sync.WaitGroup
	var want [][]byte
	for _, n := range sizes {
		msgs := [][]byte{bytes.Repeat([]byte{byte(n)}, n)}
		if 2*(n+maxFrameHeader) <= maxCoalesce {
			msgs = append(msgs, bytes.Repeat([]byte{byte(n + 1)}, n))
		}
		// A rest still on its way (the reader is slower) refuses.
		require.Eventually(t, func() bool { return out.writeNow(msgs, idle, &bg) == nil }, 10*time.Second, time.Millisecond, "%d", n)
		want = append(want, msgs...)
	}
	// Past writeNow's bound, a frame with a 64-bit length, written as
	// gorilla writes.
	long := bytes.Repeat([]byte{7}, 0x10001)
	_, err := out.Write(appendBinaryFrame(nil, long))
	require.NoError(t, err)
	want = append(want, long)
	for i, w := range want {
		r := <-got
		require.NoError(t, r.err, "#%d", i)
		require.Equal(t, w, r.msg, "#%d (%d bytes)", i, len(w))
	}
	bg.Wait()
	// Over maxCoalesce: queued instead.
	require.ErrorIs(t, out.writeNow([][]byte{make([]byte, maxCoalesce)}, idle, &bg), errNotNow)
}

// writeNow leaves the frames to the queue while it is not idle, while
// gorilla is part way through a frame, and after gorilla wrote a close
// frame; and it never waits for the write lock.
func TestWriteNowRefuses(t *testing.T) {
	t.Parallel()
	_, _, out := wsPair(t)
	var bg sync.WaitGroup
	msg := [][]byte{{1, 2, 3}}
	require.ErrorIs(t, out.writeNow(msg, func() bool { return false }, &bg), errNotNow, "not idle")

	out.mu.Lock()
	require.ErrorIs(t, out.writeNow(msg, func() bool { return true }, &bg), errNotNow, "lock held")
	out.mu.Unlock()

	// Half a frame from gorilla: a 10-byte binary frame's header and 4
	// bytes of payload.
	_, err := out.Write([]byte{0x82, 10, 1, 2, 3, 4})
	require.NoError(t, err)
	require.ErrorIs(t, out.writeNow(msg, func() bool { return true }, &bg), errNotNow, "mid-frame")
	_, err = out.Write([]byte{5, 6, 7, 8, 9, 10})
	require.NoError(t, err)
	require.NoError(t, out.writeNow(msg, func() bool { return true }, &bg), "between frames")

	_, err = out.Write([]byte{0x88, 2, 0x03, 0xe8}) // close 1000
	require.NoError(t, err)
	require.ErrorIs(t, out.writeNow(msg, func() bool { return true }, &bg), errNotNow, "after close")
	bg.Wait()
}

// A client that does not read: what the socket does not take is kept,
// counted as queued, and written before anything gorilla writes later, so
// the client reads every frame whole and in order once it reads again.
func TestWriteNowRest(t *testing.T) {
	t.Parallel()
	client, _, out := wsPair(t)
	var queuedN, sentN atomic.Int64
	out.restQueued = func(n int) { queuedN.Add(int64(n)) }
	out.restSent = func(n int) { sentN.Add(int64(n)) }

	var bg sync.WaitGroup
	var sent [][]byte
	idle := func() bool { return queuedN.Load() == sentN.Load() }
	for i := 0; queuedN.Load() == 0; i++ {
		require.Less(t, i, 10000, "the socket never filled")
		msg := bytes.Repeat([]byte{byte(i)}, 8000+i%7)
		if out.writeNow([][]byte{msg}, idle, &bg) != nil {
			continue // the rest's goroutine holds the lock
		}
		sent = append(sent, msg)
	}
	require.False(t, idle(), "a kept rest counts as queued")
	// A frame written the gorilla way now waits behind the rest.
	last := []byte("after the rest")
	done := make(chan error, 1)
	go func() {
		_, err := out.Write(appendBinaryFrame(nil, last))
		done <- err
	}()
	for i, want := range sent {
		require.NoError(t, client.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, got, err := client.ReadMessage()
		require.NoError(t, err, "#%d", i)
		require.Equal(t, want, got, "#%d", i)
	}
	_, got, err := client.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, last, got)
	require.NoError(t, <-done)
	bg.Wait()
	require.Equal(t, queuedN.Load(), sentN.Load())
}

// frameScan finds frame boundaries and close frames however the bytes are
// split across writes.
func TestFrameScan(t *testing.T) {
	t.Parallel()
	frames := [][]byte{
		appendBinaryFrame(nil, nil),
		appendBinaryFrame(nil, make([]byte, 125)),
		appendBinaryFrame(nil, make([]byte, 300)),
		appendBinaryFrame(nil, make([]byte, 70000)),
		{0x8a, 0},                         // pong
		{0x82, 0x83, 1, 2, 3, 4, 9, 9, 9}, // masked, 3 bytes
	}
	closeFrame := []byte{0x88, 2, 0x03, 0xe8}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var f frameScan
		for i, fr := range frames {
			for p := fr; len(p) > 0; {
				n := 1 + rng.IntN(len(p))
				f.scan(p[:n])
				p = p[n:]
				if len(p) > 0 {
					require.False(t, f.between(), "round %d frame %d: inside", round, i)
				}
			}
			require.True(t, f.between(), "round %d frame %d: after", round, i)
		}
		f.scan(closeFrame[:1])
		require.False(t, f.between())
		f.scan(closeFrame[1:])
		require.False(t, f.between(), "after a close frame")
		require.True(t, f.closeSent)
	}
}

var _ net.Conn = (*coalescingConn)(nil)
