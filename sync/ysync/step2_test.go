package ysync

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// Melody keeps the gorilla connection unexported; gorillaConn must find
// it, or large step 2s quietly stop working.
func TestGorillaConn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	c := e.dial(t, "L1", "owner")
	conns := serverConns(t, e, "L1", 1)
	require.NotNil(t, conns[0].ws)
	require.Equal(t, c.ws.LocalAddr().String(), conns[0].ws.RemoteAddr().String())
}

// serverConns waits until ref's room has n connections and returns them.
func serverConns(t *testing.T, e *testEnv, ref string, n int) []*conn {
	t.Helper()
	var conns []*conn
	require.Eventually(t, func() bool {
		rm := e.srv.room(ref)
		if rm == nil {
			return false
		}
		conns = *rm.snapshot.Load()
		return len(conns) == n
	}, 2*time.Second, 5*time.Millisecond)
	return conns
}

// rawDial connects a client that reads nothing (so it never answers a
// close frame) and sends every message as one frame.
func rawDial(t *testing.T, e *testEnv, ref, code string) *websocket.Conn {
	t.Helper()
	d := *websocket.DefaultDialer
	d.WriteBufferSize = 256 << 10
	ws, resp, err := d.Dial(e.url(ref, code), nil)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { ws.Close() })
	return ws
}

// slotsTaken is the number of step 2 slots in use.
func (e *testEnv) slotsTaken() int { return len(e.srv.step2Slots) }

// bigFrame is a message of n bytes filled with b.
func bigFrame(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

// A client's step 2 may exceed MaxMessageSize while it syncs, if a slot is
// free; every other frame may not.
func TestLargeSyncStep2(t *testing.T) {
	t.Parallel()
	const limit = 1024
	e := newEnv(t, Config{MaxMessageSize: limit, MaxSyncStep2Size: 64 << 10, SyncStep2Slots: 1})
	step1 := AppendSyncStep1(nil, []byte{0})
	aw := AppendAwareness(nil, EncodeAwareness(nil))
	bigAw := AppendAwareness(nil, EncodeAwareness([]AwarenessEntry{{ClientID: 7, Clock: 1, State: `"` + string(bytes.Repeat([]byte("a"), 8<<10)) + `"`}}))

	// One slot: a holds it from its step 1 on, so b's large step 2 is
	// refused as before.
	a := e.dial(t, "L1", "owner")
	a.write(step1)
	a.nextOf(MsgSync) // our step 2: a's step 1 was handled
	require.Equal(t, 1, e.slotsTaken())
	b := e.dial(t, "L1", "editor")
	b.write(step1)
	b.nextOf(MsgSync)
	// The client sends 8 KiB in 4 KiB fragments: the server may refuse the
	// first and close before the rest is written.
	_ = b.ws.WriteMessage(websocket.BinaryMessage, AppendSyncStep2(nil, bigFrame(8<<10, 2)))
	require.Equal(t, websocket.CloseMessageTooBig, b.closed())

	// a's large step 2 is applied and relayed (to a as well); then a's
	// sync is over and its limit is MaxMessageSize again.
	up := bigFrame(8<<10, 3)
	a.write(AppendSyncStep2(nil, up))
	require.Equal(t, up, a.nextOf(MsgSync).Payload)
	require.Eventually(t, func() bool { return e.slotsTaken() == 0 }, 2*time.Second, 5*time.Millisecond)
	_ = a.ws.WriteMessage(websocket.BinaryMessage, AppendUpdate(nil, bigFrame(2*limit, 4)))
	require.Equal(t, websocket.CloseMessageTooBig, a.closed())

	// A large step 2 needs the step 1 before it, may have awareness
	// messages between them, and is bounded too.
	for name, tc := range map[string]struct {
		frames [][]byte
		code   int // 0: the last frame is relayed
		// alt: the close code of an earlier frame that is refused itself;
		// it races with code (the read loop goes on to the large frame).
		alt int
	}{
		"after step 1":          {[][]byte{step1, AppendSyncStep2(nil, bigFrame(8<<10, 5))}, 0, 0},
		"after awareness":       {[][]byte{step1, aw, AppendSyncStep2(nil, bigFrame(8<<10, 6))}, 0, 0},
		"no step 1":             {[][]byte{AppendSyncStep2(nil, bigFrame(8<<10, 7))}, websocket.CloseMessageTooBig, 0},
		"an empty frame":        {[][]byte{{}, AppendSyncStep2(nil, bigFrame(8<<10, 14))}, websocket.CloseMessageTooBig, CloseBadMessage},
		"after an update":       {[][]byte{step1, AppendUpdate(nil, []byte{8}), AppendSyncStep2(nil, bigFrame(8<<10, 9))}, 0, 0},
		"after a step 2":        {[][]byte{step1, AppendSyncStep2(nil, []byte{8}), AppendSyncStep2(nil, bigFrame(8<<10, 16))}, websocket.CloseMessageTooBig, 0},
		"after a text frame":    {[][]byte{step1, nil, AppendSyncStep2(nil, bigFrame(8<<10, 17))}, websocket.CloseMessageTooBig, websocket.CloseUnsupportedData},
		"too many updates":      {append(append([][]byte{step1}, repeat(AppendUpdate(nil, []byte{8}), maxSyncFrames-1)...), AppendSyncStep2(nil, bigFrame(8<<10, 18))), websocket.CloseMessageTooBig, 0},
		"a large update":        {[][]byte{step1, AppendUpdate(nil, bigFrame(8<<10, 10)), AppendUpdate(nil, bigFrame(8<<10, 11))}, websocket.CloseMessageTooBig, 0},
		"a large awareness":     {[][]byte{step1, bigAw, AppendSyncStep2(nil, bigFrame(8<<10, 15))}, websocket.CloseMessageTooBig, CloseBadMessage},
		"over MaxSyncStep2Size": {[][]byte{step1, AppendSyncStep2(nil, bigFrame(65<<10, 12))}, websocket.CloseMessageTooBig, 0},
		"step 1 too late":       {append(repeat(aw, maxSyncFrames-1), step1, AppendSyncStep2(nil, bigFrame(8<<10, 13))), websocket.CloseMessageTooBig, 0},
	} {
		c := e.dial(t, "L1", "owner")
		for i, f := range tc.frames {
			typ := websocket.BinaryMessage
			if f == nil {
				typ, f = websocket.TextMessage, []byte("hello")
			}
			err := c.ws.WriteMessage(typ, f)
			if tc.code == 0 || i < len(tc.frames)-1 {
				require.NoError(t, err, name)
			}
		}
		slotFree := func() bool { return e.slotsTaken() == 0 }
		if tc.code != 0 {
			if tc.alt != 0 {
				require.Contains(t, []int{tc.code, tc.alt}, c.closed(), name)
			} else {
				require.Equal(t, tc.code, c.closed(), name)
			}
			require.Eventually(t, slotFree, 5*time.Second, 5*time.Millisecond, name)
			continue
		}
		want, err := DecodeMessage(tc.frames[len(tc.frames)-1])
		require.NoError(t, err)
		for {
			// Smaller updates sent before it are relayed first.
			if got := c.nextOf(MsgSync); got.SyncType == SyncUpdate && len(got.Payload) == len(want.Payload) {
				require.Equal(t, want.Payload, got.Payload, name)
				break
			}
		}
		// The large frame was applied: the slot is free.
		require.Eventually(t, slotFree, 2*time.Second, 5*time.Millisecond, name)
		require.NoError(t, c.ws.Close())
	}

	// A connection that leaves while syncing gives its slot back.
	d := e.dial(t, "L1", "owner")
	d.write(step1)
	d.nextOf(MsgSync)
	require.Equal(t, 1, e.slotsTaken())
	require.NoError(t, d.ws.Close())
	require.Eventually(t, func() bool { return e.slotsTaken() == 0 }, 2*time.Second, 5*time.Millisecond)
}

// With no slots, a step 2 gets MaxMessageSize like every frame.
func TestLargeSyncStep2Off(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxMessageSize: 1024, MaxSyncStep2Size: 64 << 10, SyncStep2Slots: -1})
	c := e.dial(t, "L1", "owner")
	c.write(AppendSyncStep1(nil, []byte{0}))
	c.nextOf(MsgSync)
	require.NoError(t, c.ws.WriteMessage(websocket.BinaryMessage, AppendSyncStep2(nil, make([]byte, 2048))))
	require.Equal(t, websocket.CloseMessageTooBig, c.closed())
}

