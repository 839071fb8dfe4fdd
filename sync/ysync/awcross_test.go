package ysync

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// The hijack protection (heldFrom) holds across processes: a viewer
// connected to process B can neither replace nor remove the awareness
// entry of an editor connected to process A. B held A's entry as a remote
// one of no known code, so it let the viewer take it, and A applied what
// B published over its own live connection's entry (awareness review).
func TestAwarenessHijackAcrossProcesses(t *testing.T) {
	t.Parallel()
	const victimState = `{"user":"victim"}`
	for name, entry := range map[string]AwarenessEntry{
		"newer state": {ClientID: 7, Clock: 5, State: `{"user":"victim","evil":true}`},
		"removal":     {ClientID: 7, Clock: 5, State: "null"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := twoProcesses(t)
			victim := a.dial(t, "L1", "editor")
			observer := a.dial(t, "L1", "owner")
			sendAwareness(victim, AwarenessEntry{ClientID: 7, Clock: 1, State: victimState})
			require.Equal(t, map[uint64]string{7: victimState}, awarenessMap(t, observer.nextOf(MsgAwareness)))

			attacker := b.dial(t, "L1", "viewer")
			// The attacker learns the victim's entry (join answer from A).
			require.Equal(t, map[uint64]string{7: victimState}, awarenessMap(t, attacker.nextOf(MsgAwareness)))
			sendAwareness(attacker, entry)
			time.Sleep(300 * time.Millisecond)

			drain(observer)
			observer.write(AppendQueryAwareness(nil))
			got := awarenessMap(t, observer.nextOf(MsgAwareness)) // A's full table
			require.Equal(t, map[uint64]string{7: victimState}, got,
				"a viewer on another process changed an editor's awareness entry")
		})
	}
}

// drain discards the frames a client has received so far.
func drain(c *client) {
	for {
		select {
		case <-c.frames:
		default:
			return
		}
	}
}

// A client that reconnects through another process (same code, same Yjs
// client ID) before its old socket is noticed dead keeps its presence when
// that socket ends: the newer state from the other process moves the ID's
// ownership there, so the old socket's end announces no removal. It did,
// over the live connection's entry, everywhere (awareness review).
func TestAwarenessReconnectThroughAnotherProcess(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t)
	observerA := a.dial(t, "L1", "owner")
	observerB := b.dial(t, "L1", "owner")

	old := b.dial(t, "L1", "viewer")
	sendAwareness(old, AwarenessEntry{ClientID: 7, Clock: 1, State: `{"v":1}`})
	require.Equal(t, map[uint64]string{7: `{"v":1}`}, awarenessMap(t, observerA.nextOf(MsgAwareness)))

	// The client reconnects through process A and renews its state.
	fresh := a.dial(t, "L1", "viewer")
	sendAwareness(fresh, AwarenessEntry{ClientID: 7, Clock: 2, State: `{"v":2}`})
	for awarenessMap(t, observerB.nextOf(MsgAwareness))[7] != `{"v":2}` {
	}

	// Process B notices the old socket is gone.
	require.NoError(t, old.ws.Close())
	require.Eventually(t, func() bool { return b.srv.Stats().Conns == 1 }, 2*time.Second, 5*time.Millisecond)
	time.Sleep(200 * time.Millisecond)

	drain(observerA)
	observerA.write(AppendQueryAwareness(nil))
	require.Equal(t, map[uint64]string{7: `{"v":2}`}, awarenessMap(t, observerA.nextOf(MsgAwareness)),
		"the live client's presence on A was removed by its dead socket on B")
}

// A real y-websocket client whose socket dropped shows again at once when
// it reconnects. The server announced its removal at clock + 1; the client
// re-sends its state at its own, older clock, which stays refused, but the
// server tells it of the removal, and y-protocols answers that by sending
// its state at a higher clock. It showed again only at its second renewal,
// about 30 s later (awareness review).
func TestInteropAwarenessAfterReconnect(t *testing.T) {
	n := startNode(t)
	st := newStack(t, Config{})
	ref, owner := st.newList()
	viewer, _ := st.issue(ref, owner, "viewer")
	a, _ := n.open(st, "r-a", ref, owner), n.open(st, "r-b", ref, viewer)
	n.waitState("r-a", func(s nodeState) bool { return s.Synced })
	n.waitState("r-b", func(s nodeState) bool { return s.Synced })
	ka := fmt.Sprint(a)
	n.call("awareness", map[string]any{"id": "r-a", "state": map[string]any{"user": "ann"}}, nil)
	n.waitState("r-b", func(s nodeState) bool { return fmt.Sprint(s.Awareness[ka]) == "map[user:ann]" })

	n.call("drop", map[string]any{"id": "r-a"}, nil)
	n.waitState("r-b", func(s nodeState) bool { _, ok := s.Awareness[ka]; return !ok })
	n.call("reconnect", map[string]any{"id": "r-a"}, nil)
	n.waitState("r-a", func(s nodeState) bool { return s.Connected && s.Synced })
	start := time.Now()
	// waitState gives up after 10 s.
	n.waitState("r-b", func(s nodeState) bool { return fmt.Sprint(s.Awareness[ka]) == "map[user:ann]" })
	t.Logf("visible again after %v", time.Since(start))
}

