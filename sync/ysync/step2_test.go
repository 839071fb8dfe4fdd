package ysync

import (
	"bytes"
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
	var conns []*conn
	require.Eventually(t, func() bool {
		conns = *e.srv.room("L1").snapshot.Load()
		return len(conns) == 1
	}, 2*time.Second, 5*time.Millisecond)
	require.NotNil(t, conns[0].ws)
	require.Equal(t, c.ws.LocalAddr().String(), conns[0].ws.RemoteAddr().String())
}

// A client's step 2 may exceed MaxMessageSize while it syncs, if a slot is
// free; every other frame may not.
func TestLargeSyncStep2(t *testing.T) {
	t.Parallel()
	const limit = 1024
	e := newEnv(t, Config{MaxMessageSize: limit, MaxSyncStep2Size: 64 << 10, SyncStep2Slots: 1})
	step1 := AppendSyncStep1(nil, []byte{0})
	big := func(n int, b byte) []byte { return append([]byte{b}, bytes.Repeat([]byte{b}, n-1)...) }

	// One slot: a holds it from its step 1 on, so b's large step 2 is
	// refused as before.
	a := e.dial(t, "L1", "owner")
	a.write(step1)
	a.nextOf(MsgSync) // our step 2: a's step 1 was handled
	b := e.dial(t, "L1", "editor")
	b.write(step1)
	b.nextOf(MsgSync)
	require.NoError(t, b.ws.WriteMessage(websocket.BinaryMessage, AppendSyncStep2(nil, big(8<<10, 2))))
	require.Equal(t, websocket.CloseMessageTooBig, b.closed())

	// a's large step 2 is applied and relayed (to a as well); then a's
	// sync is over and its limit is MaxMessageSize again.
	up := big(8<<10, 3)
	a.write(AppendSyncStep2(nil, up))
	require.Equal(t, up, a.nextOf(MsgSync).Payload)
	require.NoError(t, a.ws.WriteMessage(websocket.BinaryMessage, AppendUpdate(nil, big(2*limit, 4))))
	require.Equal(t, websocket.CloseMessageTooBig, a.closed())

	// The slot is free again. A large step 2 needs the step 1 before it,
	// may have awareness messages between them, and is bounded too.
	for name, tc := range map[string]struct {
		frames [][]byte
		code   int // 0: the last frame is relayed
	}{
		"after step 1":          {[][]byte{step1, AppendSyncStep2(nil, big(8<<10, 5))}, 0},
		"after awareness":       {[][]byte{step1, AppendAwareness(nil, EncodeAwareness(nil)), AppendSyncStep2(nil, big(8<<10, 6))}, 0},
		"no step 1":             {[][]byte{AppendSyncStep2(nil, big(8<<10, 7))}, websocket.CloseMessageTooBig},
		"after an update":       {[][]byte{step1, AppendUpdate(nil, []byte{8}), AppendSyncStep2(nil, big(8<<10, 9))}, websocket.CloseMessageTooBig},
		"a large update":        {[][]byte{step1, AppendUpdate(nil, big(8<<10, 10)), AppendUpdate(nil, big(8<<10, 11))}, websocket.CloseMessageTooBig},
		"over MaxSyncStep2Size": {[][]byte{step1, AppendSyncStep2(nil, big(65<<10, 12))}, websocket.CloseMessageTooBig},
		"step 1 too late":       {append(repeat(AppendAwareness(nil, EncodeAwareness(nil)), maxSyncFrames-1), step1, AppendSyncStep2(nil, big(8<<10, 13))), websocket.CloseMessageTooBig},
	} {
		c := e.dial(t, "L1", "owner")
		for _, f := range tc.frames {
			require.NoError(t, c.ws.WriteMessage(websocket.BinaryMessage, f), name)
		}
		slotFree := func() bool { return len(e.srv.step2Slots) == 0 }
		if tc.code != 0 {
			require.Equal(t, tc.code, c.closed(), name)
			require.Eventually(t, slotFree, 5*time.Second, 5*time.Millisecond, name)
			continue
		}
		m := tc.frames[len(tc.frames)-1]
		want, err := DecodeMessage(m)
		require.NoError(t, err)
		for {
			if got := c.nextOf(MsgSync); got.SyncType == SyncUpdate {
				require.Equal(t, want.Payload, got.Payload, name)
				break
			}
		}
		// The large frame ended the sync: the slot is free.
		require.True(t, slotFree(), name)
		require.NoError(t, c.ws.Close())
	}

	// A connection that leaves while syncing gives its slot back.
	d := e.dial(t, "L1", "owner")
	d.write(step1)
	d.nextOf(MsgSync)
	require.NoError(t, d.ws.Close())
	require.Eventually(t, func() bool { return len(e.srv.step2Slots) == 0 }, 2*time.Second, 5*time.Millisecond)
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

func repeat(frame []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = frame
	}
	return out
}
