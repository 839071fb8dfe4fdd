package ysync

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
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
	ip     string          // the client address (Config.ClientIP)
	ipKey  string          // yaps.AddressKey of ip (MaxConnsPerIP)
	acct   *yaps.Account   // the account credential sent with the upgrade, if any
	ctx    context.Context // cancelled on disconnect
	cancel context.CancelFunc

	netConn net.Conn        // the hijacked socket, for kill
	reads   *readWatch      // the read side of the socket (unfinished.go)
	out     *coalescingConn // the write side (coalesce.go)
	hello   []byte          // our sync step 1, sent on connect

	actor    atomic.Pointer[yaps.Actor]
	readOnly atomic.Bool
	denied   atomic.Bool // "permission denied" already sent
	// step2Checked: the answer of a read-only connection to our step 1
	// was checked (conn.write).
	step2Checked atomic.Bool
	closing      atomic.Bool

	// Refused writes (allowRefusal), touched by the room's apply loop only.
	refusals bucket

	queuedMsgs  atomic.Int64
	queuedBytes atomic.Int64

	killMu    sync.Mutex
	killTimer *time.Timer

	// readLimitHit: gorilla refused a frame over MaxMessageSize, wrote
	// its 1009 close frame and ended the read loop (see keepOpenOnClose,
	// onDisconnect).
	readLimitHit atomic.Bool
	// gorillaClosed: Melody's write pump found a close frame sent that was
	// not ours (gorilla's 1009, or its answer to the client's close), so
	// the read side is ending on its own (see keepOpenOnClose).
	gorillaClosed atomic.Bool

	// Step 1 answers: at most one in progress and one waiting, the latest
	// (see handleStep1). Guarded by step1Mu.
	step1Mu      sync.Mutex
	step1Running bool
	step1Waiting bool
	step1Next    []byte

	// Updates of this connection waiting in the room's queue (see
	// enqueue), guarded by room.applyMu.
	applyCond    *sync.Cond
	pendingN     int
	pendingBytes int
	onHold       []queuedUpdate // kept out of the queue for a while (hold)
	heldBytes    int64          // of onHold, taken from Server.unfinished
	heldBase     int64          // of heldBytes, what the hold began with

	// Used only by the connection's read goroutine.
	messages bucket
	// The sync phase (step2.go): the gorilla connection whose read limit
	// it raises, whether it still runs, its frames, and whether the
	// connection holds a Server.step2Slots slot.
	ws         *websocket.Conn
	connected  time.Time
	syncing    bool
	syncFrames int
	step2Slot  bool
	// frameSlot: the frame being handled took the slot (a large one);
	// enqueue hands it on to the room, or handle gives it back.
	frameSlot bool

	// Guarded by room.mu: awareness client IDs this connection controls,
	// and how many it had claimed (room.applyAwareness).
	awIDs     map[uint64]struct{}
	aw        awQueue // awareness waiting for this connection (awqueue.go)
	awClaimed int
}

func newConn(s *Server, rm *room, a *yaps.Actor, code, ip string, acct *yaps.Account) *conn {
	c := &conn{s: s, room: rm, code: code, ip: ip, ipKey: yaps.AddressKey(ip), acct: acct, syncing: true, connected: time.Now()}
	if a.Permission != nil {
		c.permID = a.Permission.ID
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.applyCond = sync.NewCond(&rm.applyMu)
	c.setActor(a)
	return c
}

// setActor records a (re-)authenticated actor and whether it may write.
// It reports whether a read-only connection became writable (unarchived).
func (c *conn) setActor(a *yaps.Actor) (writable bool) {
	// Its writes are charged to this client's budget (RULINGS R8).
	cp := *a
	cp.ClientIP, cp.Account = c.ip, c.acct
	c.actor.Store(&cp)
	if c.s.svc.CanWrite(a) {
		return c.readOnly.Swap(false)
	}
	if !c.readOnly.Swap(true) {
		// Newly read-only (e.g. archived): the next write is told again.
		c.denied.Store(false)
	}
	return false
}

// dropFrameSlot gives back the slot of a large frame that was not queued
// (read-only, empty, refused, closing).
func (c *conn) dropFrameSlot() {
	if c.frameSlot {
		c.frameSlot = false
		c.s.releaseStep2Slot()
	}
}

// confirm checks the connection's code again, against the store, once the
// connection is registered for revocations (byPerm, the room). A code
// revoked after the upgrade's Authenticate and before then was missed by
// closePermission, and a revocation by another process before the room's
// first poll is never reported at all; this finds both. Revocations after
// it are events that find the connection.
func (c *conn) confirm() {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.OpTimeout)
	defer cancel()
	_, err := c.s.svc.AuthenticateFresh(ctx, c.room.ref, c.code)
	if yaps.IsCode(err, yaps.EUNAUTHORIZED) || yaps.IsCode(err, yaps.ENOTFOUND) {
		c.closeForError(err)
	}
}

// resync sends our sync step 1, with the state vector stateVector
// returns, to a connection that became writable again. Its client may have
// edited while it was read-only: those edits were refused and exist only
// on the client, and its next edits depend on them. The client answers
// with a step 2 holding everything we lack, which is then applied like any
// write.
func (c *conn) resync(stateVector func() ([]byte, error)) {
	sv, err := stateVector()
	if err != nil {
		// Closing makes the client reconnect, which resyncs as well.
		c.closeForError(err)
		return
	}
	c.step2Checked.Store(false) // its answer is a step 2 again
	c.send(AppendSyncStep1(make([]byte, 0, len(sv)+4), sv))
}

// send queues one frame. Frames are never dropped: a connection that cannot
// keep up is closed, and its client resyncs when it reconnects.
func (c *conn) send(msg []byte) { c.sendAll([][]byte{msg}) }

// sendAll queues msgs in order, counting them all as queued up front so
// that coalescingConn holds each one back for the next.
func (c *conn) sendAll(msgs [][]byte) {
	if c.closing.Load() {
		return
	}
	size := 0
	for _, m := range msgs {
		size += len(m)
	}
	n := c.queuedMsgs.Add(int64(len(msgs)))
	b := c.queuedBytes.Add(int64(size))
	if !c.s.queueFits(n, b) {
		c.queuedMsgs.Add(-int64(len(msgs)))
		c.queuedBytes.Add(-int64(size))
		c.closeWith(CloseSlowClient, "slow client: send queue full")
		return
	}
	for _, m := range msgs {
		if err := c.sess.WriteBinary(m); err != nil {
			c.sent(len(m))
		}
	}
}

// relay sends update frames the room relays: written at once by the
// calling goroutine when nothing is queued (coalescingConn.writeNow),
// queued as sendAll does otherwise.
func (c *conn) relay(msgs [][]byte) {
	if c.out != nil && c.out.writeNow(msgs, c.idle, &c.s.bg) == nil {
		c.s.directWrites.Add(1)
		return
	}
	c.sendAll(msgs)
}

// idle reports whether no frame is queued or being written, and the
// connection is not closing (its close frame may be on its way).
func (c *conn) idle() bool { return c.queuedMsgs.Load() == 0 && !c.closing.Load() }

// queued counts n bytes the socket has yet to take as one queued frame.
func (c *conn) queued(n int) {
	c.queuedMsgs.Add(1)
	c.queuedBytes.Add(int64(n))
	c.s.restsKept.Add(1)
}

// queueFits reports whether a send queue may hold n frames of b bytes.
// One frame is always accepted whatever its size (a large document's step
// 2 must get through); the byte bound applies to a backlog.
func (s *Server) queueFits(n, b int64) bool {
	return n <= int64(s.cfg.SendQueueMessages) && (b <= s.cfg.SendQueueBytes || n <= 1)
}

// hasRoom reports whether n more frames of b bytes fit in c's send queue.
func (c *conn) hasRoom(n, b int64) bool {
	return c.s.queueFits(c.queuedMsgs.Load()+n, c.queuedBytes.Load()+b)
}

// sent is called when a frame left the queue.
func (c *conn) sent(n int) {
	c.queuedMsgs.Add(-1)
	c.queuedBytes.Add(-int64(n))
	if c.room.drainWaiting.Load() {
		select {
		case c.room.drained <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// closeWith sends a close frame after whatever is queued and cuts the
// socket if that does not finish within WriteWait. Once the close frame is
// written, the socket stays open for the closing handshake (see
// keepOpenOnClose).
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

// keepOpenOnClose is called by coalescingConn.Close when Melody closes the
// session, after the frames held back (the close frame among them) were
// written. It reports whether the socket must stay open.
//
// Closing a socket whose receive buffer holds unread data makes the kernel
// send a reset, and a client that was still sending when the server closed
// it (a flood, a frame over the limit) would see 1006 instead of the close
// code. So, after a close frame of ours, the socket stays open: Melody's
// read loop goes on reading the client's frames, which handle ignores
// (closing is set), until the client's close frame ends it, and
// onDisconnect then closes the socket; kill closes it after CloseTimeout
// if the client's close frame does not come. A close frame gorilla sent
// on its own (its 1009 after a frame over the limit, noted by the read
// side or, when the write pump closes first, by the write pump) keeps the
// socket open the same way, until the read side has ended; onDisconnect
// then drains what the client still sends after a frame over the limit
// (gorilla's reader is done with it) before closing.
func (c *conn) keepOpenOnClose() bool {
	if c.ctx.Err() != nil {
		// Disconnect ran: after a frame over the limit it is draining the
		// socket, and closes it itself when done (closing it here, under
		// the drain, would reset it with the client's bytes unread).
		return c.readLimitHit.Load()
	}
	if !c.closing.Load() && !c.gorillaClosed.Load() && !c.readLimitHit.Load() {
		return false // no close frame of ours or gorilla's
	}
	c.killMu.Lock()
	if c.killTimer != nil {
		c.killTimer.Reset(c.s.cfg.CloseTimeout)
	} else {
		c.killTimer = time.AfterFunc(c.s.cfg.CloseTimeout, c.kill)
	}
	c.killMu.Unlock()
	return true
}

// drain reads and discards what the client still sends, until it closes
// its side or CloseTimeout passes. Only once the read loop has ended.
func (c *conn) drain() {
	if c.netConn == nil {
		return
	}
	_ = c.netConn.SetReadDeadline(time.Now().Add(c.s.cfg.CloseTimeout))
	_, _ = io.Copy(io.Discard, c.netConn)
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

// allowRefusal takes one token from the connection's bucket of refused
// writes (Config.RefusedWritesPerMinute). Only the room's apply loop calls
// it, one at a time.
func (c *conn) allowRefusal() bool {
	n := float64(c.s.cfg.RefusedWritesPerMinute)
	return n < 0 || c.refusals.take(n/60, n)
}

// onPing answers a ping with a pong, as gorilla's default handler does,
// once the ping passed the message rate. It runs on the read loop.
func (c *conn) onPing(data string) error {
	if !c.allowOrClose() {
		return nil
	}
	err := c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(c.s.cfg.WriteWait))
	if err == nil || errors.Is(err, websocket.ErrCloseSent) {
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}

// allow takes one token from the connection's message bucket.
func (c *conn) allow() bool {
	rate := c.s.cfg.MessagesPerSecond
	return rate < 0 || c.messages.take(rate, float64(c.s.cfg.MessageBurst))
}

// allowOrClose is allow, closing the connection with 4529 when there is no
// token.
func (c *conn) allowOrClose() bool {
	if c.allow() {
		return true
	}
	c.closeWith(CloseRateLimited, "rate limited: too many messages")
	return false
}

// bucket is a token bucket that starts full. Not safe for concurrent use.
type bucket struct {
	tokens float64
	filled time.Time // zero: never taken from
}

// take refills the bucket at rate tokens a second up to burst and takes
// one token, reporting whether there was one.
func (b *bucket) take(rate, burst float64) bool {
	now := time.Now()
	if b.filled.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.filled).Seconds()*rate)
	}
	b.filled = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// handle processes one frame from the client. Melody calls it from the
// connection's read goroutine, one frame at a time, so a slow service call
// slows only this client.
func (c *conn) handle(frame []byte) {
	m, err := DecodeMessage(frame)
	if c.syncing {
		c.syncFrame(frame, m, err)
	}
	if c.frameSlot {
		defer c.dropFrameSlot()
	}
	if c.closing.Load() {
		return
	}
	if !c.allowOrClose() {
		return
	}
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
			c.handleStep1(m.Payload)
		} else {
			c.write(m.SyncType, m.Payload)
		}
	case MsgAwareness:
		if err := c.room.applyAwareness(c, "", m.Payload); err != nil {
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

// handleStep1 answers a client's step 1 on a goroutine of its own: loading
// and encoding a document can grow a stack a lot, and this read goroutine
// lives as long as the connection. An idle server never shrinks stacks, so
// 10,000 idle clients would each keep the grown one.
//
// At most one answer per connection is in progress and at most one step 1
// waits; a later one replaces it (answering the latest state vector is
// enough: an answer holds everything the document has that the vector
// lacks). A burst of step 1 frames therefore costs one goroutine and
// sequential encodes, not one of each per frame.
func (c *conn) handleStep1(sv []byte) {
	c.step1Mu.Lock()
	if c.step1Running {
		c.step1Next, c.step1Waiting = sv, true
		c.step1Mu.Unlock()
		return
	}
	c.step1Running = true
	c.step1Mu.Unlock()
	// The connection's own wg count is held while handle runs, so this Add
	// cannot race Close's Wait.
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		for {
			c.answerStep1(sv)
			c.step1Mu.Lock()
			if !c.step1Waiting || c.closing.Load() {
				c.step1Running, c.step1Waiting, c.step1Next = false, false, nil
				c.step1Mu.Unlock()
				return
			}
			sv, c.step1Next, c.step1Waiting = c.step1Next, nil, false
			c.step1Mu.Unlock()
		}
	}()
}

func (c *conn) answerStep1(sv []byte) {
	if c.closing.Load() {
		return
	}
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
		// an attempt to write, so it is dropped without a denial. One that
		// holds anything new, a deletion included, is.
		// Only its first step 2 is checked: it answers our one step 1,
		// and checking decodes the whole update, which a reader looping
		// large step 2s would otherwise make the server do without end.
		if syncType == SyncStep2 && !c.step2Checked.Swap(true) && c.held(update) {
			return
		}
		c.deny()
		return
	}
	c.enqueue(update)
}

// Updates are applied by a worker per room, a batch at a time: the
// updates that arrived while the previous batch was stored, from any of the
// room's connections, are applied in one service write (one transaction,
// one list row update) and relayed together, so each connection gets them
// in one socket write. A connection's own updates in a batch are merged
// first (yjs.MergeUpdates): the same document change, stored as one. At
// most maxPendingUpdates (or MaxMessageSize bytes) of one connection wait;
// past that its read loop blocks, so TCP back-pressure still reaches the
// client.
const maxPendingUpdates = 64

// roomBatch bounds the updates of one write: a quarter of a connection's
// send queue. The write's frames (each update, and maybe its compensation)
// are queued on every connection at once, and must leave room for a
// backlog, or healthy clients would be closed as slow. It also keeps a
// crowded room's transaction short.
func (s *Server) roomBatch() int { return s.cfg.SendQueueMessages / 4 }

// applyLinger is how long an idle worker waits for the room's next update
// before it exits. Typing clients send one every few tens of milliseconds,
// and a worker kept across them keeps the stack the write path grew (it
// goes deep into SQLite) instead of a new goroutine growing one by copying,
// for every update. Idle rooms have no worker.
const applyLinger = time.Second

// queuedUpdate is an update waiting for the room's worker.
type queuedUpdate struct {
	c      *conn
	update []byte
	slot   bool // holds a step 2 slot until applied (step2.go)
}

func (c *conn) enqueue(update []byte) {
	if q, refused := c.queue(update); refused {
		if q.slot {
			c.s.releaseStep2Slot()
		}
		c.closeWith(CloseRateLimited, "rate limited: too many yaps created or deleted; sync again later")
	}
}

// queue adds update to the room's queue or, while the connection is held,
// behind its held updates without blocking the read loop (pongs,
// awareness and a close still arrive); refused: it does not fit there
// (holdMore).
func (c *conn) queue(update []byte) (q queuedUpdate, refused bool) {
	r := c.room
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	for !c.closing.Load() && c.onHold == nil && c.pendingN > 0 &&
		(c.pendingN >= maxPendingUpdates || int64(c.pendingBytes+len(update)) > c.s.cfg.MaxMessageSize) {
		c.applyCond.Wait()
	}
	if c.closing.Load() {
		return q, false
	}
	q = queuedUpdate{c: c, update: update, slot: c.frameSlot}
	c.frameSlot = false
	if c.onHold != nil {
		return q, !c.holdMore(q)
	}
	r.applyQ = append(r.applyQ, q)
	c.pendingN++
	c.pendingBytes += len(update)
	r.wakeWorker()
	return q, false
}

// wakeWorker has the room's queue applied: it starts a worker, or kicks the
// running one. Called with applyMu held.
func (r *room) wakeWorker() {
	if !r.applying {
		r.applying = true
		r.s.bg.Add(1)
		go r.applyLoop()
		return
	}
	select {
	case r.kick <- struct{}{}:
	default: // a kick is already pending
	}
}

// wakeWriters releases a read loop waiting in enqueue (the connection is
// closing).
func (c *conn) wakeWriters() {
	c.room.applyMu.Lock()
	c.applyCond.Broadcast()
	c.room.applyMu.Unlock()
}

func (r *room) applyLoop() {
	defer r.s.bg.Done()
	var linger, gather *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
		if gather != nil {
			gather.Stop()
		}
	}()
	var w writers
	var sc applyScratch
	defer sc.release()
	for {
		// Let the room's other read goroutines that are ready to run
		// queue their updates first: clients of a room often send at once
		// (each answers the same relayed update), and one write for all of
		// them costs a fraction of one each. A yield, not a timer: nothing
		// waits.
		runtime.Gosched()
		r.applyMu.Lock()
		if len(r.applyQ) == 0 {
			r.applyMu.Unlock()
			if !r.linger(&linger) {
				return
			}
			continue
		}
		if wait := w.gatherFor(r, time.Now()); wait > 0 {
			r.applyMu.Unlock()
			r.gather(&gather, wait)
			continue
		}
		n := min(len(r.applyQ), r.s.roomBatch())
		for i, q := range r.applyQ[:n] {
			// A large update (a step 2, see step2.go) is applied in a batch
			// of its own, so waitForSendRoom makes room for it alone.
			if int64(len(q.update)) > r.s.cfg.MaxMessageSize {
				n = max(i, 1)
				break
			}
		}
		batch := append(sc.batch[:0], r.applyQ[:n]...)
		r.applyQ = slices.Delete(r.applyQ, 0, n)
		for _, q := range batch {
			q.c.pendingN--
			q.c.pendingBytes -= len(q.update)
			q.c.applyCond.Broadcast()
		}
		r.applyMu.Unlock()
		w.took(batch)
		r.waitForSendRoom(batch)
		r.apply(batch, &sc)
		w.appliedAt = time.Now()
		clear(batch) // holds no update past its batch
		sc.batch = batch
	}
}

