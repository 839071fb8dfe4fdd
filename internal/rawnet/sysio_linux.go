//go:build linux

package rawnet

import (
	"syscall"
	"unsafe"
)

// Supported reports whether ReadFD and WriteFD work here.
const Supported = true

// ReadFD and WriteFD are one read(2) or write(2) of p on the non-blocking
// socket fd, made without telling the scheduler (RawSyscall): they never
// block, so the goroutine may keep its P. They return what the system
// returned, EAGAIN and EINTR included; call them from a syscall.RawConn's
// Read or Write, which waits for the socket when they report EAGAIN.
func ReadFD(fd uintptr, p []byte) (int, syscall.Errno) { return sysIO(syscall.SYS_READ, fd, p) }

// WriteFD: see ReadFD.
func WriteFD(fd uintptr, p []byte) (int, syscall.Errno) { return sysIO(syscall.SYS_WRITE, fd, p) }

func sysIO(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	if len(p) == 0 {
		return 0, 0
	}
	n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
