package ysync

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// An update that builds on changes the server does not have is not
// dropped: the server asks its sender for everything it lacks (a step 1),
// and the sender's step 2 brings the change with what it depends on. A
// browser tab holds such changes when another tab shared its own over
// y-websocket's BroadcastChannel and they never reached the server (sync
// review); the edit was lost until the tab reconnected.
func TestDependentUpdateAsksForStep2(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{})
	ref, owner := st.newList()
	c := st.dial(ref, owner) // read the server's step 1

	tab1 := yjs.NewDoc(yjs.WithClientID(101))
	tab1.GetText("scratch").Insert(0, "hello", nil)
	shared, err := tab1.EncodeStateAsUpdate(nil) // over the BroadcastChannel only
	require.NoError(t, err)
	tab2 := yjs.NewDoc(yjs.WithClientID(202))
	require.NoError(t, tab2.ApplyUpdate(shared, nil))
	var edit []byte
	tab2.OnUpdate(func(u []byte, _ any) { edit = u })
	tab2.GetText("scratch").Insert(5, " world", nil)

	c.write(AppendUpdate(nil, edit))
	var m Message
	for m = c.nextOf(MsgSync); m.SyncType != SyncStep1; m = c.nextOf(MsgSync) {
	}
	step2, err := tab2.EncodeStateAsUpdate(m.Payload)
	require.NoError(t, err)
	c.write(AppendSyncStep2(nil, step2))

	require.Eventually(t, func() bool {
		d := yjs.NewDoc()
		require.NoError(t, d.ApplyUpdate(st.snapshot(ref, owner), nil))
		return d.GetText("scratch").String() == "hello world"
	}, 5*time.Second, 20*time.Millisecond, "the edit never reached the server")
}

// A read loop waiting for room in its connection's apply queue goes on
// reading once the connection is put on hold (its updates then queue
// behind the held ones); it waited for the end of the hold, up to a
// minute without reading pongs or a close (sync review).
func TestHoldWakesWaitingReader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	e.dial(t, "L1", "owner")
	rm := e.srv.room("L1")
	require.NotNil(t, rm)
	var c *conn
	require.Eventually(t, func() bool {
		if cs := *rm.snapshot.Load(); len(cs) == 1 {
			c = cs[0]
		}
		return c != nil
	}, 2*time.Second, 5*time.Millisecond)

	rm.applyMu.Lock()
	c.pendingN = maxPendingUpdates // as if the apply loop lagged behind
	rm.applyMu.Unlock()
	queued := make(chan bool, 1)
	go func() {
		_, refused := c.queue([]byte{0, 0})
		queued <- refused
	}()
	time.Sleep(50 * time.Millisecond) // waiting in queue
	require.True(t, c.hold([][]byte{{0, 0}}, 0, time.Minute))
	select {
	case refused := <-queued:
		require.False(t, refused)
	case <-time.After(2 * time.Second):
		t.Fatal("the read loop still waits though its connection is on hold")
	}
}
