//go:build linux

package rawnet

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// conn is a socket whose Read and Write are raw system calls.
type conn struct {
	net.Conn // the socket: *net.TCPConn or *net.UnixConn
	raw      syscall.RawConn

	// A net.Conn may be read and written from several goroutines: rd reads
	// under rmu; writeStep (bound once as wstep: a closure per call would
	// be an allocation) writes wbuf under wmu, into wn and werr.
	rmu sync.Mutex
	rd  *Reader

	wmu   sync.Mutex
	wstep func(fd uintptr) bool
	wbuf  []byte
	wn    int
	werr  syscall.Errno
}

// Wrap returns c reading and writing with raw system calls if c is a TCP
// or Unix socket, else c itself.
func Wrap(c net.Conn) net.Conn {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return c
	}
	w := &conn{Conn: c, raw: raw, rd: NewReader(raw)}
	w.wstep = w.writeStep
	return w
}

// Plain returns the socket under a connection Wrap made, else c.
func Plain(c net.Conn) net.Conn {
	if w, ok := c.(*conn); ok {
		return w.Conn
	}
	return c
}

func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	n, err := c.rd.Read(p)
	c.rmu.Unlock()
	if err != nil && err != io.EOF {
		return 0, c.opError("read", err)
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	c.wbuf, c.wn, c.werr = p, 0, 0
	err := c.raw.Write(c.wstep)
	n, e := c.wn, c.werr
	c.wbuf = nil
	c.wmu.Unlock()
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case e != 0:
		return n, c.opError("write", os.NewSyscallError("write", e))
	}
	return n, nil
}

// writeStep writes what is left of wbuf; false: the socket is full, wait.
func (c *conn) writeStep(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		n, e := WriteFD(fd, c.wbuf[c.wn:])
		switch e {
		case 0:
			c.wn += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}

// opError is err as the socket's own Read or Write reports it: a
// *net.OpError naming the addresses, around the cause (a deadline, a
// closed connection, a system call error).
func (c *conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// CloseWrite shuts the socket's writing side, as *net.TCPConn's does
// (net/http calls it to close a connection gracefully).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn is the socket's.
func (c *conn) SyscallConn() (syscall.RawConn, error) { return c.raw, nil }