// Who cannot hold a slot: a read-only connection (a public viewer code
// must not let anyone take them all), a connection that only sends text
// frames after its step 1 (the first ends the sync), and one that goes
// quiet after its step 1 (its sync ends at the first pong after
// maxSyncTime).
func TestSyncStep2SlotsNotHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxMessageSize: 1024, MaxSyncStep2Size: 64 << 10, SyncStep2Slots: 1,
		PingPeriod: 50 * time.Millisecond, PongWait: time.Second})
	e.srv.maxSyncTime = 300 * time.Millisecond
	step1 := AppendSyncStep1(nil, []byte{0})

	v := e.dial(t, "L1", "viewer")
	v.write(step1)
	v.nextOf(MsgSync)
	require.Equal(t, 0, e.slotsTaken())

	// No reader: the client does not answer the server's close frame, so
	// the server keeps reading its frames until CloseTimeout.
	x := rawDial(t, e, "L2", "owner")
	xc := serverConns(t, e, "L2", 1)[0]
	require.NoError(t, x.WriteMessage(websocket.BinaryMessage, step1))
	require.Eventually(t, func() bool { return e.slotsTaken() == 1 }, 2*time.Second, 5*time.Millisecond)
	require.NoError(t, x.WriteMessage(websocket.TextMessage, []byte("hi")))
	require.Eventually(t, func() bool { return e.slotsTaken() == 0 }, 2*time.Second, 5*time.Millisecond)
	require.NoError(t, xc.ctx.Err(), "given back by the text frame, not the disconnect")
	_ = x.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), 8<<10))
	require.Eventually(t, xc.readLimitHit.Load, 2*time.Second, 5*time.Millisecond)

	q := e.dial(t, "L1", "owner") // its reader answers pings
	q.write(step1)
	q.nextOf(MsgSync)
	require.Equal(t, 1, e.slotsTaken())
	require.Eventually(t, func() bool { return e.slotsTaken() == 0 }, 3*time.Second, 10*time.Millisecond)
	_ = q.ws.WriteMessage(websocket.BinaryMessage, AppendSyncStep2(nil, make([]byte, 2048)))
	require.Equal(t, websocket.CloseMessageTooBig, q.closed())
}

