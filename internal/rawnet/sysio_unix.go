//go:build unix && !linux

package rawnet

import "syscall"

// Supported reports whether ReadFD and WriteFD work here.
const Supported = true

// ReadFD and WriteFD: see sysio_linux.go. Elsewhere they are the system's
// own calls (on macOS, through libSystem).
func ReadFD(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

// WriteFD: see ReadFD.
func WriteFD(fd uintptr, p []byte) (int, syscall.Errno) {
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
