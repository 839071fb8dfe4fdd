package ysync

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"unsafe"
)

// Awareness to a slow reader.
//
// Presence changes far more often than documents (every cursor move), and
// only the latest state of each client matters. Queuing every awareness
// frame for every connection let one client sending large states quickly
// (32 KiB at 280 per second, within every per-message limit) fill the send
// queue of each peer that read slower than that and have it closed as slow
// (4508). So each connection has at most one awareness frame of the room
// queued: while it waits to be written, later changes are kept aside,
// only the latest entry per client, and leave as one frame once it has
// been written. A connection that keeps up is sent the shared frames as
// they come; one that does not is sent fewer, merged ones, at its pace.
// The join answer and the answers to query-awareness are sent as they are.

// awQueue is a connection's awareness backlog.
type awQueue struct {
	mu      sync.Mutex
	queued  *byte                     // first byte of the awareness frame queued, nil when none
	pending map[uint64]AwarenessEntry // latest entry per client since
}

// sendAwareness queues the awareness frame holding entries, or keeps the
// entries for later if one is queued already. Entries are not modified.
func (c *conn) sendAwareness(frame []byte, entries []AwarenessEntry) {
	q := &c.aw
	q.mu.Lock()
	if q.queued != nil {
		if q.pending == nil {
			q.pending = make(map[uint64]AwarenessEntry, len(entries))
		}
		for _, e := range entries {
			// y-protocols applies a later clock, or a removal at the same one.
			if old, ok := q.pending[e.ClientID]; !ok || e.Clock >= old.Clock {
				q.pending[e.ClientID] = e
			}
		}
		q.mu.Unlock()
		return
	}
	q.queued = unsafe.SliceData(frame)
	q.mu.Unlock()
	c.send(frame)
}

// awarenessSent is called with every frame written to c; once the queued
// awareness frame is out, the entries kept aside go as one frame.
func (c *conn) awarenessSent(frame []byte) {
	q := &c.aw
	if len(frame) == 0 || frame[0] != MsgAwareness {
		return
	}
	q.mu.Lock()
	if q.queued != unsafe.SliceData(frame) {
		q.mu.Unlock()
		return
	}
	q.queued = nil
	if len(q.pending) == 0 {
		q.mu.Unlock()
		return
	}
	entries := slices.SortedFunc(maps.Values(q.pending), func(a, b AwarenessEntry) int { return cmp.Compare(a.ClientID, b.ClientID) })
	if len(q.pending) > 64 {
		q.pending = nil // a burst is over: do not keep its buckets
	} else {
		clear(q.pending)
	}
	next := AppendAwareness(nil, EncodeAwareness(entries))
	q.queued = unsafe.SliceData(next)
	q.mu.Unlock()
	c.send(next)
}
