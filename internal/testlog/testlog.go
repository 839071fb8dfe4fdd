// Package testlog holds what the module's tests share to read logs.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a logger and a test to share.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