// One awareness message whose states add up to more than the bus carries
// in one notice (store/pgnotify: 5,800 bytes) reaches the other process's
// clients: it is published in pieces. It was lost whole. (A single state
// over that limit goes alone, and store/pgnotify sends it in parts; see
// TestLargeStateCrossesProcesses.)
func TestLargeAwarenessCrossesProcesses(t *testing.T) {
	t.Parallel()
	A, B := twoPostgresStacks(t)
	ref, owner := A.newList()
	viewer, _ := A.issue(ref, owner, "viewer")
	a := A.dial(ref, owner)
	otherProc := B.dial(ref, viewer)
	time.Sleep(500 * time.Millisecond) // B's room is open and A knows B listens

	want := map[uint64]string{}
	var entries []AwarenessEntry
	for i := range 3 {
		state := fmt.Sprintf(`{"u":%d,"pad":"%s"}`, i, strings.Repeat("x", 2500))
		entries = append(entries, AwarenessEntry{ClientID: uint64(41 + i), Clock: 1, State: state})
		want[uint64(41+i)] = state
	}
	sendAwareness(a, entries...)
	got := map[uint64]string{}
	deadline := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case frame := <-otherProc.frames:
			m, err := DecodeMessage(frame)
			require.NoError(t, err)
			if m.Type == MsgAwareness {
				for id, st := range awarenessMap(t, m) {
					got[id] = st
				}
			}
		case <-deadline:
			t.Fatalf("%d of %d states crossed to the other process", len(got), len(want))
		}
	}
	require.Equal(t, want, got)
}

// A single awareness state larger than one Postgres notification (a user's
// avatar as a data URL; store/pgnotify sends it in parts) reaches the
// clients of the other process, in the answer to a process that opens the
// room after it was set and when it changes. It reached the clients of its
// own process only.
func TestLargeStateCrossesProcesses(t *testing.T) {
	t.Parallel()
	A, B := twoPostgresStacks(t)
	ref, owner := A.newList()
	viewer, _ := A.issue(ref, owner, "viewer")
	state := func(v, size int) string {
		avatar := strings.Repeat("iVBORw0KGgo", size/11)
		return fmt.Sprintf(`{"user":{"name":"ann","avatar":"data:image/png;base64,%s"},"v":%d}`, avatar, v)
	}
	a := A.dial(ref, owner)
	time.Sleep(500 * time.Millisecond) // A knows B listens
	first := state(1, 20<<10)
	require.Greater(t, len(first), 20<<10)
	sendAwareness(a, AwarenessEntry{ClientID: 7, Clock: 1, State: first})
	require.Equal(t, first, awarenessMap(t, a.nextOf(MsgAwareness))[7]) // A took it

	// B opens the room now and asks who is there; A's answer carries it.
	b := B.dial(ref, viewer)
	deadline := time.Now().Add(5 * time.Second)
	for awarenessMap(t, b.nextOf(MsgAwareness))[7] != first { // nextOf fails after 2 s of silence
		require.True(t, time.Now().Before(deadline), "the 20 KB state never reached the other process")
	}

	// A newer state near the sync server's limit (64 KiB), set while both
	// rooms are open.
	second := state(2, 60<<10)
	sendAwareness(a, AwarenessEntry{ClientID: 7, Clock: 2, State: second})
	for awarenessMap(t, b.nextOf(MsgAwareness))[7] != second {
		require.True(t, time.Now().Before(deadline), "the 60 KB state never reached the other process")
	}
}

// The same with real Postgres (two stacks, store/pgnotify between them).
func TestAwarenessHijackAcrossProcessesPostgres(t *testing.T) {
	A, B := twoPostgresStacks(t)
	ref, owner := A.newList()
	editor, _ := A.issue(ref, owner, "editor")
	viewer, _ := A.issue(ref, owner, "viewer")
	victim := A.dial(ref, editor)
	observer := A.dial(ref, owner)
	attacker := B.dial(ref, viewer)
	time.Sleep(500 * time.Millisecond)
	const victimState = `{"user":"victim"}`
	sendAwareness(victim, AwarenessEntry{ClientID: 7, Clock: 1, State: victimState})
	for awarenessMap(t, attacker.nextOf(MsgAwareness))[7] != victimState {
	}
	sendAwareness(attacker, AwarenessEntry{ClientID: 7, Clock: 5, State: `{"user":"victim","evil":true}`})
	time.Sleep(500 * time.Millisecond)
	drain(observer)
	drain(victim)
	observer.write(AppendQueryAwareness(nil))
	require.Equal(t, map[uint64]string{7: victimState}, awarenessMap(t, observer.nextOf(MsgAwareness)),
		"a viewer on process B rewrote an editor's awareness entry on process A")
}

