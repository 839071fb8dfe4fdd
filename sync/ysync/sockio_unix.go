//go:build unix && !linux

package ysync

import "syscall"

// rawSockets: whether sockRead and sockWrite work here.
const rawSockets = true

// sockRead and sockWrite: see sockio_linux.go. Elsewhere the system's own
// calls (on macOS, through libSystem).
func sockRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sockWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
