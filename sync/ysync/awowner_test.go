package ysync

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordingBroadcaster records what the server publishes to other
// processes (and delivers nothing).
type recordingBroadcaster struct {
	mu      sync.Mutex
	updates [][]byte
}

func (b *recordingBroadcaster) PublishAwareness(_ string, update []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.updates = append(b.updates, append([]byte(nil), update...))
}

func (b *recordingBroadcaster) SubscribeAwareness(func(string, []byte)) func() { return func() {} }

// published returns every entry published so far, in order.
func (b *recordingBroadcaster) published(t *testing.T) []AwarenessEntry {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []AwarenessEntry
	for _, u := range b.updates {
		if len(u) == 1 && u[0] == 0 {
			continue // "who is there?"
		}
		_, upd, ok := decodeAwarenessNotice(u)
		require.True(t, ok, "published: not an awareness notice")
		entries, err := DecodeAwareness(upd, AwarenessLimits{})
		require.NoError(t, err)
		out = append(out, entries...)
	}
	return out
}

// A connection with another code cannot take over, change or remove an
// awareness client owned by a live connection: the entry is dropped (not
// applied, relayed or published) and the sender, whose other entries go
// through, stays connected. Real y-websocket clients re-send the states of
// others they received (the last case), so the sender is not closed.
func TestAwarenessHijackRefused(t *testing.T) {
	t.Parallel()
	const victimState, ownState = `{"user":"victim"}`, `{"user":"mallory"}`
	for name, entry := range map[string]AwarenessEntry{
		"newer state":         {ClientID: 7, Clock: 5, State: `{"user":"victim","evil":true}`},
		"removal":             {ClientID: 7, Clock: 5, State: "null"},
		"removal, same clock": {ClientID: 7, Clock: 1, State: "null"},
		"re-sent, same clock": {ClientID: 7, Clock: 1, State: victimState},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pub := &recordingBroadcaster{}
			e := newEnv(t, Config{Broadcaster: pub})
			victim := e.dial(t, "L1", "editor")
			attacker := e.dial(t, "L1", "viewer")
			observer := e.dial(t, "L1", "owner")
			sendAwareness(victim, AwarenessEntry{ClientID: 7, Clock: 1, State: victimState})
			for _, c := range []*client{victim, attacker, observer} {
				require.Equal(t, map[uint64]string{7: victimState}, awarenessMap(t, c.nextOf(MsgAwareness)))
			}

			// The attacker's own entry in the same message goes through,
			// alone.
			sendAwareness(attacker, entry, AwarenessEntry{ClientID: 8, Clock: 1, State: ownState})
			for _, c := range []*client{victim, attacker, observer} {
				require.Equal(t, map[uint64]string{8: ownState}, awarenessMap(t, c.nextOf(MsgAwareness)))
			}
			observer.write(AppendQueryAwareness(nil))
			require.Equal(t, map[uint64]string{7: victimState, 8: ownState}, awarenessMap(t, observer.nextOf(MsgAwareness)))
			// The victim's clock did not move: its next renewal counts.
			sendAwareness(victim, AwarenessEntry{ClientID: 7, Clock: 2, State: victimState})
			require.Equal(t, []AwarenessEntry{{ClientID: 7, Clock: 2, State: victimState}}, decodeAw(t, observer.nextOf(MsgAwareness)))

			// The attacker is still connected and answered.
			attacker.nextOf(MsgAwareness) // the victim's renewal
			attacker.write(AppendQueryAwareness(nil))
			require.Len(t, awarenessMap(t, attacker.nextOf(MsgAwareness)), 2)
			require.Equal(t, 3, e.srv.Stats().Conns)

			// Nothing of the dropped entry reached the other processes.
			require.Eventually(t, func() bool { return len(pub.published(t)) >= 3 }, 2*time.Second, 5*time.Millisecond)
			require.Equal(t, []AwarenessEntry{
				{ClientID: 7, Clock: 1, State: victimState},
				{ClientID: 8, Clock: 1, State: ownState},
				{ClientID: 7, Clock: 2, State: victimState},
			}, pub.published(t))
		})
	}
}

