package ysync

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/yaps-dev/yaps/internal/rawnet"
)

// Unfinished messages.
//
// Gorilla reads a message into one buffer until its last frame arrives,
// and Melody pushes the read deadline back at every pong. A client that
// starts a message (a 1 MiB frame, or the first fragments of one) and never
// finishes it, while answering pings, would hold that buffer for as long as
// it likes, and as many of them as it may open connections. So the bytes
// gorilla reads are watched on their way in (readWatch parses the frame
// headers, nothing more):
//   - a message must be finished within MessageReadTimeout of its first
//     byte: while one is unfinished, the socket's read deadline is the
//     earlier of that and the one Melody asked for;
//   - the bytes of unfinished messages are counted per client address,
//     across its connections, in steps of unfinishedStep; a connection
//     whose message would take its address past MaxUnfinishedBytesPerIP
//     is cut.
// Either way the read fails, Melody's read loop ends and the socket is
// closed (the client sees 1006 and may reconnect); the buffer is freed.
// A message read within one Read call, which is nearly every message,
// touches neither the deadline nor the count.

// unfinishedStep is the unit in which a connection takes bytes from its
// address's budget, so messages under it never take the lock.
const unfinishedStep = 64 << 10

var (
	errMessageTooSlow  = errors.New("ysync: message not finished within MessageReadTimeout")
	errUnfinishedBytes = errors.New("ysync: unfinished messages over MaxUnfinishedBytesPerIP")
)

// unfinishedBudget counts the bytes each client address has in unfinished
// messages.
type unfinishedBudget struct {
	limit int64
	mu    sync.Mutex
	held  map[string]int64
}

func (b *unfinishedBudget) take(key string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[key]+n > b.limit {
		return false
	}
	b.held[key] += n
	return true
}

// forceTake counts n more bytes for key, over the limit if need be (bytes
// already held elsewhere that move under the budget).
func (b *unfinishedBudget) forceTake(key string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[key] += n
}

func (b *unfinishedBudget) give(key string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[key] -= n; b.held[key] <= 0 {
		delete(b.held, key)
	}
}

// readWatch is the read side of a connection's socket. Read and
// SetReadDeadline are called only by Melody's read loop (the pong handler
// runs on it too), and done by onDisconnect once that loop has ended, so
// nothing here needs a lock.
type readWatch struct {
	net.Conn
	timeout time.Duration
	budget  *unfinishedBudget
	key     string

	// raw, when set, reads the plain socket with raw system calls (nil: a
	// wrapper such as TLS, read through Conn).
	raw *rawnet.Reader

	frames    frameCursor
	dataFrame bool   // the frame being read is a data frame
	final     bool   // ... with FIN set
	open      bool   // a data message is unfinished
	ended     uint64 // data messages finished so far
	body      int64  // payload bytes read of the unfinished message

	// started is when the unfinished message was first seen; while it is
	// set, the socket's deadline is the message's (deadline).
	started  time.Time
	reserved int64     // taken from the budget
	asked    time.Time // the read deadline Melody last asked for
	failed   error
}

func (w *readWatch) SetReadDeadline(t time.Time) error {
	w.asked = t
	if !w.started.IsZero() {
		return w.Conn.SetReadDeadline(w.deadline())
	}
	return w.Conn.SetReadDeadline(t)
}

// deadline is the earlier of Melody's and the unfinished message's.
func (w *readWatch) deadline() time.Time {
	d := w.started.Add(w.timeout)
	if !w.asked.IsZero() && w.asked.Before(d) {
		return w.asked
	}
	return d
}

