package rawnet

import (
	"io"
	"os"
	"syscall"
)

// Reader reads a non-blocking socket through its syscall.RawConn, with
// ReadFD, so Go's poller does the waiting and keeps the read deadline. It
// is for one reader at a time.
type Reader struct {
	raw syscall.RawConn
	// step is readStep, bound once (a closure per Read would be an
	// allocation); buf, n and err are the Read under way.
	step func(fd uintptr) bool
	buf  []byte
	n    int
	err  syscall.Errno
}

// NewReader returns a Reader of the socket raw belongs to.
func NewReader(raw syscall.RawConn) *Reader {
	r := &Reader{raw: raw}
	r.step = r.readStep
	return r
}

// Read reads what the socket holds into p, waiting until it holds
// something. Its errors are the poller's (a closed socket, a passed
// deadline), the system call's as an *os.SyscallError, and io.EOF once the
// peer closed.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.buf, r.n, r.err = p, 0, 0
	err := r.raw.Read(r.step) // waits for the poller while readStep reports false
	r.buf = nil
	switch {
	case err != nil:
		return 0, err
	case r.err != 0:
		return 0, os.NewSyscallError("read", r.err)
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// readStep reads once into buf; false: nothing to read yet, wait.
func (r *Reader) readStep(fd uintptr) bool {
	for {
		n, e := ReadFD(fd, r.buf)
		switch e {
		case 0:
			r.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.err = e
		return true
	}
}
