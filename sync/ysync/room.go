package ysync

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// room holds the connections and awareness states of one list. The list
// document itself lives in the service, shared with the HTTP API.
type room struct {
	s   *Server
	ref string

	// snapshot is the current connection list, replaced (never mutated)
	// under mu, so relaying reads it without any lock: a slow socket can
	// never hold up the room, let alone other rooms.
	snapshot atomic.Pointer[[]*conn]

	rechecking atomic.Bool
	dirty      atomic.Bool

	mu      sync.Mutex
	conns   map[*conn]struct{}
	pending int // admitted, not yet upgraded
	// perIP counts the admitted connections (pending included) per
	// client address key (yaps.AddressKey), for MaxConnsPerIP.
	perIP   map[string]int
	aw      map[uint64]*awState
	live    int // entries of aw with a state
	awBytes int // JSON bytes of those states (MaxAwarenessRoomBytes)
	trimAt  int // len(aw) at which trimLocked sweeps next (past 2*MaxAwarenessStates)
	sweeps  int // trimLocked's sweeps, for tests
	// awFrame is the awareness message with every current state, built
	// once and shared (never modified) by every joiner and query-awareness
	// answer until the table changes; nil when it must be rebuilt.
	awFrame []byte
	idle    *time.Timer
	gone    bool   // unloaded
	unpin   func() // releases the service's pin on the document

	// Client updates waiting to be applied (see conn.enqueue).
	applyMu  sync.Mutex
	applyQ   []queuedUpdate
	applying bool
	kick     chan struct{} // wakes a lingering worker (capacity 1)

	// The worker waiting for send queues to drain (waitForSendRoom) sets
	// drainWaiting; connections then signal drained (capacity 1) as
	// frames leave.
	drainWaiting atomic.Bool
	drained      chan struct{}

	// held are the frames of EventDocUpdates with More set, relayed with
	// the last update of their write. Only onEvent touches it, and the
	// service emits a list's events one at a time, under its lock.
	held [][]byte
}

// awState is one awareness client. state "" means removed (null); its
// clock is kept so stale updates stay stale.
type awState struct {
	clock uint64
	state string
	owner *conn     // the local connection that set it; nil when remote
	seen  time.Time // when the state was last set (expires remote ones)
	// perm is the permission (code) whose connection set the state, here
	// or on another process ("" when unknown). Other codes may not change
	// the state while it is set, nor take the ID before heldUntil once it
	// was removed (AwarenessTimeout after its owner left), so the client's
	// own reconnect finds it (heldFrom).
	perm      string
	heldUntil time.Time
}

func newRoom(s *Server, ref string) *room {
	r := &room{s: s, ref: ref, conns: map[*conn]struct{}{}, perIP: map[string]int{}, aw: map[uint64]*awState{}, kick: make(chan struct{}, 1), drained: make(chan struct{}, 1)}
	r.snapshot.Store(&[]*conn{})
	return r
}

func (r *room) republishLocked() {
	list := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		list = append(list, c)
	}
	r.snapshot.Store(&list)
}

// broadcastAll sends msgs, in order, to every connection of the room, in
// one socket write: at once where nothing is queued (conn.relay), else
// queued, all counted before the first is written (coalescingConn).
func (r *room) broadcastAll(msgs [][]byte) {
	for _, c := range *r.snapshot.Load() {
		c.relay(msgs)
	}
}

// broadcastAwareness queues the awareness frame holding entries on every
// connection of the room, or keeps the entries for a connection that still
// has an awareness frame queued (awqueue.go).
func (r *room) broadcastAwareness(frame []byte, entries []AwarenessEntry) {
	for _, c := range *r.snapshot.Load() {
		c.sendAwareness(frame, entries)
	}
}

// join adds an upgraded connection and returns the awareness frame it
// should receive (nil when there are no states).
func (r *room) join(c *conn) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending--
	r.conns[c] = struct{}{}
	r.republishLocked()
	return r.awarenessFrameLocked()
}