// A client that reconnects with the same code before its old socket was
// noticed dead takes its awareness ID over; the old socket's end then
// removes nothing. Once its owner left, the ID stays its code's for
// AwarenessTimeout (whoever saw the removal cannot take it before the
// client reconnects), then anyone may set it.
func TestAwarenessReconnectSameCode(t *testing.T) {
	t.Parallel()
	const hold = time.Second
	e := newEnv(t, Config{AwarenessTimeout: hold})
	observer := e.dial(t, "L1", "owner")
	old := e.dial(t, "L1", "viewer")
	sendAwareness(old, AwarenessEntry{ClientID: 7, Clock: 1, State: `{"v":1}`})
	require.Equal(t, map[uint64]string{7: `{"v":1}`}, awarenessMap(t, observer.nextOf(MsgAwareness)))

	fresh := e.dial(t, "L1", "viewer")
	require.Equal(t, map[uint64]string{7: `{"v":1}`}, awarenessMap(t, fresh.nextOf(MsgAwareness))) // on join
	sendAwareness(fresh, AwarenessEntry{ClientID: 7, Clock: 2, State: `{"v":2}`})
	require.Equal(t, map[uint64]string{7: `{"v":2}`}, awarenessMap(t, observer.nextOf(MsgAwareness)))

	require.NoError(t, old.ws.Close())
	require.Eventually(t, func() bool { return e.srv.Stats().Conns == 2 }, 2*time.Second, 5*time.Millisecond)
	observer.quiet() // no removal: the ID is fresh's now
	observer.write(AppendQueryAwareness(nil))
	require.Equal(t, map[uint64]string{7: `{"v":2}`}, awarenessMap(t, observer.nextOf(MsgAwareness)))

	require.NoError(t, fresh.ws.Close())
	left := time.Now()
	require.Equal(t, []AwarenessEntry{{ClientID: 7, Clock: 3, State: "null"}}, decodeAw(t, observer.nextOf(MsgAwareness)))
	other := e.dial(t, "L1", "editor")
	sendAwareness(other, AwarenessEntry{ClientID: 7, Clock: 4, State: `{"evil":1}`})
	again := e.dial(t, "L1", "viewer") // the client's own reconnect
	sendAwareness(again, AwarenessEntry{ClientID: 7, Clock: 4, State: `{"v":4}`})
	require.Equal(t, map[uint64]string{7: `{"v":4}`}, awarenessMap(t, observer.nextOf(MsgAwareness)))
	require.Less(t, time.Since(left), hold, "the machine was too slow for this hold")

	require.NoError(t, again.ws.Close())
	require.Equal(t, []AwarenessEntry{{ClientID: 7, Clock: 5, State: "null"}}, decodeAw(t, observer.nextOf(MsgAwareness)))
	time.Sleep(hold)
	sendAwareness(other, AwarenessEntry{ClientID: 7, Clock: 6, State: `{"v":6}`})
	require.Equal(t, map[uint64]string{7: `{"v":6}`}, awarenessMap(t, observer.nextOf(MsgAwareness)))
}

// An ID held for a code whose connection left stays held when another
// code floods the table with removals of unknown IDs, which makes the room
// forget removed clients.
func TestAwarenessHoldSurvivesTrim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{AwarenessTimeout: time.Minute, MaxAwarenessStates: 4})
	observer := e.dial(t, "L1", "owner")
	left := e.dial(t, "L1", "viewer")
	sendAwareness(left, AwarenessEntry{ClientID: 7, Clock: 1, State: `{"v":1}`})
	require.Equal(t, map[uint64]string{7: `{"v":1}`}, awarenessMap(t, observer.nextOf(MsgAwareness)))
	require.NoError(t, left.ws.Close())
	require.Equal(t, []AwarenessEntry{{ClientID: 7, Clock: 2, State: "null"}}, decodeAw(t, observer.nextOf(MsgAwareness)))

	other := e.dial(t, "L1", "editor")
	for id := uint64(100); id < 120; id++ {
		sendAwareness(other, AwarenessEntry{ClientID: id, Clock: 1, State: "null"})
	}
	sendAwareness(other, AwarenessEntry{ClientID: 7, Clock: 3, State: `{"evil":1}`})
	sendAwareness(other, AwarenessEntry{ClientID: 8, Clock: 1, State: `{"mine":1}`})
	require.Equal(t, map[uint64]string{8: `{"mine":1}`}, awarenessMap(t, observer.nextOf(MsgAwareness)), "ID 7 was taken")
}