// A large frame keeps its slot until the room applied it, so at most
// SyncStep2Slots of them are read or held at once; with the slot held, the
// next client's large step 2 is refused.
func TestSyncStep2SlotHeldUntilApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxMessageSize: 1024, MaxSyncStep2Size: 64 << 10, SyncStep2Slots: 1})
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // before the server's Close, which waits for the apply
	e.fake.mu.Lock()
	e.fake.gate = gate
	e.fake.mu.Unlock()
	step1 := AppendSyncStep1(nil, []byte{0})

	a := e.dial(t, "L1", "owner")
	a.write(step1)
	a.nextOf(MsgSync)
	a.write(AppendSyncStep2(nil, bigFrame(8<<10, 1)))
	require.Eventually(t, func() bool { return len(e.fake.batchSizes()) == 1 }, 2*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, e.slotsTaken(), "held while the room applies it")

	b := e.dial(t, "L2", "owner")
	b.write(step1)
	b.nextOf(MsgSync)
	_ = b.ws.WriteMessage(websocket.BinaryMessage, AppendSyncStep2(nil, bigFrame(8<<10, 2)))
	require.Equal(t, websocket.CloseMessageTooBig, b.closed())

	open()
	require.Eventually(t, func() bool { return e.slotsTaken() == 0 }, 2*time.Second, 5*time.Millisecond)
}

// A large step 2 relayed to a room whose connections have frames queued
// is applied in a batch of its own and waits for room in their queues, so
// nobody is closed as slow. MaxSyncStep2Size is at most half a send queue.
func TestLargeSyncStep2Relayed(t *testing.T) {
	t.Parallel()
	const q = 64 << 10
	_, err := newServer(newFake(), Config{MaxMessageSize: 1024, MaxSyncStep2Size: q/2 + 1, SendQueueBytes: q})
	require.ErrorContains(t, err, "MaxSyncStep2Size")
	e := newEnv(t, Config{MaxMessageSize: 1024, MaxSyncStep2Size: q / 2, SendQueueBytes: q, SyncStep2Slots: 1})
	gate := make(chan struct{})
	e.fake.mu.Lock()
	e.fake.gate = gate
	e.fake.mu.Unlock()

	p := e.dial(t, "L1", "editor") // a bystander
	b := e.dial(t, "L1", "editor") // types
	a := e.dial(t, "L1", "owner")  // reconnects with a large step 2
	b.write(AppendUpdate(nil, []byte{1}))
	require.Eventually(t, func() bool { return len(e.fake.batchSizes()) == 1 }, 2*time.Second, 5*time.Millisecond)
	a.write(AppendSyncStep1(nil, []byte{0}))
	a.nextOf(MsgSync)
	big := bigFrame(q/2-8, 7)
	a.write(AppendSyncStep2(nil, big))
	b.write(AppendUpdate(nil, []byte{2}))
	rm := e.srv.room("L1")
	require.Eventually(t, func() bool {
		rm.applyMu.Lock()
		defer rm.applyMu.Unlock()
		return len(rm.applyQ) == 2
	}, 2*time.Second, 5*time.Millisecond)
	close(gate)
	for name, c := range map[string]*client{"bystander": p, "typist": b, "sender": a} {
		var got []string // each update's first byte and length
		for len(got) < 3 {
			if m := c.nextOf(MsgSync); m.SyncType == SyncUpdate {
				got = append(got, fmt.Sprint(m.Payload[0], "x", len(m.Payload)))
			}
		}
		// The two queued ones in either order (two connections' reads).
		require.ElementsMatch(t, []string{"1x1", fmt.Sprint(7, "x", len(big)), "2x1"}, got, name)
	}
	require.Equal(t, []int{1, 1, 1}, e.fake.batchSizes())
}

func TestStep2Defaults(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	require.Equal(t, int64(8<<20), c.MaxSyncStep2Size)
	require.Equal(t, 4, c.SyncStep2Slots)
	require.Equal(t, int64(16<<20), Config{SendQueueBytes: 64 << 20}.WithDefaults().MaxSyncStep2Size)
	require.Equal(t, int64(32<<20), Config{MaxMessageSize: 32 << 20, SendQueueBytes: 32 << 20}.WithDefaults().MaxSyncStep2Size)
	require.NoError(t, Config{MaxMessageSize: 32 << 20, SendQueueBytes: 32 << 20}.WithDefaults().validate())
}

func repeat(frame []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = frame
	}
	return out
}