// leave removes a connection and announces that the awareness clients it
// controlled are gone (clock + 1, state null), as y-websocket servers do.
func (r *room) leave(c *conn) {
	r.mu.Lock()
	if _, ok := r.conns[c]; !ok {
		// Already left: giving its address slot back twice would lift
		// the cap for another connection of that address.
		r.mu.Unlock()
		return
	}
	delete(r.conns, c)
	releaseSlot(r.perIP, c.ipKey)
	r.republishLocked()
	var removed []AwarenessEntry
	for id := range c.awIDs {
		st := r.aw[id]
		if st == nil || st.owner != c {
			continue
		}
		st.owner = nil
		st.perm, st.heldUntil = c.permID, time.Now().Add(r.s.cfg.AwarenessTimeout)
		if st.state != "" {
			st.clock++
			r.setStateLocked(st, "")
			removed = append(removed, AwarenessEntry{ClientID: id, Clock: st.clock, State: "null"})
		}
	}
	c.awIDs = nil
	r.maybeIdleLocked()
	r.mu.Unlock()
	if len(removed) > 0 {
		r.broadcastAwareness(AppendAwareness(nil, EncodeAwareness(removed)), removed)
		r.publishAwareness(c.permID, removed)
	}
}

// publishAwareness hands entries set by connections of permission perm to
// the other processes, as awareness notices of at most awarenessChunk
// bytes each (unless one state is larger): a bus may cap its notices
// (store/pgnotify sends one of up to 5,800 bytes as one notification and a
// larger one in parts, up to 256 KiB), and one notice with several states
// could go over a cap and be lost whole, or cost parts where single
// notifications do.
func (r *room) publishAwareness(perm string, entries []AwarenessEntry) {
	for _, chunk := range awarenessChunks(entries) {
		r.s.cfg.Broadcaster.PublishAwareness(r.ref, encodeAwarenessNotice(perm, chunk))
	}
}

// awarenessChunks splits entries into runs of at most awarenessChunk
// encoded bytes (a larger state goes alone).
func awarenessChunks(entries []AwarenessEntry) [][]AwarenessEntry {
	var out [][]AwarenessEntry
	start, size := 0, 3 // the entry count
	for i, e := range entries {
		n := awarenessEntrySize(e)
		if i > start && size+n > awarenessChunk {
			out = append(out, entries[start:i])
			start, size = i, 3
		}
		size += n
	}
	if start < len(entries) {
		out = append(out, entries[start:])
	}
	return out
}

// releaseSlot gives back a connection slot of an address key in counts
// (a room's or the process's perIP, under its lock).
func releaseSlot(counts map[string]int, key string) {
	if counts[key] <= 1 {
		delete(counts, key)
		return
	}
	counts[key]--
}

// maybeIdleLocked starts the unload timer when the room became empty.
func (r *room) maybeIdleLocked() {
	if len(r.conns) > 0 || r.pending > 0 || r.gone || r.idle != nil {
		return
	}
	r.idle = time.AfterFunc(r.s.cfg.IdleUnload, r.unload)
}

func (r *room) stopIdleLocked() {
	if r.idle != nil {
		r.idle.Stop()
		r.idle = nil
	}
}

// goneLocked marks the room unloaded and lets the service drop the document.
func (r *room) goneLocked() {
	r.stopIdleLocked()
	if !r.gone && r.unpin != nil {
		r.unpin()
	}
	r.gone = true
}

func (r *room) unload() {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.conns) > 0 || r.pending > 0 || r.gone {
		return
	}
	r.goneLocked()
	if r.s.rooms[r.ref] == r {
		delete(r.s.rooms, r.ref)
	}
}

