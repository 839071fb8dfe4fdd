//go:build !linux

package rawnet

import "net"

// Wrap returns c: raw system calls are made on Linux only.
func Wrap(c net.Conn) net.Conn { return c }

// Plain returns c.
func Plain(c net.Conn) net.Conn { return c }