// States another process set and never renewed (it died) do not keep a
// room that is full of them from taking a new local state: they expire
// when room is needed, not only when a joiner's frame is built (awareness
// review).
func TestExpiredRemoteStatesMakeRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxAwarenessStates: 2, AwarenessTimeout: time.Minute})
	c := e.dial(t, "L1", "owner")
	rm := e.srv.room("L1")
	require.NoError(t, rm.applyAwareness(nil, "perm-elsewhere", EncodeAwareness([]AwarenessEntry{
		{ClientID: 1, Clock: 1, State: `{"u":1}`}, {ClientID: 2, Clock: 1, State: `{"u":2}`},
	})))
	rm.mu.Lock()
	for _, st := range rm.aw {
		st.seen = time.Now().Add(-2 * time.Minute) // their process died
	}
	rm.mu.Unlock()
	require.Len(t, awarenessMap(t, c.nextOf(MsgAwareness)), 2) // their relay
	sendAwareness(c, AwarenessEntry{ClientID: 3, Clock: 1, State: `{"u":3}`})
	require.Equal(t, map[uint64]string{3: `{"u":3}`}, awarenessMap(t, c.nextOf(MsgAwareness)))
}

// gapBus carries notices between services like store/pgnotify, and can
// cut one of them off: what is published meanwhile never reaches it, and
// it gets NoticeLost, then NoticeResync when it listens again.
type gapBus struct {
	mu    sync.Mutex
	peers []*gapNotifier
}

type gapNotifier struct {
	bus  *gapBus
	fn   func(yaps.Notice)
	down bool
}

func (b *gapBus) notifier() *gapNotifier {
	n := &gapNotifier{bus: b}
	b.mu.Lock()
	b.peers = append(b.peers, n)
	b.mu.Unlock()
	return n
}

func (n *gapNotifier) Publish(_ context.Context, notice yaps.Notice) error {
	n.bus.mu.Lock()
	var to []func(yaps.Notice)
	for _, p := range n.bus.peers {
		if p != n && !p.down && p.fn != nil {
			to = append(to, p.fn)
		}
	}
	n.bus.mu.Unlock()
	for _, fn := range to {
		fn(notice)
	}
	return nil
}

func (n *gapNotifier) Listen(ctx context.Context, fn func(yaps.Notice)) error {
	n.bus.mu.Lock()
	n.fn = fn
	n.bus.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// cut stops (true) or resumes (false) deliveries to n, as a LISTEN
// connection that dropped and came back would.
func (n *gapNotifier) cut(down bool) {
	n.bus.mu.Lock()
	n.down = down
	fn := n.fn
	n.bus.mu.Unlock()
	if down {
		fn(yaps.Notice{Kind: yaps.NoticeLost})
	} else {
		fn(yaps.Notice{Kind: yaps.NoticeResync})
	}
}

// Awareness another process published while this one's notices were cut
// off is asked for again once they resume (EventResync), instead of
// staying unseen until its clients renew their states, which this raw
// client never does (y-protocols: every 15 s).
func TestAwarenessAskedAgainAfterResync(t *testing.T) {
	t.Parallel()
	bus := &gapBus{}
	na, nb := bus.notifier(), bus.notifier()
	db := filepath.Join(t.TempDir(), "yaps.db")
	A := startStack(t, Config{}, db, "127.0.0.1:0", func(c *yaps.Config) { c.Notifier = na })
	B := startStack(t, Config{}, db, "127.0.0.1:0", func(c *yaps.Config) { c.Notifier = nb })
	require.Eventually(t, func() bool {
		bus.mu.Lock()
		defer bus.mu.Unlock()
		return na.fn != nil && nb.fn != nil
	}, 5*time.Second, 5*time.Millisecond)
	ref, owner := A.newList()
	a1 := A.dial(ref, owner)

	nb.cut(true)
	// B opens the room and asks who is there, but hears neither A's
	// answer nor a1's state, which a1 sets only now.
	b1 := B.dial(ref, owner)
	const state = `{"user":"a1"}`
	sendAwareness(a1, AwarenessEntry{ClientID: 11, Clock: 1, State: state})
	require.Equal(t, state, awarenessMap(t, a1.nextOf(MsgAwareness))[11]) // A took it
	time.Sleep(100 * time.Millisecond)
	nb.cut(false)

	deadline := time.Now().Add(3 * time.Second)
	for awarenessMap(t, b1.nextOf(MsgAwareness))[11] != state { // nextOf fails after 2 s of silence
		require.True(t, time.Now().Before(deadline), "a1's state, set while B was cut off, never reached B's client")
	}
}
