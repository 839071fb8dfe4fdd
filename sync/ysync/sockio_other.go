//go:build !unix

package ysync

import "syscall"

// rawSockets: whether sockRead and sockWrite work here. Elsewhere than
// Unix every read and write goes through the connection itself.
const rawSockets = false

func sockRead(uintptr, []byte) (int, syscall.Errno)  { return 0, syscall.EINVAL }
func sockWrite(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }
