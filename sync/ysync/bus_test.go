package ysync

import (
	"sync"
	"testing"

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
	bus := newMemBus()
	a := newEnv(t, Config{Broadcaster: bus.port()})
	b := newEnv(t, Config{Broadcaster: bus.port()})

	a1 := a.dial(t, "L1", "owner")
	a1.write(AppendAwareness(nil, EncodeAwareness([]AwarenessEntry{{ClientID: 7, Clock: 1, State: `{"u":"a"}`}})))
	a1.nextOf(MsgAwareness)

	// A room opening on b asks a for the states it has.
	b1 := b.dial(t, "L1", "viewer")
	require.Equal(t, map[uint64]string{7: `{"u":"a"}`}, awarenessMap(t, b1.nextOf(MsgAwareness)))

	// Live updates and removals cross in both directions.
	b1.write(AppendAwareness(nil, EncodeAwareness([]AwarenessEntry{{ClientID: 8, Clock: 1, State: `{"u":"b"}`}})))
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
