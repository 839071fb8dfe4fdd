//go:build !linux

package main

import (
	"errors"
	"os/exec"
	"time"
)

// processCPUClock is Linux-only (proc_linux.go); procCPU falls back to
// /proc, which other systems lack too.
func processCPUClock(int) (time.Duration, error) {
	return 0, errors.New("cpu clock: not on this system")
}

// dieWithParent: only Linux kills a child when its parent dies; elsewhere
// the bench stops its servers itself.
func dieWithParent(*exec.Cmd) {}