func (w *readWatch) Read(p []byte) (int, error) {
	if w.failed != nil {
		return 0, w.failed
	}
	n, err := w.readSocket(p)
	ended := w.ended
	w.scan(p[:n])
	if w.ended != ended && !w.started.IsZero() {
		// The message being watched is finished.
		w.started = time.Time{}
		w.done()
		if !w.open {
			if derr := w.Conn.SetReadDeadline(w.asked); derr != nil && err == nil {
				err = derr
			}
		}
	}
	if w.open {
		first := w.started.IsZero()
		if first {
			w.started = time.Now()
		}
		if need := w.body - w.reserved; need > 0 {
			step := (need + unfinishedStep - 1) / unfinishedStep * unfinishedStep
			if !w.budget.take(w.key, step) {
				w.failed = errUnfinishedBytes
				return 0, w.failed
			}
			w.reserved += step
		}
		if first {
			if derr := w.Conn.SetReadDeadline(w.deadline()); derr != nil && err == nil {
				err = derr
			}
		}
	}
	if err != nil && !w.started.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(w.started.Add(w.timeout)) {
		w.failed = errMessageTooSlow
		return n, w.failed
	}
	return n, err
}

// readSocket reads what the socket holds into p, waiting until it holds
// something (or the read deadline passes, or the socket closes).
func (w *readWatch) readSocket(p []byte) (int, error) {
	if w.raw == nil {
		return w.Conn.Read(p)
	}
	return w.raw.Read(p)
}

// done gives back what the connection took from its address's budget.
func (w *readWatch) done() {
	w.budget.give(w.key, w.reserved)
	w.reserved = 0
}

// scan follows the frames in b: it tracks whether a data message is
// unfinished and how many payload bytes it has so far.
func (w *readWatch) scan(b []byte) {
	for len(b) > 0 {
		var n uint64
		var h []byte
		b, n, h = w.frames.advance(b)
		switch {
		case h != nil:
			w.startFrame(h)
		case n > 0:
			if w.dataFrame && w.open {
				w.body += int64(n)
			}
			if w.frames.remaining == 0 {
				w.endFrame()
			}
		}
	}
}

// startFrame reads the header of the frame that starts.
func (w *readWatch) startFrame(h []byte) {
	op := h[0] & 0x0f
	w.dataFrame = op <= 2 // continuation, text, binary
	w.final = h[0]&0x80 != 0
	if w.dataFrame && !w.open {
		w.open = true
		w.body = 0
	}
	if w.frames.remaining == 0 {
		w.endFrame()
	}
}

func (w *readWatch) endFrame() {
	if w.dataFrame && w.final {
		w.open = false
		w.body = 0
		w.ended++
	}
}

// frameCursor follows a stream of WebSocket frames, reading only their
// headers: the read side of a connection (readWatch) and what gorilla
// writes (frameScan).
type frameCursor struct {
	hdr       [14]byte // the header being collected
	hdrN      int
	remaining uint64 // payload bytes of the current frame still to come
}

// between reports whether the next byte starts a new frame.
func (f *frameCursor) between() bool { return f.hdrN == 0 && f.remaining == 0 }

// advance consumes the start of b: header bytes up to the end of the
// header, or payload bytes of the current frame. It returns the rest of b,
// the payload bytes consumed, and the header once it is whole (nil
// otherwise; valid until the next call). A frame without payload ends with
// its header.
func (f *frameCursor) advance(b []byte) (rest []byte, payload uint64, header []byte) {
	if f.remaining > 0 {
		k := min(uint64(len(b)), f.remaining)
		f.remaining -= k
		return b[k:], k, nil
	}
	// 2 bytes, then the extended length and the mask key the second
	// byte announces.
	need := 2
	if f.hdrN >= 2 {
		need = headerLen(f.hdr[1])
	}
	k := copy(f.hdr[f.hdrN:need], b)
	f.hdrN += k
	b = b[k:]
	if f.hdrN < 2 || f.hdrN < headerLen(f.hdr[1]) {
		return b, 0, nil
	}
	h := f.hdr[:f.hdrN]
	f.hdrN = 0
	switch h[1] & 0x7f {
	case 126:
		f.remaining = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		f.remaining = binary.BigEndian.Uint64(h[2:10])
	default:
		f.remaining = uint64(h[1] & 0x7f)
	}
	return b, 0, h
}

// headerLen is the length of a frame header whose second byte is b1.
func headerLen(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}
