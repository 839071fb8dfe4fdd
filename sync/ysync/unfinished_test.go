package ysync

import (
	"bytes"
	"encoding/binary"
	"maps"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clientFrame encodes one masked client frame (mask key 0, so the payload
// goes as it is).
func clientFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{b0, 0x80 | byte(n)}
	case n < 1<<16:
		h = []byte{b0, 0x80 | 126, byte(n >> 8), byte(n)}
	default:
		h = []byte{b0, 0x80 | 127}
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	h = append(h, 0, 0, 0, 0)
	return append(h, payload...)
}

// The frame parser follows data messages across fragments, interleaved
// control frames and every extended length, however the bytes are split
// between reads.
func TestReadWatchScan(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{1}, 70_000)
	type want struct {
		open  bool
		body  int64
		ended uint64
	}
	for _, tc := range []struct {
		name   string
		frames [][]byte
		want   want
	}{
		{"one small message", [][]byte{clientFrame(true, 2, []byte("abc"))}, want{false, 0, 1}},
		{"empty message", [][]byte{clientFrame(true, 2, nil)}, want{false, 0, 1}},
		{"first fragment", [][]byte{clientFrame(false, 2, make([]byte, 300))}, want{true, 300, 0}},
		{"fragments and a ping", [][]byte{
			clientFrame(false, 2, make([]byte, 300)),
			clientFrame(true, 9, []byte("ping")),
			clientFrame(false, 0, make([]byte, 200)),
		}, want{true, 500, 0}},
		{"finished fragments", [][]byte{
			clientFrame(false, 1, make([]byte, 300)),
			clientFrame(true, 10, nil),
			clientFrame(true, 0, make([]byte, 200)),
			clientFrame(true, 2, []byte("x")),
		}, want{false, 0, 2}},
		{"64-bit length, unfinished", [][]byte{clientFrame(true, 2, big)[:14+50_000]}, want{true, 50_000, 0}},
		{"64-bit length, finished", [][]byte{clientFrame(true, 2, big)}, want{false, 0, 1}},
		{"header only", [][]byte{clientFrame(true, 2, big)[:14]}, want{true, 0, 0}},
		{"half a header", [][]byte{clientFrame(true, 2, big)[:5]}, want{false, 0, 0}},
	} {
		stream := bytes.Join(tc.frames, nil)
		for _, split := range []int{1, 3, 7, 1024, len(stream) + 1} {
			w := &readWatch{}
			for b := stream; len(b) > 0; {
				k := min(split, len(b))
				w.scan(b[:k])
				b = b[k:]
			}
			require.Equal(t, tc.want, want{w.open, w.body, w.ended}, "%s, split %d", tc.name, split)
		}
	}
}

// writeRaw writes frames straight to the client's socket, in one write so
// that a pong written by the client's reader cannot land inside them.
func (c *client) writeRaw(frames ...[]byte) {
	c.t.Helper()
	_, err := c.ws.UnderlyingConn().Write(bytes.Join(frames, nil))
	require.NoError(c.t, err)
}

// ended waits for the connection to end, with or without a close frame.
func (c *client) ended(within time.Duration) bool {
	c.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case <-c.frames:
		case <-c.err:
			return true
		case <-timeout:
			return false
		}
	}
}

// A client that begins a message and never finishes it, while it answers
// every ping, is cut after MessageReadTimeout: its buffer is freed. A
// message finished in time, over fragments and pings, is handled, and the
// connection then lives on past that timeout.
func TestUnfinishedMessageTimesOut(t *testing.T) {
	t.Parallel()
	// Pings come far more often than MessageReadTimeout, and PongWait
	// is short of it: without the timeout, pongs keep a socket open.
	e := newEnv(t, Config{PingPeriod: 100 * time.Millisecond, PongWait: time.Second, MessageReadTimeout: 2 * time.Second})

	stalled := e.dial(t, "L1", "editor")
	stalled.writeRaw(clientFrame(false, 2, make([]byte, 100<<10)))

	honest := e.dial(t, "L1", "editor")
	step1 := AppendSyncStep1(nil, []byte{0})
	honest.writeRaw(clientFrame(false, 2, step1[:1]))
	time.Sleep(1200 * time.Millisecond) // past PongWait: pongs go on meanwhile
	honest.writeRaw(clientFrame(true, 9, nil), clientFrame(true, 0, step1[1:]))
	require.Equal(t, uint64(SyncStep2), honest.nextOf(MsgSync).SyncType)

	require.True(t, stalled.ended(10*time.Second), "an unfinished message kept its connection open")

	time.Sleep(2500 * time.Millisecond) // past MessageReadTimeout, idle
	honest.write(step1)
	require.Equal(t, uint64(SyncStep2), honest.nextOf(MsgSync).SyncType)
	require.Empty(t, e.unfinishedHeld())
}

func (e *testEnv) unfinishedHeld() map[string]int64 {
	b := e.srv.unfinished
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.held)
}

// The bytes of unfinished messages are counted per client address across
// its connections: the connection that would take its address past
// MaxUnfinishedBytesPerIP is cut, other addresses are not affected, and
// every byte is given back when a message ends or its connection goes.
func TestUnfinishedBytesPerIP(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10
	e, from := ipEnv(t, Config{MaxMessageSize: limit, MaxSyncStep2Size: limit, MaxUnfinishedBytesPerIP: limit})
	held := func(want map[string]int64) {
		t.Helper()
		require.Eventually(t, func() bool { return maps.Equal(e.unfinishedHeld(), want) }, 5*time.Second, 5*time.Millisecond, "want %v", want)
	}

	a := dialURL(t, from("L1", "192.0.2.1"))
	a.writeRaw(clientFrame(false, 2, make([]byte, 130<<10)))
	held(map[string]int64{"192.0.2.1": 192 << 10}) // three steps of 64 KiB

	b := dialURL(t, from("L2", "192.0.2.1"))
	b.writeRaw(clientFrame(false, 2, make([]byte, 100<<10)))
	require.True(t, b.ended(5*time.Second), "the address went past its budget")

	other := dialURL(t, from("L1", "192.0.2.9"))
	other.writeRaw(clientFrame(false, 2, make([]byte, 100<<10)))
	held(map[string]int64{"192.0.2.1": 192 << 10, "192.0.2.9": 128 << 10})

	// a's message ends (it does not decode, so a is closed with 4400):
	// its bytes are given back either way, and other's as it closes.
	a.writeRaw(clientFrame(true, 0, []byte{0xff}))
	held(map[string]int64{"192.0.2.9": 128 << 10})
	require.NoError(t, other.ws.UnderlyingConn().(*net.TCPConn).Close())
	held(map[string]int64{})

	c := dialURL(t, from("L2", "192.0.2.1"))
	c.writeRaw(clientFrame(false, 2, make([]byte, 200<<10)))
	held(map[string]int64{"192.0.2.1": 256 << 10})
}
