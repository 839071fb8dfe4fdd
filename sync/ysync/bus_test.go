package ysync

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memBus connects the Servers of one test as if they were processes.
type memBus struct {
	mu   sync.Mutex
	subs map[*memPort]func(string, []byte)
}

// memPort is one process's Broadcaster on a memBus.
type memPort struct{ bus *memBus }

func newMemBus() *memBus { return &memBus{subs: map[*memPort]func(string, []byte){}} }

// twoProcesses returns two Servers (with default settings) sharing one
// in-memory bus: two processes of one deployment.
func twoProcesses(t *testing.T) (a, b *testEnv) {
	t.Helper()
	bus := newMemBus()
	return newEnv(t, Config{Broadcaster: bus.port()}), newEnv(t, Config{Broadcaster: bus.port()})
}

func (b *memBus) port() *memPort { return &memPort{bus: b} }

func (p *memPort) PublishAwareness(ref string, update []byte) {
	p.bus.mu.Lock()
	var fns []func(string, []byte)
	for q, fn := range p.bus.subs {
		if q != p {
			fns = append(fns, fn)
		}
	}
	p.bus.mu.Unlock()
	// Asynchronous, like a real bus.
	go func() {
		for _, fn := range fns {
			fn(ref, update)
		}
	}()
}

func (p *memPort) SubscribeAwareness(fn func(string, []byte)) func() {
	p.bus.mu.Lock()
	p.bus.subs[p] = fn
	p.bus.mu.Unlock()
	return func() {
		p.bus.mu.Lock()
		delete(p.bus.subs, p)
		p.bus.mu.Unlock()
	}
}

func TestAwarenessAcrossProcesses(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t)

	a1 := a.dial(t, "L1", "owner")
	sendAwareness(a1, AwarenessEntry{ClientID: 7, Clock: 1, State: `{"u":"a"}`})
	a1.nextOf(MsgAwareness)

	// A room opening on b asks a for the states it has.
	b1 := b.dial(t, "L1", "viewer")
	require.Equal(t, map[uint64]string{7: `{"u":"a"}`}, awarenessMap(t, b1.nextOf(MsgAwareness)))

	// Live updates and removals cross in both directions.
	sendAwareness(b1, AwarenessEntry{ClientID: 8, Clock: 1, State: `{"u":"b"}`})
	require.Equal(t, map[uint64]string{8: `{"u":"b"}`}, awarenessMap(t, a1.nextOf(MsgAwareness)))
	require.NoError(t, a1.ws.Close())
	require.Equal(t, map[uint64]string{7: "null"}, awarenessMap(t, skipAwareness(t, b1, 8)))
}

// skipAwareness returns the next awareness message that is not only about
// client id (the reader's own echo).
func skipAwareness(t *testing.T, c *client, id uint64) Message {
	t.Helper()
	for {
		m := c.nextOf(MsgAwareness)
		if _, own := awarenessMap(t, m)[id]; !own {
			return m
		}
	}
}

// TestRemoteAwarenessExpires: a state from another process that is not
// renewed within AwarenessTimeout (its process died without removing it)
// is no longer handed to joiners; a renewed one, and a local one, stay.
func TestRemoteAwarenessExpires(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	bus := newMemBus()
	a := newEnv(t, Config{Broadcaster: bus.port(), AwarenessTimeout: timeout})
	b := newEnv(t, Config{Broadcaster: bus.port(), AwarenessTimeout: timeout})

	a1 := a.dial(t, "L1", "owner")
	set := func(c *client, id, clock uint64, state string) {
		t.Helper()
		sendAwareness(c, AwarenessEntry{ClientID: id, Clock: clock, State: state})
	}
	b1 := b.dial(t, "L1", "viewer")
	set(b1, 9, 1, `{"u":"local"}`) // b's own client: never expires
	// What a joiner on b is handed: the first awareness message with b's
	// own client 9 in it (relays of 8 may come first).
	joined := func() map[uint64]string {
		t.Helper()
		c := b.dial(t, "L1", "viewer")
		defer c.ws.Close()
		for {
			if m := awarenessMap(t, c.nextOf(MsgAwareness)); m[9] != "" {
				return m
			}
		}
	}
	require.Eventually(t, func() bool { return joined()[9] != "" }, 5*time.Second, 10*time.Millisecond)
	set(a1, 7, 1, `{"u":"gone"}`)  // its process will "die": never renewed, never removed
	set(a1, 8, 1, `{"u":"alive"}`) // renewed below
	require.Eventually(t, func() bool { return len(joined()) == 3 }, 5*time.Second, 10*time.Millisecond)

	// Renew 8 until 7 is past the timeout.
	deadline := time.Now().Add(timeout + 300*time.Millisecond)
	for clock := uint64(2); time.Now().Before(deadline); clock++ {
		set(a1, 8, clock, `{"u":"alive"}`)
		time.Sleep(timeout / 10)
	}
	got := joined()
	require.NotContains(t, got, uint64(7))
	require.Equal(t, `{"u":"alive"}`, got[8])
	require.Equal(t, `{"u":"local"}`, got[9])
}

// cappedPort is a memPort that drops updates over max bytes, as
// store/pgnotify drops awareness notices over its payload limit.
type cappedPort struct {
	*memPort
	max int
}

func (p cappedPort) PublishAwareness(ref string, update []byte) {
	if len(update) <= p.max {
		p.memPort.PublishAwareness(ref, update)
	}
}

// A process that opens a busy room learns every state the other process
// holds: the answer to its "who is there?" comes in pieces a bus with a
// notice size limit carries (found in review: 25 presences of 270 bytes
// went as one 7 KB notice, which pgnotify dropped, and the joiner saw
// nobody until each client renewed its state, about 15 s later).
func TestAwarenessJoinAnswerInPieces(t *testing.T) {
	t.Parallel()
	bus := newMemBus()
	a := newEnv(t, Config{Broadcaster: cappedPort{bus.port(), 5800}, MaxAwarenessIDsPerConn: 8})
	b := newEnv(t, Config{Broadcaster: cappedPort{bus.port(), 5800}})
	want := map[uint64]string{}
	for c := range 5 {
		conn := a.dial(t, "L1", "owner")
		var entries []AwarenessEntry
		for i := range 8 {
			id := uint64(100 + 10*c + i)
			state := fmt.Sprintf(`{"user":{"name":"client %d","color":"#30bced"},"cursor":"%s"}`, id, strings.Repeat("x", 200))
			entries = append(entries, AwarenessEntry{ClientID: id, Clock: 1, State: state})
			want[id] = state
		}
		sendAwareness(conn, entries...)
		conn.nextOf(MsgAwareness)
	}
	// Every state is in a's room, more than one notice holds, before b
	// opens the room.
	require.Eventually(t, func() bool {
		chunks := a.srv.room("L1").localAwareness()
		n := 0
		for _, c := range chunks {
			_, upd, ok := decodeAwarenessNotice(c)
			require.True(t, ok)
			require.LessOrEqual(t, len(upd), awarenessChunk)
			n += len(awarenessMap(t, Message{Type: MsgAwareness, Payload: upd}))
		}
		return n == len(want)
	}, 2*time.Second, 5*time.Millisecond)
	b1 := b.dial(t, "L1", "viewer")
	got := map[uint64]string{}
	for len(got) < len(want) {
		maps.Copy(got, awarenessMap(t, b1.nextOf(MsgAwareness)))
	}
	require.Equal(t, want, got)
}