// applyAwareness applies an awareness update with the y-protocols rules
// (newer clock wins; a null at the same clock removes) and relays the
// accepted entries to every connection, the sender included. from is nil
// for updates from other processes, which are not published again.
//
// A connection may not change a client ID that a connection authenticated
// with another permission owns, or owned until less than AwarenessTimeout
// ago (see awState.heldFrom): such an entry, state or null, is dropped
// without closing the sender, since y-websocket clients re-send the states
// of other clients they received.
//
// A y-websocket client shows its Yjs client ID here once the app sets an
// awareness state, usually before it writes under it (a state at clock 0,
// sent on connect, is not taken). So an ID a connection that may write takes
// is claimed for its code before the entry is relayed: nobody who learns
// the ID from the relay can write under it first (yaps.Service.ClaimClientIDs).
//
// from is the sending connection, or nil for an update another process
// published; perm is then the permission of the connection that sent it
// there ("" when unknown: a process of an earlier version).
func (r *room) applyAwareness(from *conn, perm string, payload []byte) error {
	entries, err := DecodeAwareness(payload, AwarenessLimits{
		MaxEntries:    r.s.cfg.MaxAwarenessEntries,
		MaxStateBytes: r.s.cfg.MaxAwarenessStateBytes,
	})
	if err != nil {
		return err
	}
	if from != nil {
		perm = from.permID
	}
	now := time.Now()
	r.mu.Lock()
	if grow, live := r.growthLocked(from, perm, entries, now); from != nil && !r.fitsLocked(r.awBytes+grow, r.live+live) {
		// Refused whole, like a state over MaxAwarenessStateBytes.
		r.mu.Unlock()
		return ErrMalformed
	}
	accepted := entries[:0]
	var overLimit bool
	var taken []uint64 // IDs from takes, to claim
	// stale are the removals the sender is told of: it sent a state older
	// than the removal this process holds for the ID, which a client does
	// when it reconnects after the server announced its old connection's
	// departure (clock + 1). y-protocols answers a removal of its own ID
	// by sending its state again at a higher clock, so it shows again at
	// once instead of at its second renewal, 30 s later.
	var stale []AwarenessEntry
	claims := from != nil && !from.readOnly.Load()
	for _, e := range entries {
		st := r.aw[e.ClientID]
		if !st.takes(from, perm, e, now) {
			if from != nil && st != nil && st.state == "" && !e.Removed() && e.Clock <= st.clock {
				stale = append(stale, AwarenessEntry{ClientID: e.ClientID, Clock: st.clock, State: "null"})
			}
			continue
		}
		if e.Removed() {
			if st == nil {
				// Unknown client: remember the clock, nothing to relay
				// (y-protocols reports no change either).
				r.aw[e.ClientID] = &awState{clock: e.Clock}
				r.trimLocked()
				continue
			}
			r.setStateLocked(st, "")
			st.clock = e.Clock
			if st.owner != nil {
				delete(st.owner.awIDs, e.ClientID)
				st.owner = nil
			}
			if from == nil && perm != "" {
				// Its owner left another process: the ID stays its
				// code's here too.
				st.perm, st.heldUntil = perm, now.Add(r.s.cfg.AwarenessTimeout)
			}
			accepted = append(accepted, e)
			continue
		}
		var cur0 int
		if st != nil {
			cur0 = len(st.state)
		}
		live := r.live
		if cur0 == 0 {
			live++ // a new or removed client becomes present
		}
		if !r.fitsLocked(r.awBytes-cur0+len(e.State), live) {
			if from != nil {
				overLimit = true // the message frees room only after this entry
				break
			}
			continue // from another process: drop, do not grow
		}
		if st == nil {
			if r.live >= r.s.cfg.MaxAwarenessStates {
				r.expireLocked() // a dead process's states must not fill the room
				r.trimLocked()
				if r.live >= r.s.cfg.MaxAwarenessStates {
					continue // the room is full of presences; drop, do not grow
				}
			}
			st = &awState{}
			r.aw[e.ClientID] = st
		}
		if from != nil && st.owner != from {
			if len(from.awIDs) >= r.s.cfg.MaxAwarenessIDsPerConn {
				overLimit = true
				break
			}
			if st.owner != nil {
				// The client moved to a new connection with the same
				// code (a reconnect before the old socket was noticed
				// dead; heldFrom refused any other).
				delete(st.owner.awIDs, e.ClientID)
			}
			if from.awIDs == nil {
				from.awIDs = map[uint64]struct{}{}
			}
			from.awIDs[e.ClientID] = struct{}{}
			st.owner, st.perm = from, from.permID
			// A claim is stored for good; removing an ID frees its slot in
			// awIDs, so the claims of a connection are capped on their own.
			if claims && from.awClaimed < r.s.cfg.MaxAwarenessIDsPerConn {
				from.awClaimed++
				taken = append(taken, e.ClientID)
			}
		}
		if from == nil && perm != "" {
			// Set on another process by the same code (heldFrom): the
			// client reconnected there, so its connection here, not yet
			// noticed dead, must not announce its departure when it goes.
			if st.owner != nil {
				delete(st.owner.awIDs, e.ClientID)
				st.owner = nil
			}
			st.perm = perm
		}
		r.setStateLocked(st, e.State)
		st.clock, st.seen = e.Clock, now
		accepted = append(accepted, e)
	}
	r.mu.Unlock()
	if len(stale) > 0 {
		from.sendAwareness(AppendAwareness(nil, EncodeAwareness(stale)), stale)
	}
	if len(taken) > 0 {
		// The entry is relayed even when the claim fails: presence is not
		// worth refusing for a store error, and the write path claims too.
		if err := r.s.svc.ClaimClientIDs(from.ctx, from.actor.Load(), taken); err != nil && from.ctx.Err() == nil {
			r.s.log.Warn("sync: awareness client IDs not claimed", "list", r.ref, "err", err)
		}
	}
	if len(accepted) > 0 {
		r.broadcastAwareness(AppendAwareness(nil, EncodeAwareness(accepted)), accepted)
		if from != nil {
			r.publishAwareness(perm, accepted)
		}
	}
	if overLimit {
		return ErrMalformed
	}
	return nil
}

