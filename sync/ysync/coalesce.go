package ysync

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/yaps-dev/yaps/internal/rawnet"
)

// maxCoalesce bounds the bytes held back to leave in one write.
const maxCoalesce = 64 << 10

var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

// coalescingConn is the socket gorilla writes frames to. Gorilla writes
// every frame with a syscall of its own; when more frames of the same
// connection are already queued behind the one being written (more
// reports it), the frame is held back instead and leaves with the next one
// in a single write. On a busy room this turns one syscall per frame into
// one per burst, the biggest CPU cost of relaying. Nothing is delayed: a
// frame is held only while another is known to follow, and Close sends
// what is held.
type coalescingConn struct {
	net.Conn
	more func() bool
	// keepOpen, when set, is asked on Close, after the held frames were
	// written, whether the socket must stay open (a closing handshake is
	// under way; see conn.keepOpenOnClose).
	keepOpen func() bool

	// raw, when set, lets writeNow write to the socket without blocking
	// (nil: the socket has no file descriptor, e.g. TLS in the process).
	// rawStep is writeStep, bound once (a closure per write would be an
	// allocation); rawBuf, rawN and rawErr are its write, under mu.
	raw     syscall.RawConn
	rawStep func(fd uintptr) bool
	rawBuf  []byte
	rawN    int
	rawErr  syscall.Errno
	// restWait bounds the write of rest (Config.WriteWait); restQueued
	// is called with rest's size when it is kept, restSent once it left
	// (or failed).
	restWait   time.Duration
	restQueued func(n int)
	restSent   func(n int)

	mu       sync.Mutex // gorilla serializes writes; Close comes from elsewhere
	buf      *[]byte    // held frames, from coalescePool; nil when none
	rest     []byte     // the end of a writeNow the socket did not take yet
	frames   frameScan  // what gorilla wrote: is a frame unfinished, was a close sent
	framing  bool       // the HTTP handshake is written: every byte now is a frame's
	deadline time.Time  // the last deadline gorilla asked for
	applied  time.Time  // the deadline set on the socket
}