// applyScratch holds what applying a batch needs, reused by the room's
// worker from one batch to the next.
type applyScratch struct {
	batch   []queuedUpdate
	order   []*conn    // the batch's connections, in order of their first update
	updates [][][]byte // updates[i]: the updates of order[i]
	ups     []yaps.ClientUpdate

	// The batches' context (opContext).
	ctx     context.Context
	cancel  context.CancelFunc
	renewAt time.Time
}

// opContext returns the context of a batch's service call: it ends at
// least timeout/2 and at most timeout after now. One context serves a
// worker's batches until half its time is spent. A context per batch,
// with its timer and its registration in the server's context (a lock
// all rooms share), was about 1 % of the server's CPU in the sync
// benchmark (50 rooms × 4 clients).
func (sc *applyScratch) opContext(parent context.Context, timeout time.Duration, now time.Time) context.Context {
	if sc.cancel == nil || !now.Before(sc.renewAt) {
		sc.release()
		sc.ctx, sc.cancel = context.WithTimeout(parent, timeout)
		sc.renewAt = now.Add(timeout / 2)
	}
	return sc.ctx
}

// release cancels the batches' context, if any.
func (sc *applyScratch) release() {
	if sc.cancel != nil {
		sc.cancel()
		sc.ctx, sc.cancel = nil, nil
	}
}