// setStateLocked sets an awareness client's state ("" removes it), keeping
// the room's counts and dropping the shared frame.
func (r *room) setStateLocked(st *awState, state string) {
	if st.state != "" {
		r.live--
		r.awBytes -= len(st.state)
	}
	if state != "" {
		r.live++
		r.awBytes += len(state)
	}
	st.state = state
	r.awFrame = nil
}

// accepts reports whether e changes the state st (nil: an unknown client)
// as y-protocols' applyAwarenessUpdate decides: a newer clock, or a
// removal at the same clock of a state that is set.
func (st *awState) accepts(e AwarenessEntry) bool {
	if st == nil {
		return e.Clock > 0
	}
	return st.clock < e.Clock || (st.clock == e.Clock && e.Removed() && st.state != "")
}

// heldFrom reports whether a sender of permission perm (the connection
// from, or another process's connection when from is nil) may not take
// st: the ID is another code's. It is while a connection of another code
// owns it here, while another process holds a state for it set by another
// code, and for AwarenessTimeout after its owner left (heldUntil).
// Ownership moves only between connections of the same code: the
// reconnect of a client, here or through another process, whose old
// socket is not yet noticed dead or already closed. A connection of
// another code sending a newer clock (or a null) for the ID would be
// hijacking another client's presence. Updates from processes that do not
// say their sender's code (perm "") are not held.
func (st *awState) heldFrom(from *conn, perm string, now time.Time) bool {
	if st == nil || (from == nil && perm == "") {
		return false
	}
	switch {
	case st.owner != nil:
		return st.owner != from && (st.owner.permID == "" || st.owner.permID != perm)
	case st.state != "":
		return st.perm != "" && st.perm != perm
	default:
		return st.heldAfterLeave(now) && st.perm != perm
	}
}

// heldAfterLeave reports whether st, removed, is still held for the code
// of the connection that left it (see heldFrom).
func (st *awState) heldAfterLeave(now time.Time) bool {
	return st.perm != "" && now.Before(st.heldUntil)
}

// takes reports whether entry e from a sender of permission perm
// (connection from, or another process's when nil) is applied to st:
// newer (accepts) and not held from it.
func (st *awState) takes(from *conn, perm string, e AwarenessEntry, now time.Time) bool {
	return st.accepts(e) && !st.heldFrom(from, perm, now)
}

// growthLocked returns at most how many bytes applying entries from a
// connection would add to the awareness table, and how many more clients
// would be present: each accepted state counts in full, and the state it
// replaces is credited once per client. IDs repeated within one message
// can only make it overestimate.
func (r *room) growthLocked(from *conn, perm string, entries []AwarenessEntry, now time.Time) (grow, live int) {
	for i, e := range entries {
		st := r.aw[e.ClientID]
		if !st.takes(from, perm, e, now) {
			continue
		}
		if !e.Removed() {
			grow += len(e.State)
			if st == nil || st.state == "" {
				live++
			}
		}
		if st != nil && st.state != "" && !slices.ContainsFunc(entries[:i], func(p AwarenessEntry) bool { return p.ClientID == e.ClientID }) {
			grow -= len(st.state)
		}
	}
	return grow, live
}

// fitsLocked reports whether the room may hold bytes of state JSON in live
// states: within MaxAwarenessRoomBytes, and as one awareness message
// within MaxMessageSize. A y-websocket client sends back every state it
// applies, so a joiner's first awareness message holds the room's whole
// table; one over MaxMessageSize would close every joiner (1009) and the
// reconnect would fail the same way.
func (r *room) fitsLocked(bytes, live int) bool {
	return bytes <= r.s.cfg.MaxAwarenessRoomBytes &&
		int64(bytes+awarenessEntryOverhead*live+16) <= r.s.cfg.MaxMessageSize
}

// trimLocked forgets removed awareness clients once the table is large, so
// client-ID churn cannot grow it without bound. An ID still held for the
// code of a connection that left (heldFrom) is kept: forgetting it would
// let another code take it before the client reconnects.
func (r *room) trimLocked() {
	if len(r.aw) < max(r.trimAt, 2*r.s.cfg.MaxAwarenessStates) {
		return
	}
	now := time.Now()
	r.sweeps++
	for id, st := range r.aw {
		if st.state == "" && !st.heldAfterLeave(now) {
			delete(r.aw, id)
		}
	}
	// Held IDs stay: sweep again only once the table doubled, so a table
	// full of them is not walked for every ID added.
	r.trimAt = 2 * len(r.aw)
}

// expireLocked removes the remote states not renewed within
// AwarenessTimeout: their process died before it could remove them. Local
// clients drop them on their own; joiners must not be handed them.
func (r *room) expireLocked() {
	cutoff := time.Now().Add(-r.s.cfg.AwarenessTimeout)
	for _, st := range r.aw {
		if st.owner == nil && st.state != "" && st.seen.Before(cutoff) {
			r.setStateLocked(st, "")
		}
	}
}

// awarenessFrame returns an awareness message with every current state, or
// nil when there is none. The frame is shared: callers must not modify it.
func (r *room) awarenessFrame() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.awarenessFrameLocked()
}

func (r *room) awarenessFrameLocked() []byte {
	r.expireLocked()
	if r.live == 0 {
		return nil
	}
	if r.awFrame != nil {
		return r.awFrame
	}
	r.s.awFramesBuilt.Add(1)
	entries := make([]AwarenessEntry, 0, r.live)
	for id, st := range r.aw {
		if st.state != "" {
			entries = append(entries, AwarenessEntry{ClientID: id, Clock: st.clock, State: st.state})
		}
	}
	r.awFrame = AppendAwareness(nil, EncodeAwareness(entries))
	return r.awFrame
}

// awarenessChunk bounds the size of one awareness update this process
// hands its Broadcaster when it answers another process's "who is there?":
// a bus may cap its notices (store/pgnotify sends awareness of up to 5,800
// bytes as one notification, a larger update in parts, and drops one over
// 256 KiB), and one answer with every state of a busy room would go over
// it and be lost whole. A single state larger than this goes alone.
const awarenessChunk = 4096

// awarenessEntryOverhead bounds the bytes an encoded awareness entry takes
// beside its state: two varUints of at most 10 bytes (the client ID and
// the clock) and the state's length.
const awarenessEntryOverhead = 25

// awarenessEntrySize bounds the encoded size of e.
func awarenessEntrySize(e AwarenessEntry) int { return awarenessEntryOverhead + len(e.State) }

