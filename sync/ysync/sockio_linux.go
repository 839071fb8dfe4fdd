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
// goroutine keeps its P. A system call through syscall.Read or Write hands
// the P over for its duration (entersyscall), and wakes the runtime's
// monitor thread if it was asleep, which then polls every 20 µs for a
// millisecond; a busy sync server makes a few socket calls per update and
// went idle between them often enough that the monitor's wake-ups were a
// quarter of its thread switches (see docs/benchmarks.md, Sync, fifth
// session of 2026-11-29).
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
