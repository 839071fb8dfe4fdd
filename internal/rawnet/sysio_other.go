//go:build !unix

package rawnet

import "syscall"

// Supported reports whether ReadFD and WriteFD work here: not on systems
// other than Unix, where every read and write goes through the connection.
const Supported = false

// ReadFD and WriteFD are not supported here.
func ReadFD(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }

// WriteFD: see ReadFD.
func WriteFD(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }
