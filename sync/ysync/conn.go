package ysync

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/olahol/melody"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Close codes (see the package documentation).
const (
	CloseBadMessage  = 4400
	CloseRevoked     = 4401
	CloseNotFound    = 4404
	CloseTooLarge    = 4413
	CloseInternal    = 4500
	CloseOverloaded  = 4503
	CloseSlowClient  = 4508
	CloseRateLimited = 4529
)

// permissionDenied is the reason sent with the auth message.
const permissionDenied = "permission denied"

// conn is one sync connection.
type conn struct {
	s      *Server
	room   *room
	sess   *melody.Session // set on connect, before the conn is reachable
	code   string          // kept to re-authenticate when the list changes; never logged
	permID string
	ctx    context.Context // cancelled on disconnect
	cancel context.CancelFunc

	netConn net.Conn // the hijacked socket, for kill
	hello   []byte   // our sync step 1, sent on connect

	actor    atomic.Pointer[yaps.Actor]
	readOnly atomic.Bool
	denied   atomic.Bool // "permission denied" already sent
	closing  atomic.Bool

	queuedMsgs  atomic.Int64
	queuedBytes atomic.Int64

	killMu    sync.Mutex
	killTimer *time.Timer

	// Updates waiting to be applied (see enqueue).
	applyMu      sync.Mutex
	applyCond    *sync.Cond
	pending      [][]byte
	pendingBytes int
	applying     bool
	kick         chan struct{} // wakes a lingering worker (capacity 1)

	// Used only by the connection's read goroutine.
	tokens   float64
	lastFill time.Time

	// Guarded by room.mu: awareness client IDs this connection controls.
	awIDs map[uint64]struct{}
}

func newConn(s *Server, rm *room, a *yaps.Actor, code string) *conn {
	c := &conn{s: s, room: rm, code: code, tokens: float64(s.cfg.MessageBurst), lastFill: time.Now()}
	if a.Permission != nil {
		c.permID = a.Permission.ID
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.applyCond = sync.NewCond(&c.applyMu)
	c.kick = make(chan struct{}, 1)
	c.setActor(a)
	return c
}

// setActor records a (re-)authenticated actor and whether it may write.
func (c *conn) setActor(a *yaps.Actor) {
	c.actor.Store(a)
	if c.s.svc.CanWrite(a) {
		c.readOnly.Store(false)
	} else if !c.readOnly.Swap(true) {
		// Newly read-only (e.g. archived): the next write is told again.
		c.denied.Store(false)
	}
}

// send queues one frame. Frames are never dropped: a connection that cannot
// keep up is closed, and its client resyncs when it reconnects.
func (c *conn) send(msg []byte) {
	if c.closing.Load() {
		return
	}
	n := c.queuedMsgs.Add(1)
	b := c.queuedBytes.Add(int64(len(msg)))
	// One frame is always accepted whatever its size (a large document's
	// step 2 must get through); the byte bound applies to a backlog.
	if n > int64(c.s.cfg.SendQueueMessages) || (b > c.s.cfg.SendQueueBytes && n > 1) {
		c.sent(len(msg))
		c.closeWith(CloseSlowClient, "slow client: send queue full")
		return
	}
	if err := c.sess.WriteBinary(msg); err != nil {
		c.sent(len(msg))
	}
}

// sent is called when a frame left the queue.
func (c *conn) sent(n int) {
	c.queuedMsgs.Add(-1)
	c.queuedBytes.Add(-int64(n))
}

// closeWith sends a close frame after whatever is queued and cuts the
// socket if that does not finish within WriteWait.
func (c *conn) closeWith(code int, reason string) {
	if !c.closing.CompareAndSwap(false, true) {
		return
	}
	if len(reason) > 120 { // a close frame holds at most 123 bytes of reason
		reason = reason[:120]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	_ = c.sess.CloseWithMsg(websocket.FormatCloseMessage(code, reason))
	c.wakeWriters()
	c.killMu.Lock()
	if c.killTimer == nil {
		c.killTimer = time.AfterFunc(c.s.cfg.WriteWait, c.kill)
	}
	c.killMu.Unlock()
}

// kill cuts the socket; Melody's read loop then ends and disconnect runs.
func (c *conn) kill() {
	if c.netConn != nil {
		_ = c.netConn.Close()
	}
}

func (c *conn) stopKill() {
	c.killMu.Lock()
	if c.killTimer != nil {
		c.killTimer.Stop()
	}
	c.killMu.Unlock()
}

// closeForError ends the connection after a failed service call.
func (c *conn) closeForError(err error) {
	msg := yaps.ErrorMessage(err)
	switch yaps.ErrorCode(err) {
	case yaps.EINVALID:
		c.closeWith(CloseBadMessage, msg)
	case yaps.EUNAUTHORIZED:
		c.closeWith(CloseRevoked, "permission revoked")
	case yaps.ENOTFOUND:
		c.closeWith(CloseNotFound, msg)
	case yaps.ETOOLARGE:
		c.closeWith(CloseTooLarge, msg)
	case yaps.ERATELIMITED:
		c.closeWith(CloseRateLimited, msg)
	case yaps.EUNAVAILABLE:
		c.closeWith(CloseOverloaded, msg)
	default:
		if c.ctx.Err() != nil || errors.Is(err, context.Canceled) {
			c.closeWith(websocket.CloseGoingAway, "server shutting down")
			return
		}
		c.s.log.Error("sync: service call failed", "list", c.room.ref, "err", err)
		c.closeWith(CloseInternal, "internal error")
	}
}

// allow takes one token from the connection's message bucket.
func (c *conn) allow() bool {
	rate := c.s.cfg.MessagesPerSecond
	if rate < 0 {
		return true
	}
	now := time.Now()
	c.tokens += now.Sub(c.lastFill).Seconds() * rate
	c.lastFill = now
	if burst := float64(c.s.cfg.MessageBurst); c.tokens > burst {
		c.tokens = burst
	}
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

// handle processes one frame from the client. Melody calls it from the
// connection's read goroutine, one frame at a time, so a slow service call
// slows only this client.
func (c *conn) handle(frame []byte) {
	if c.closing.Load() {
		return
	}
	if !c.allow() {
		c.closeWith(CloseRateLimited, "rate limited: too many messages")
		return
	}
	m, err := DecodeMessage(frame)
	if errors.Is(err, ErrUnknownType) {
		return // forward compatibility, as y-websocket servers do
	}
	if err != nil {
		c.closeWith(CloseBadMessage, "bad message")
		return
	}
	switch m.Type {
	case MsgSync:
		if m.SyncType == SyncStep1 {
			// Answered on a goroutine of its own: loading and encoding a
			// document can grow a stack a lot, and this read goroutine
			// lives as long as the connection. An idle server never
			// shrinks stacks, so 10,000 idle clients would each keep the
			// grown one. The connection's own wg count is held while
			// handle runs, so this Add cannot race Close's Wait.
			c.s.wg.Add(1)
			go func(sv []byte) {
				defer c.s.wg.Done()
				c.answerStep1(sv)
			}(m.Payload)
		} else {
			c.write(m.SyncType, m.Payload)
		}
	case MsgAwareness:
		if err := c.room.applyAwareness(c, m.Payload); err != nil {
			c.closeWith(CloseBadMessage, "bad awareness update")
		}
	case MsgQueryAwareness:
		if aw := c.room.awarenessFrame(); aw != nil {
			c.send(aw)
		} else {
			c.send(AppendAwareness(nil, EncodeAwareness(nil)))
		}
	case MsgAuth:
		// Auth flows from server to client only; ignore.
	}
}

func (c *conn) answerStep1(sv []byte) {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.OpTimeout)
	update, err := c.s.svc.EncodeState(ctx, c.room.ref, sv)
	cancel()
	if err != nil {
		c.closeForError(err)
		return
	}
	c.send(AppendSyncStep2(make([]byte, 0, len(update)+8), update))
}

// write handles a client's step 2 or update.
func (c *conn) write(syncType uint64, update []byte) {
	if isEmptyUpdate(update) {
		return // nothing new: not a write, nothing to store
	}
	if c.readOnly.Load() {
		// A step 2 is the client's answer to our step 1. A read-only
		// client that reconnects with a synced document answers with
		// structs we already have plus its whole delete set; that is not
		// an attempt to write, so it is dropped without a denial.
		if syncType == SyncStep2 && c.knownStructs(update) {
			return
		}
		c.deny()
		return
	}
	c.enqueue(update)
}

// Updates from one connection are applied by a worker, one batch at a
// time: when a client sends faster than its updates are stored, those that
// arrived meanwhile are merged (yjs.MergeUpdates) and stored in one write,
// which is the same document change at a fraction of the cost. At most
// maxPendingUpdates (or MaxMessageSize bytes) wait; past that the read loop
// blocks, so TCP back-pressure still reaches the client.
const maxPendingUpdates = 64

// applyLinger is how long an idle worker waits for the connection's next
// update before it exits. A typing client sends one every few tens of
// milliseconds, and a worker kept across them keeps the stack the write
// path grew (it goes deep into SQLite) instead of a new goroutine growing
// one by copying, for every update. Idle connections have no worker.
const applyLinger = time.Second

func (c *conn) enqueue(update []byte) {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	for len(c.pending) > 0 && !c.closing.Load() &&
		(len(c.pending) >= maxPendingUpdates || int64(c.pendingBytes+len(update)) > c.s.cfg.MaxMessageSize) {
		c.applyCond.Wait()
	}
	if c.closing.Load() {
		return
	}
	c.pending = append(c.pending, update)
	c.pendingBytes += len(update)
	if !c.applying {
		c.applying = true
		c.s.bg.Add(1)
		go c.applyLoop()
		return
	}
	select {
	case c.kick <- struct{}{}:
	default: // a kick is already pending
	}
}

// wakeWriters releases a read loop waiting in enqueue (the connection is
// closing).
func (c *conn) wakeWriters() {
	c.applyMu.Lock()
	c.applyCond.Broadcast()
	c.applyMu.Unlock()
}

func (c *conn) applyLoop() {
	defer c.s.bg.Done()
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		c.applyMu.Lock()
		batch := c.pending
		c.pending, c.pendingBytes = nil, 0
		if c.closing.Load() {
			c.applying = false
			c.applyMu.Unlock()
			return
		}
		if len(batch) == 0 {
			c.applyMu.Unlock()
			if !c.linger(&linger) {
				return
			}
			continue
		}
		c.applyCond.Broadcast()
		c.applyMu.Unlock()
		if len(batch) > 1 {
			if merged, err := yjs.MergeUpdates(batch); err == nil {
				batch = [][]byte{merged}
			}
			// else: apply one by one, so the bad one is the one refused.
		}
		for _, u := range batch {
			if !c.apply(u) {
				break
			}
		}
	}
}

// linger waits up to applyLinger for another update. It reports false,
// with applying cleared, when the worker should exit: nothing came, or the
// connection (or the server) is done and nothing is pending.
func (c *conn) linger(t **time.Timer) bool {
	if *t == nil {
		*t = time.NewTimer(applyLinger)
	} else {
		(*t).Reset(applyLinger)
	}
	select {
	case <-c.kick:
		return true
	case <-(*t).C:
	case <-c.ctx.Done():
	}
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	if len(c.pending) > 0 && !c.closing.Load() {
		return true
	}
	c.applying = false
	return false
}

// apply stores one update and reports whether the connection goes on.
// The context is the server's, not the connection's: updates a client sent
// before it went away are still stored.
func (c *conn) apply(update []byte) bool {
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.OpTimeout)
	err := c.s.svc.ApplyUpdate(ctx, c.actor.Load(), update, c)
	cancel()
	switch {
	case err == nil:
	case yaps.IsCode(err, yaps.EFORBIDDEN):
		// Archived meanwhile, or outside an agent's scope: the update was
		// not applied. Only archive (seen through EventListChanged) turns
		// the whole connection read-only.
		c.deny()
	default:
		c.closeForError(err)
		return false
	}
	return true
}

// knownStructs reports whether the server already has every struct of
// update (the update's state vector is within the document's).
func (c *conn) knownStructs(update []byte) bool {
	usv, err := yjs.EncodeStateVectorFromUpdate(update)
	if err != nil {
		return false
	}
	theirs, err := yjs.DecodeStateVector(usv)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.OpTimeout)
	svb, err := c.s.svc.StateVector(ctx, c.room.ref)
	cancel()
	if err != nil {
		return false
	}
	ours, err := yjs.DecodeStateVector(svb)
	if err != nil {
		return false
	}
	for client, clock := range theirs {
		if ours[client] < clock {
			return false
		}
	}
	return true
}

// deny answers the first refused write with auth "permission denied".
func (c *conn) deny() {
	if !c.denied.Swap(true) {
		c.send(AppendPermissionDenied(nil, permissionDenied))
	}
}