// Gathering a busy room's writers. On a room where several clients write
// at once, each batch holds the updates that arrived while the previous one
// was stored, and the room settles into groups: the clients whose updates
// were relayed together answer together, and each group's batch is stored
// and relayed on its own. Every batch costs a store write and one socket
// write per connection of the room, whatever its size, so two groups cost
// about twice what one does. The worker of a busy room (one whose previous
// batch was applied within busyWindow) therefore waits, up to
// Config.BatchWait from when it found its next batch, for the connections
// that wrote in its last two batches and have nothing queued yet, which
// merges the groups. A room with one writer never waits, nor does one
// whose writers pause longer than busyWindow (people typing: a keystroke
// every 100 ms or so).

// busyWindow is how soon after the previous batch a room's next update
// must come for the room to count as busy: 4 BatchWaits, at least 10 ms
// (20 ms by default, well under a typist's 100 ms).
func (s *Server) busyWindow() time.Duration {
	return max(10*time.Millisecond, 4*s.cfg.BatchWait)
}

// maxGathered bounds the writers a batch waits for.
const maxGathered = 64

// writers tracks, for one apply loop, the connections that wrote in the
// room's last two batches.
type writers struct {
	last, before []*conn // senders of the last batch and of the one before
	appliedAt    time.Time
	gatherUntil  time.Time // zero: not waiting
}

