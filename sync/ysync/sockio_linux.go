//go:build linux

package ysync

import (
	"syscall"
	"unsafe"
)

// rawSockets: whether sockRead and sockWrite work here.
const rawSockets = true

// sockRead and sockWrite are read(2) and write(2) on a non-blocking socket,
// made without telling the scheduler (RawSyscall): they never block, so the
// goroutine may keep its P. A system call through syscall.Read or Write
// marks the P as in a system call for its duration (entersyscall and
// exitsyscall) and may wake the runtime's monitor thread; a sync server
// makes about three such calls per relayed update.
func sockRead(fd uintptr, p []byte) (int, syscall.Errno) { return sockIO(syscall.SYS_READ, fd, p) }

func sockWrite(fd uintptr, p []byte) (int, syscall.Errno) { return sockIO(syscall.SYS_WRITE, fd, p) }

// sockIO makes the read or write (trap) of p on fd.
func sockIO(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	if len(p) == 0 {
		return 0, 0
	}
	n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
