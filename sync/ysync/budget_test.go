package ysync

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// budgetStack is a stack whose anonymous sync and HTTP clients may make
// mutations yap mutations per window (RULINGS R8), authenticated ones 100.
func budgetStack(t *testing.T, mutations int64, window time.Duration) *stack {
	t.Helper()
	return budgetStackWith(t, Config{}, mutations, window)
}

// budgetStackWith is budgetStack with the sync endpoint's cfg.
func budgetStackWith(t *testing.T, cfg Config, mutations int64, window time.Duration) *stack {
	t.Helper()
	lim, err := ratelimit.New(ratelimit.Config{Limits: ratelimit.Limits{
		yaps.LimitMutation: {
			yaps.ClassAnonymous:     {{Limit: mutations, Period: window}},
			yaps.ClassAuthenticated: {{Limit: 100, Period: window}},
		},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	return newStack(t, cfg, func(c *yaps.Config) { c.Limiter = lim })
}

// addNotes creates the notes ids in one edit (one update).
func addNotes(ids ...string) func(d *yjs.Doc) {
	return func(d *yjs.Doc) {
		for _, id := range ids {
			m := yjs.NewMap()
			m.Set("kind", "note")
			m.Set("body", yjs.NewText(id))
			d.GetMap("yaps").Set(id, m)
		}
	}
}

// prependBody is an edit that types s at the start of yap id's body.
func prependBody(id, s string) func(d *yjs.Doc) {
	return func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get(id)
		f, _ := v.(*yjs.Map).Get("body")
		f.(*yjs.Text).Insert(0, s, nil)
	}
}

// onHold reports whether the room's connection c has updates on hold.
func onHold(c *conn) bool {
	c.room.applyMu.Lock()
	defer c.room.applyMu.Unlock()
	return c.onHold != nil
}

// onlyConn returns the only connection of ref's room.
func (s *stack) onlyConn(ref string) *conn {
	s.t.Helper()
	conns := *s.sync.room(ref).snapshot.Load()
	require.Len(s.t, conns, 1)
	return conns[0]
}

// A sync client that has spent its yap-mutation budget (RULINGS R8) is
// not refused: its next update that creates a yap, and what it sends after
// it, wait on the server until the window resets, and are then applied in
// order. Its edits of existing yaps never cost anything, and the socket
// stays open throughout.
func TestSyncMutationBudgetHoldsUpdates(t *testing.T) {
	t.Parallel()
	st := budgetStack(t, 3, 3*time.Second)
	ref, owner := st.newList()
	p := newPeer(t, st.dial(ref, owner))
	c := st.onlyConn(ref)

	// Four new yaps in one update: stored whole, and the charge of the
	// fourth finds the budget spent.
	p.edit(addNotes("n0", "n1", "n2", "n3"))
	p.until(func() bool { return yapField(p.doc, "n3", "createdAt") != nil })
	require.Len(t, st.yaps(ref, owner), 4)
	// Typing is free, even now.
	p.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get("n0")
		f, _ := v.(*yjs.Map).Get("body")
		f.(*yjs.Text).Insert(2, "!", nil)
	})
	p.until(func() bool {
		return yapField(p.doc, "n0", "updatedAt") != nil && st.yaps(ref, owner)["n0"]["body"] == "n0!"
	})
	require.False(t, onHold(c))

	// The next creation, and an edit sent after it, are held.
	p.edit(addNotes("late"))
	p.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get("n1")
		f, _ := v.(*yjs.Map).Get("body")
		f.(*yjs.Text).Insert(0, "held ", nil)
	})
	require.Eventually(t, func() bool { return onHold(c) }, 5*time.Second, 5*time.Millisecond)
	got := st.yaps(ref, owner)
	require.NotContains(t, got, "late")
	require.Equal(t, "n1", got["n1"]["body"])

	// Once the window resets both are applied, in order, on the same socket.
	require.Eventually(t, func() bool {
		got := st.yaps(ref, owner)
		return got["late"] != nil && got["n1"]["body"] == "held n1"
	}, 10*time.Second, 20*time.Millisecond)
	p.until(func() bool {
		return yapField(p.doc, "late", "createdAt") != nil && yapField(p.doc, "n1", "body") == "held n1"
	})
	require.False(t, onHold(c))
	require.Len(t, *st.sync.room(ref).snapshot.Load(), 1, "never disconnected")
}

// heldPeer connects a peer to a new list of st (whose budget is one
// mutation) and brings it on hold: notes a and b are stored (the second
// charge finds the budget spent), and the creation of note "late" is held.
func heldPeer(t *testing.T, st *stack) (ref, owner string, p *peer, c *conn) {
	t.Helper()
	ref, owner = st.newList()
	p = newPeer(t, st.dial(ref, owner))
	c = st.onlyConn(ref)
	p.edit(addNotes("a", "b"))
	p.until(func() bool { return yapField(p.doc, "b", "createdAt") != nil })
	p.edit(addNotes("late"))
	require.Eventually(t, func() bool { return onHold(c) }, 5*time.Second, 5*time.Millisecond)
	return ref, owner, p, c
}