// took records the senders of batch and ends any wait.
func (w *writers) took(batch []queuedUpdate) {
	w.before, w.last = w.last, w.before[:0]
	for _, q := range batch {
		if len(w.last) < maxGathered && !slices.Contains(w.last, q.c) {
			w.last = append(w.last, q.c)
		}
	}
	w.gatherUntil = time.Time{}
}

// gatherFor returns how long the worker should wait for more of the room's
// writers before it takes the queue (0: take it now). applyMu is held and
// the queue is not empty.
func (w *writers) gatherFor(r *room, now time.Time) time.Duration {
	wait := r.s.cfg.BatchWait
	if wait <= 0 || w.appliedAt.IsZero() || now.Sub(w.appliedAt) > r.s.busyWindow() ||
		len(r.applyQ) >= r.s.roomBatch() || r.s.ctx.Err() != nil {
		return 0
	}
	if !slices.ContainsFunc(w.last, w.missing) && !slices.ContainsFunc(w.before, w.missing) {
		return 0
	}
	if w.gatherUntil.IsZero() {
		w.gatherUntil = now.Add(wait)
		r.s.gathers.Add(1)
	}
	return w.gatherUntil.Sub(now)
}

// missing reports whether c, a recent writer, may still send: it is
// connected, not being closed, not held back, and has nothing queued.
// applyMu is held.
func (w *writers) missing(c *conn) bool {
	return c.pendingN == 0 && c.onHold == nil && !c.closing.Load() && c.ctx.Err() == nil
}

// gather waits up to wait for the room's next update (or the server's end).
func (r *room) gather(t **time.Timer, wait time.Duration) {
	if *t == nil {
		*t = time.NewTimer(wait)
	} else {
		(*t).Reset(wait)
	}
	select {
	case <-r.kick:
	case <-(*t).C:
	case <-r.s.ctx.Done():
	}
}

// waitForSendRoom waits, up to SendQueueWait, until every connection of
// the room can queue the frames batch will relay: one per update, and one
// more per update for a compensation or a denial, in at most the batch's
// bytes (roomBatch keeps that within half a queue; a large update comes
// alone, see applyLoop, and needs room for all of it). Connections still
// without room afterwards are closed as slow; everyone else gets the
// batch.
func (r *room) waitForSendRoom(batch []queuedUpdate) {
	need := int64(2 * len(batch))
	var needBytes int64
	for _, q := range batch {
		needBytes += int64(len(q.update)) + 8 // the frame's own header
	}
	if len(batch) > 1 {
		needBytes = min(needBytes, r.s.cfg.SendQueueBytes/2)
	} // else one update, at most MaxSyncStep2Size: room for all of it
	behind := func(c *conn) bool { return !c.closing.Load() && !c.hasRoom(need, needBytes) }
	anyBehind := func() bool { return slices.ContainsFunc(*r.snapshot.Load(), behind) }
	if !anyBehind() {
		return
	}
	timer := time.NewTimer(r.s.cfg.SendQueueWait)
	defer timer.Stop()
	r.drainWaiting.Store(true)
	defer r.drainWaiting.Store(false)
	// Checked after drainWaiting is set, so a frame sent in between still
	// leaves a wake-up in drained.
	for anyBehind() {
		select {
		case <-r.drained:
		case <-r.s.ctx.Done():
			return
		case <-timer.C:
			for _, c := range *r.snapshot.Load() {
				if behind(c) {
					c.closeWith(CloseSlowClient, "slow client: send queue full")
				}
			}
			return
		}
	}
}

// linger waits up to applyLinger for another update. It reports false,
// with applying cleared, when the worker should exit: nothing came, or the
// server is done and nothing is pending.
func (r *room) linger(t **time.Timer) bool {
	if *t == nil {
		*t = time.NewTimer(applyLinger)
	} else {
		(*t).Reset(applyLinger)
	}
	select {
	case <-r.kick:
		return true
	case <-(*t).C:
	case <-r.s.ctx.Done():
	}
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if len(r.applyQ) > 0 {
		return true
	}
	r.applying = false
	return false
}

