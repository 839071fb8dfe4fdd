package ysync

import (
	"net"
	"sync"
	"time"
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

	mu       sync.Mutex // gorilla serializes writes; Close comes from elsewhere
	buf      *[]byte    // held frames, from coalescePool; nil when none
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
	_, _ = c.flushLocked()
	c.mu.Unlock()
	if c.keepOpen != nil && c.keepOpen() {
		return nil
	}
	return c.Conn.Close()
}
