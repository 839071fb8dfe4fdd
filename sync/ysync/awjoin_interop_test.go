package ysync

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A y-websocket provider re-sends every awareness change it applies,
// whatever its origin (y-websocket's _awarenessUpdateHandler), so a client
// joining a room answers the server's "everyone here" frame with one
// awareness message holding all those entries. With more states in the
// room than MaxAwarenessEntries (then 100) that message was refused as
// malformed and the joiner closed with 4400, which y-websocket treats as
// final: it never reconnected (sync review).

// 101 users present: the 102nd joins and syncs.
func TestInteropJoinerEchoesBusyRoom(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	st := newStack(t, Config{MaxConnsPerIP: 300}) // all test clients share 127.0.0.1
	ref, owner := st.newList()
	for i := range 101 {
		id := fmt.Sprintf("u%d", i)
		n.open(st, id, ref, owner)
		n.call("awareness", map[string]any{"id": id, "state": map[string]any{"user": id}}, nil)
	}
	n.waitState("u0", func(s nodeState) bool { return len(s.Awareness) == 101 })
	n.open(st, "joiner", ref, owner)
	n.waitState("joiner", func(s nodeState) bool { return s.Synced && len(s.Awareness) >= 101 })
	// Its own state reaches the others, after the echo it sent first.
	n.call("awareness", map[string]any{"id": "joiner", "state": map[string]any{"user": "joiner"}}, nil)
	n.waitState("u0", func(s nodeState) bool { return len(s.Awareness) == 102 })
	require.False(t, n.sawEvent(func(e nodeEvent) bool { return e.Ev == "closed" && e.ID == "joiner" }), "joiner closed")
}

// Default configuration: one holder of a viewer code opens four sockets
// and announces 32 client IDs on each (MaxAwarenessIDsPerConn); a
// y-websocket client still joins the list.
func TestInteropViewerPresencesLockNoOneOut(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	st := newStack(t, Config{})
	ref, owner := st.newList()
	viewer, _ := st.issue(ref, owner, "viewer")
	for k := range 4 {
		c := st.dial(ref, viewer)
		var entries []AwarenessEntry
		for i := range 32 {
			entries = append(entries, AwarenessEntry{ClientID: uint64(1000 + 32*k + i), Clock: 1, State: `{"u":1}`})
		}
		sendAwareness(c, entries...)
		c.nextOf(MsgAwareness)
	}
	n.open(st, "victim", ref, owner)
	n.waitState("victim", func(s nodeState) bool { return s.Synced && len(s.Awareness) >= 128 })
	watcher := st.dial(ref, owner)
	n.call("awareness", map[string]any{"id": "victim", "state": map[string]any{"user": "victim"}}, nil)
	for !strings.Contains(string(watcher.nextOf(MsgAwareness).Payload), "victim") { // sent after its echo
	}
	require.False(t, n.sawEvent(func(e nodeEvent) bool { return e.Ev == "closed" && e.ID == "victim" }), "victim closed")
}