// apply stores a batch of queued updates in one service write and answers
// each connection whose update was refused. The context is the server's,
// not the connections': updates a client sent before it went away are
// still stored. Connections being closed by the server (a bad message, a
// revoked code, a slow reader) have theirs dropped.
func (r *room) apply(batch []queuedUpdate, sc *applyScratch) {
	// Connections whose updates hold step 2 slots, and how many; made
	// when needed (rarely: only large updates hold one).
	var slots map[*conn]int
	defer func() {
		for _, n := range slots {
			for range n {
				r.s.releaseStep2Slot()
			}
		}
	}()
	// The batch's updates by connection: a batch holds at most roomBatch
	// updates, so a connection is found by looking through order.
	order, updates := sc.order[:0], sc.updates
	defer func() {
		clear(order)
		for i := range updates {
			clear(updates[i])
			updates[i] = updates[i][:0]
		}
		clear(sc.ups)
		sc.order, sc.updates = order, updates
	}()
	for _, q := range batch {
		if q.slot {
			if slots == nil {
				slots = map[*conn]int{}
			}
			slots[q.c]++
		}
		if q.c.closing.Load() {
			continue
		}
		i := slices.Index(order, q.c)
		if i < 0 {
			i = len(order)
			order = append(order, q.c)
			if i == len(updates) {
				updates = append(updates, nil)
			}
		}
		updates[i] = append(updates[i], q.update)
	}
	ups := sc.ups[:0]
	defer func() { sc.ups = ups }()
	for i, c := range order {
		mine := updates[i]
		if len(mine) > 1 {
			if merged, err := yjs.MergeUpdates(mine); err == nil {
				mine = [][]byte{merged}
			}
			// else: applied one by one, so the bad one is the one refused.
		}
		a := c.actor.Load()
		for _, u := range mine {
			ups = append(ups, yaps.ClientUpdate{Actor: a, Update: u, Origin: c})
		}
	}
	if len(ups) == 0 {
		return
	}
	errs := r.s.svc.ApplyUpdates(sc.opContext(r.s.ctx, r.s.cfg.OpTimeout, time.Now()), r.ref, ups)
	type holding struct {
		updates [][]byte
		wait    time.Duration
	}
	var heldOrder []*conn
	var holds map[*conn]*holding // made when needed
	var resync []*conn
	for i, err := range errs {
		c := ups[i].Origin.(*conn)
		var ye *yaps.Error
		switch {
		case err == nil:
		case yaps.DependsOnMissing(err):
			// It builds on changes this server does not have. A client can
			// hold some it never sent here: y-websocket shares a tab's
			// changes with the browser's other tabs over a
			// BroadcastChannel, and a tab does not forward what it got
			// that way (while the first tab's own are held, or its socket
			// is down). Ask it for all the server lacks, as on connect:
			// its step 2 brings the refused change and what it depends on.
			// Before, the change was dropped until the client reconnected.
			if !c.allowRefusal() {
				c.closeWith(CloseRateLimited, "rate limited: too many refused writes")
			} else if !slices.Contains(resync, c) {
				resync = append(resync, c)
			}
		case errors.As(err, &ye) && ye.Code == yaps.ERATELIMITED:
			// The sender's yap-mutation budget is spent: kept, not refused.
			h := holds[c]
			if h == nil {
				if holds == nil {
					holds = map[*conn]*holding{}
				}
				h = &holding{}
				holds[c] = h
				heldOrder = append(heldOrder, c)
			}
			h.updates = append(h.updates, ups[i].Update)
			h.wait = max(h.wait, ye.RetryAfter)
		case yaps.IsCode(err, yaps.EFORBIDDEN):
			// Archived meanwhile, or outside an agent's scope: the update
			// was not applied. Only archive (seen through
			// EventListChanged) turns the whole connection read-only.
			c.deny()
			if !c.allowRefusal() {
				c.closeWith(CloseRateLimited, "rate limited: too many refused writes")
			}
		default:
			c.closeForError(err)
		}
	}
	if len(resync) > 0 {
		stateVector := r.stateVectorOnce()
		for _, c := range resync {
			c.resync(stateVector)
		}
	}
	for _, c := range heldOrder {
		if c.hold(holds[c].updates, slots[c], holds[c].wait) {
			delete(slots, c) // kept by the held updates
			continue
		}
		// Over what the address may hold: its client syncs them again.
		c.closeWith(CloseRateLimited, "rate limited: too many yaps created or deleted; sync again later")
	}
}