// Held updates of a client that goes away are dropped: its document keeps
// them, and its next sync sends them again.
func TestSyncMutationBudgetDropsHeldOnLeave(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Second
	st := budgetStack(t, 1, window)
	ref, owner, p, c := heldPeer(t, st)
	p.edit(prependBody("a", "typed ")) // held behind it; the socket is read on
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, p.c.ws.Close())
	// Noticed at once, not when the hold ends.
	require.Eventually(t, func() bool { return c.ctx.Err() != nil }, window/2, 5*time.Millisecond)
	require.Empty(t, *st.sync.room(ref).snapshot.Load())
	require.Eventually(t, func() bool {
		c.room.applyMu.Lock()
		defer c.room.applyMu.Unlock()
		return c.onHold == nil && c.pendingN == 0 && c.pendingBytes == 0
	}, 5*time.Second, 5*time.Millisecond)
	// Not stored once the budget is back either: dropped, not retried.
	time.Sleep(window + 500*time.Millisecond)
	got := st.yaps(ref, owner)
	require.NotContains(t, got, "late")
	require.Equal(t, "a", got["a"]["body"])
}

// A held socket is read on: its pongs keep it alive through a hold longer
// than PongWait, and what it sends meanwhile is applied, in order, after
// the held update.
func TestSyncMutationBudgetReadsOnWhileHeld(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	st := budgetStackWith(t, Config{PingPeriod: 200 * time.Millisecond, PongWait: time.Second}, 1, window)
	ref, owner, p, c := heldPeer(t, st)
	p.edit(prependBody("a", "typed "))
	p.edit(prependBody("b", "more "))
	require.Eventually(t, func() bool {
		got := st.yaps(ref, owner)
		return got["late"] != nil && got["a"]["body"] == "typed a" && got["b"]["body"] == "more b"
	}, 3*window, 20*time.Millisecond)
	require.NoError(t, c.ctx.Err(), "the same socket, alive throughout")
	require.Len(t, *st.sync.room(ref).snapshot.Load(), 1)
}

// The bytes held count against the address's MaxUnfinishedBytesPerIP: past
// it a socket is closed with 4529 instead of holding more (its client
// syncs them again when it reconnects).
func TestSyncMutationBudgetHeldBytesBounded(t *testing.T) {
	t.Parallel()
	st := budgetStackWith(t, Config{MaxMessageSize: 64 << 10, MaxSyncStep2Size: 64 << 10, MaxUnfinishedBytesPerIP: 128 << 10}, 1, 10*time.Second)
	_, _, p, _ := heldPeer(t, st)
	big := strings.Repeat("x", 30<<10)
	for range 5 { // 150 KiB more: over the connection's and the address's bound
		p.doc.Transact(func(*yjs.Transaction) { prependBody("a", big)(p.doc) }, nil)
		for _, u := range p.out {
			_ = p.c.ws.WriteMessage(websocket.BinaryMessage, AppendUpdate(nil, u)) // fails once closed
		}
		p.out = nil
	}
	require.Equal(t, CloseRateLimited, p.c.closed())
	require.Eventually(t, func() bool {
		st.sync.unfinished.mu.Lock()
		defer st.sync.unfinished.mu.Unlock()
		return len(st.sync.unfinished.held) == 0
	}, 5*time.Second, 5*time.Millisecond, "everything held was given back")
}

// The sync endpoint reads account credentials as the HTTP API does
// (RULINGS R8): a valid key makes the socket authenticated, with that
// class's budget, and a bad one is refused before the upgrade with 401.
func TestSyncAccountCredential(t *testing.T) {
	t.Parallel()
	st := budgetStack(t, 1, time.Minute)
	ref, owner := st.newList()
	key := st.do("POST", "/accounts", "", nil, 201)["accountKey"].(string)

	for _, h := range []http.Header{
		{"X-Account-Key": {"yak_" + "bogus"}},
		{"X-Account-Key": {yaps.NewAccountKey()}}, // well formed, unknown
	} {
		_, resp, err := websocket.DefaultDialer.Dial(st.wsURL(ref, owner), h)
		require.Error(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.EqualValues(t, http.StatusUnauthorized, problemOf(t, resp)["status"])
		require.Equal(t, `Bearer realm="yaps"`, resp.Header.Get("WWW-Authenticate"))
		resp.Body.Close()
	}

	for _, h := range []http.Header{
		{"X-Account-Key": {key}},
		{"Authorization": {"Bearer " + key}}, // the code then comes from k
	} {
		c, start := dialRawHeader(t, st.wsURL(ref, owner), h)
		start()
		require.Equal(t, uint64(SyncStep1), c.next().SyncType)
		p := newPeer(t, c)
		// Authenticated: more than the anonymous budget of 1.
		ids := make([]string, 3)
		for i := range ids {
			ids[i] = fmt.Sprintf("%t-%d", h.Get("X-Account-Key") != "", i)
			p.edit(addNotes(ids[i]))
			p.until(func() bool { return yapField(p.doc, ids[i], "createdAt") != nil })
		}
		for _, cn := range *st.sync.room(ref).snapshot.Load() {
			require.False(t, onHold(cn))
		}
		require.NoError(t, c.ws.Close())
	}
}