// localAwareness returns the states set by this process's connections as
// awareness notices for the other processes (publishAwareness), one run of
// chunks per code, or nil when there are none.
func (r *room) localAwareness() [][]byte {
	r.mu.Lock()
	byPerm := map[string][]AwarenessEntry{}
	for id, st := range r.aw {
		if st.owner != nil && st.state != "" {
			p := st.owner.permID
			byPerm[p] = append(byPerm[p], AwarenessEntry{ClientID: id, Clock: st.clock, State: st.state})
		}
	}
	r.mu.Unlock()
	var out [][]byte
	for _, p := range slices.Sorted(maps.Keys(byPerm)) {
		for _, chunk := range awarenessChunks(byPerm[p]) {
			out = append(out, encodeAwarenessNotice(p, chunk))
		}
	}
	return out
}

// An awareness notice is what this process publishes for the others: an
// update of its connections' entries with the code that sent them, so
// that every process keeps another code from taking the IDs (heldFrom).
// It starts with an empty entry count, so a process of an earlier
// version, which read awareness updates as they are, finds no entry in it
// and ignores it; the update without entries alone still asks "who is
// there?".
const awarenessNoticeV1 = 1

// encodeAwarenessNotice returns the notice of entries sent by connections
// of permission perm.
func encodeAwarenessNotice(perm string, entries []AwarenessEntry) []byte {
	b := []byte{0, awarenessNoticeV1}
	b = AppendVarBytes(b, []byte(perm))
	return append(b, EncodeAwareness(entries)...)
}

// decodeAwarenessNotice returns the sender's permission and the awareness
// update of a notice; ok is false for anything else (an update as a
// process of an earlier version publishes it).
func decodeAwarenessNotice(b []byte) (perm string, update []byte, ok bool) {
	if len(b) < 3 || b[0] != 0 || b[1] != awarenessNoticeV1 {
		return "", nil, false
	}
	d := decoder{b: b[2:]}
	p, err := d.varBytes()
	if err != nil {
		return "", nil, false
	}
	return string(p), d.b[d.pos:], true
}

// recheck re-authenticates the room's connections after a list change
// (archive, unarchive), off the event goroutine. Changes that arrive while
// a check runs trigger one more pass.
func (r *room) recheck() {
	r.dirty.Store(true)
	if !r.rechecking.CompareAndSwap(false, true) {
		return
	}
	r.s.bg.Add(1)
	go func() {
		defer r.s.bg.Done()
		for {
			for r.dirty.Swap(false) {
				r.recheckOnce()
			}
			r.rechecking.Store(false)
			if !r.dirty.Load() || !r.rechecking.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// stateVectorOnce returns a function that reads the room's state vector
// the first time it is called, for the step 1s sent to several
// connections at once (conn.resync).
func (r *room) stateVectorOnce() func() ([]byte, error) {
	return sync.OnceValues(func() ([]byte, error) {
		ctx, cancel := context.WithTimeout(r.s.ctx, r.s.cfg.OpTimeout)
		defer cancel()
		return r.s.svc.StateVector(ctx, r.ref)
	})
}

func (r *room) recheckOnce() {
	// Connections made writable again all get our step 1, with one state
	// vector read for all of them.
	stateVector := r.stateVectorOnce()
	byCode := map[string][]*conn{}
	for _, c := range *r.snapshot.Load() {
		byCode[c.code] = append(byCode[c.code], c)
	}
	for code, conns := range byCode {
		ctx, cancel := context.WithTimeout(r.s.ctx, r.s.cfg.OpTimeout)
		a, err := r.s.svc.Authenticate(ctx, r.ref, code)
		cancel()
		for _, c := range conns {
			switch {
			case err == nil:
				if c.setActor(a) {
					c.resync(stateVector) // writable again (unarchived)
				}
			case yaps.IsCode(err, yaps.EUNAUTHORIZED), yaps.IsCode(err, yaps.ENOTFOUND):
				c.closeForError(err)
			default:
				// Transient (database hiccup, shutdown): keep the current
				// state; the service still checks every write itself.
				if r.s.ctx.Err() == nil {
					r.s.log.Warn("sync: re-authentication failed", "list", r.ref, "err", err)
				}
			}
		}
	}
}