// hold keeps updates of c that were refused because its sender's
// yap-mutation budget is spent (RULINGS R8, yaps.Service.ApplyUpdate), and
// c's updates queued behind them, out of the room's batches for wait, then
// queues them again in order. The socket is read on meanwhile (pongs,
// awareness and a close arrive as ever), and what it sends is held behind
// them (holdMore). Nothing is refused: the client's new yaps reach the
// others once its budget allows, and its edits follow. slots: how many
// step 2 slots the updates hold (kept until they are applied: the first
// ones hold them). Held bytes count against the address's
// MaxUnfinishedBytesPerIP with its unfinished messages, and at most
// MaxMessageSize more than the hold began with may pile up per
// connection: past either, or if the budget cannot take the refused
// updates, the connection is closed with 4529 and its client syncs them
// again when it reconnects (hold reports false). Held updates of a client
// that goes away are dropped at once (it sends them again when it next
// syncs).
func (c *conn) hold(updates [][]byte, slots int, wait time.Duration) bool {
	r := c.room
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	var n int64
	for _, u := range updates {
		n += int64(len(u))
	}
	if c.closing.Load() || !c.s.unfinished.take(c.ipKey, n) {
		return false
	}
	c.heldBytes = n
	for i, u := range updates {
		c.onHold = append(c.onHold, queuedUpdate{c: c, update: u, slot: i < slots})
		c.pendingN++
		c.pendingBytes += len(u)
	}
	// What the connection queued behind them stays behind them: it is
	// counted in pendingBytes already, and in the budget from now on.
	var behind int64
	r.applyQ = slices.DeleteFunc(r.applyQ, func(q queuedUpdate) bool {
		if q.c == c {
			c.onHold = append(c.onHold, q)
			behind += int64(len(q.update))
		}
		return q.c == c
	})
	c.s.unfinished.forceTake(c.ipKey, behind)
	c.heldBytes += behind
	c.heldBase = c.heldBytes
	// A read loop waiting in queue for room goes on: what it reads now
	// goes behind the held updates (holdMore). Left waiting, it read
	// nothing (no pongs, no close) until the hold ended.
	c.applyCond.Broadcast()
	c.s.bg.Add(1) // the apply loop holds one: Close has not begun to wait
	go func() {
		defer c.s.bg.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.ctx.Done(): // gone, or the server closing
		}
		c.release()
	}()
	return true
}

// holdMore adds q behind a held connection's updates, if it fits: the
// connection's held bytes stay within MaxMessageSize (beyond the updates
// the hold began with) and its address's within MaxUnfinishedBytesPerIP.
// Called with the room's applyMu held.
func (c *conn) holdMore(q queuedUpdate) bool {
	n := int64(len(q.update))
	if c.heldBytes-c.heldBase+n > c.s.cfg.MaxMessageSize || !c.s.unfinished.take(c.ipKey, n) {
		return false
	}
	c.onHold = append(c.onHold, q)
	c.heldBytes += n
	c.pendingN++
	c.pendingBytes += len(q.update)
	return true
}

// release ends a hold: the held updates go back in the room's queue, or
// are dropped when the client is gone or being closed.
func (c *conn) release() {
	r := c.room
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	held := c.onHold
	c.onHold = nil
	c.s.unfinished.give(c.ipKey, c.heldBytes)
	c.heldBytes = 0
	c.applyCond.Broadcast()
	if c.ctx.Err() != nil || c.closing.Load() {
		for _, q := range held {
			c.pendingN--
			c.pendingBytes -= len(q.update)
			if q.slot {
				c.s.releaseStep2Slot()
			}
		}
		return
	}
	r.applyQ = append(r.applyQ, held...)
	r.wakeWorker()
}

// held reports whether the server's document already has everything
// update holds (structs and deletions), so applying it changes nothing.
func (c *conn) held(update []byte) bool {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.OpTimeout)
	defer cancel()
	ok, err := c.s.svc.Holds(ctx, c.room.ref, update)
	return err == nil && ok
}

// deny answers the first refused write with auth "permission denied".
func (c *conn) deny() {
	if !c.denied.Swap(true) {
		c.send(AppendPermissionDenied(nil, permissionDenied))
	}
}