func (c *coalescingConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushRestLocked(); err != nil {
		return 0, err
	}
	if c.framing {
		c.frames.scan(p)
	}
	held := 0
	if c.buf != nil {
		held = len(*c.buf)
	}
	if held+len(p) <= maxCoalesce && c.more() {
		if c.buf == nil {
			c.buf = coalescePool.Get().(*[]byte)
		}
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	if held == 0 {
		if err := c.applyDeadline(); err != nil {
			return 0, err
		}
		return c.Conn.Write(p)
	}
	if held+len(p) <= maxCoalesce {
		*c.buf = append(*c.buf, p...)
		_, err := c.flushLocked()
		if err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if _, err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// flushLocked writes the held frames and returns the buffer to the pool.
func (c *coalescingConn) flushLocked() (int, error) {
	if c.buf == nil {
		return 0, nil
	}
	if err := c.applyDeadline(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	if cap(*c.buf) <= maxCoalesce {
		coalescePool.Put(c.buf)
	}
	c.buf = nil
	return n, err
}

func (c *coalescingConn) applyDeadline() error {
	if c.deadline.Equal(c.applied) {
		return nil
	}
	c.applied = c.deadline
	return c.Conn.SetWriteDeadline(c.deadline)
}

// Close sends the held frames (a close frame may be among them), then
// closes the socket unless keepOpen says a closing handshake needs it.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	if c.flushRestLocked() == nil {
		_, _ = c.flushLocked()
	}
	c.mu.Unlock()
	if c.keepOpen != nil && c.keepOpen() {
		return nil
	}
	return c.Conn.Close()
}

// Writing now. A relayed update used to be handed to the connection's
// write goroutine, woken once per connection for every batch a room
// relays; on a busy server those wake-ups (and the threads the scheduler
// starts to run them) cost more CPU than the writes. When nothing is
// queued for a connection, the room's worker now writes the frames itself,
// without blocking: a socket with room in its send buffer takes them at
// once. What it does not take (a slow reader) is kept in rest, counted as
// one queued frame, and written by a goroutine of its own within restWait,
// before anything else is written; what is sent meanwhile waits in the
// queue as ever, so a client that does not read is still closed as slow.

// handshakeDone is called once the handshake's HTTP response is written:
// what is written from now on is WebSocket frames, which frameScan follows.
func (c *coalescingConn) handshakeDone() {
	c.mu.Lock()
	c.framing = true
	c.mu.Unlock()
}

// errNotNow: writeNow cannot write; the caller queues the frames.
var errNotNow = errors.New("ysync: frames must be queued")

// writeNow writes msgs, as binary frames, straight to the socket unless
// idle reports that frames are queued or being written (gorilla may write
// one message in several calls, and nothing may come between them); then,
// or when the socket is closed or busy, it returns errNotNow. idle is
// checked under the write lock, so no frame of the queue starts meanwhile.
func (c *coalescingConn) writeNow(msgs [][]byte, idle func() bool, bg *sync.WaitGroup) error {
	if c.raw == nil {
		return errNotNow
	}
	size := 0
	for _, m := range msgs {
		size += len(m) + maxFrameHeader
	}
	if size > maxCoalesce {
		return errNotNow
	}
	// Never wait for the lock: its holder may be blocked on a slow
	// socket, and the caller must not block (Server.onEvent).
	if !c.mu.TryLock() {
		return errNotNow
	}
	defer c.mu.Unlock()
	if !c.framing || c.buf != nil || c.rest != nil || !c.frames.between() || !idle() {
		return errNotNow
	}
	bp := coalescePool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxCoalesce {
			*bp = (*bp)[:0]
			coalescePool.Put(bp)
		}
	}()
	b := *bp
	for _, m := range msgs {
		b = appendBinaryFrame(b, m)
	}
	*bp = b
	n, err := c.writeNonBlocking(b)
	switch {
	case err != nil:
		return errNotNow // closed: the queue's write reports it
	case n == len(b):
		return nil
	}
	c.rest = append([]byte(nil), b[n:]...)
	if c.restQueued != nil {
		c.restQueued(len(c.rest))
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		_ = c.flushRestLocked()
	}()
	return nil
}

// writeNonBlocking makes one write syscall (repeated if interrupted) and
// returns how much of b the socket took; a full send buffer takes nothing.
// c.mu is held.
func (c *coalescingConn) writeNonBlocking(b []byte) (int, error) {
	if c.rawStep == nil {
		c.rawStep = c.writeStep
	}
	c.rawBuf, c.rawN, c.rawErr = b, 0, 0
	err := c.raw.Write(c.rawStep)
	c.rawBuf = nil
	if err != nil {
		return 0, err
	}
	if c.rawErr != 0 {
		// The peer is gone (EPIPE, ECONNRESET): the read side sees it too
		// and ends the connection; the frames are lost with it.
		return len(b), nil
	}
	return c.rawN, nil
}

// writeStep makes writeNonBlocking's write; it never waits for the poller.
func (c *coalescingConn) writeStep(fd uintptr) bool {
	for {
		n, e := rawnet.WriteFD(fd, c.rawBuf)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
		case 0:
			c.rawN = n
		default:
			c.rawErr = e
		}
		return true
	}
}

// flushRestLocked writes rest, waiting up to restWait, and reports its
// size to restSent.
func (c *coalescingConn) flushRestLocked() error {
	if c.rest == nil {
		return nil
	}
	rest := c.rest
	c.rest = nil
	c.applied = time.Now().Add(c.restWait)
	err := c.Conn.SetWriteDeadline(c.applied)
	if err == nil {
		_, err = c.Conn.Write(rest)
	}
	if c.restSent != nil {
		c.restSent(len(rest))
	}
	if err != nil {
		_ = c.Conn.Close() // a frame was cut: nothing more may follow it
	}
	return err
}

// maxFrameHeader is the longest header of a server frame (no mask).
const maxFrameHeader = 10

// appendBinaryFrame appends msg as one final, unmasked binary frame.
func appendBinaryFrame(b, msg []byte) []byte {
	const finBinary = 0x82
	switch n := len(msg); {
	case n < 126:
		b = append(b, finBinary, byte(n))
	case n <= 0xffff:
		b = append(b, finBinary, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, finBinary, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, msg...)
}

// frameScan follows the frames gorilla writes, so that writeNow starts a
// frame only between two of them and never after a close frame. Gorilla
// writes control frames (its own pongs, and the close frame it answers a
// client's close or a frame over the read limit with) from the read side,
// outside the queue that idle sees.
type frameScan struct {
	frames    frameCursor
	closeSent bool
}

// between reports whether the next byte written starts a new frame, and
// no close frame was written.
func (f *frameScan) between() bool { return f.frames.between() && !f.closeSent }

func (f *frameScan) scan(p []byte) {
	for len(p) > 0 {
		var h []byte
		p, _, h = f.frames.advance(p)
		if h != nil && h[0]&0x0f == 0x8 {
			f.closeSent = true
		}
	}
}