// TestHeldAwarenessIDsDoNotMakeEveryIDSweep: when IDs held for codes that
// left fill the table to its sweep threshold, a sweep cannot shrink it; the
// next sweep waits until the table doubled instead of walking it for every
// new ID (a flood of unknown IDs would otherwise hold the room lock for a
// walk of thousands of entries per ID).
func TestHeldAwarenessIDsDoNotMakeEveryIDSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{AwarenessTimeout: time.Minute, MaxAwarenessStates: 4, MessagesPerSecond: -1})
	c := e.dial(t, "L1", "owner")
	rm := e.srv.room("L1")
	var from *conn
	for _, x := range *rm.snapshot.Load() {
		from = x
	}
	require.NotNil(t, from)
	rm.mu.Lock()
	for i := range 8 { // 2*MaxAwarenessStates, all held
		rm.aw[uint64(1000+i)] = &awState{clock: 2, perm: "gone", heldUntil: time.Now().Add(time.Minute)}
	}
	rm.mu.Unlock()
	for id := uint64(1); id <= 40; id++ {
		require.NoError(t, rm.applyAwareness(from, "", EncodeAwareness([]AwarenessEntry{{ClientID: id, Clock: 1, State: "null"}})))
	}
	rm.mu.Lock()
	sweeps, held := rm.sweeps, 0
	for id := range rm.aw {
		if id >= 1000 {
			held++
		}
	}
	rm.mu.Unlock()
	require.Equal(t, 8, held, "held IDs survive the sweeps")
	// A sweep leaves the 8 held IDs and waits for the table to double: one
	// per 8 new IDs (40 without the wait, one per ID).
	require.LessOrEqual(t, sweeps, 40/8+1, "a sweep per doubling, not per ID")
	_ = c
}

// The Yjs client IDs a connection that may write takes in awareness are
// claimed for its code before the entry is relayed, once per connection;
// a read-only connection claims none, nor does another connection's
// entry it re-sends.
func TestAwarenessClaimsClientIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	editor := e.dial(t, "L1", "editor")
	viewer := e.dial(t, "L1", "viewer")
	sendAwareness(editor, AwarenessEntry{ClientID: 7, Clock: 1, State: `{}`}, AwarenessEntry{ClientID: 9, Clock: 1, State: `{}`})
	for _, c := range []*client{editor, viewer} {
		require.Len(t, awarenessMap(t, c.nextOf(MsgAwareness)), 2)
	}
	sendAwareness(viewer, AwarenessEntry{ClientID: 8, Clock: 1, State: `{}`})
	for _, c := range []*client{editor, viewer} {
		require.Contains(t, awarenessMap(t, c.nextOf(MsgAwareness)), uint64(8))
	}
	// Renewals, and the editor's copy of the viewer's entry, claim nothing.
	sendAwareness(editor, AwarenessEntry{ClientID: 7, Clock: 2, State: `{"x":1}`}, AwarenessEntry{ClientID: 8, Clock: 1, State: `{}`})
	require.Equal(t, map[uint64]string{7: `{"x":1}`}, awarenessMap(t, viewer.nextOf(MsgAwareness)))
	e.fake.mu.Lock()
	defer e.fake.mu.Unlock()
	require.Equal(t, []fakeClaim{{perm: "L1-editor", ids: []uint64{7, 9}}}, e.fake.claims)
}

// A connection claims at most MaxAwarenessIDsPerConn client IDs over its
// life: removing an ID frees its awareness slot, but a claim is stored for
// good, so cycling IDs must not grow the store without bound.
func TestAwarenessClaimsAreCappedPerConn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxAwarenessIDsPerConn: 2})
	editor := e.dial(t, "L1", "editor")
	send := func(entries ...AwarenessEntry) {
		t.Helper()
		sendAwareness(editor, entries...)
		editor.nextOf(MsgAwareness)
	}
	send(AwarenessEntry{ClientID: 1, Clock: 1, State: `{}`}, AwarenessEntry{ClientID: 2, Clock: 1, State: `{}`})
	send(AwarenessEntry{ClientID: 1, Clock: 2, State: "null"})
	send(AwarenessEntry{ClientID: 3, Clock: 1, State: `{}`}) // relayed, not claimed
	e.fake.mu.Lock()
	defer e.fake.mu.Unlock()
	require.Equal(t, []fakeClaim{{perm: "L1-editor", ids: []uint64{1, 2}}}, e.fake.claims)
}
