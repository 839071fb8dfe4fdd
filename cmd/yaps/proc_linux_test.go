package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The process CPU-time clock counts what the process burns (as getrusage
// does), agrees with /proc's ticks, and refuses pids it cannot name.
func TestProcessCPUClock(t *testing.T) {
	pid := os.Getpid()
	rusage := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, err := processCPUClock(pid)
	require.NoError(t, err)
	r0 := rusage()
	// Burn 50 ms of CPU, however long that takes on a busy machine.
	for deadline := time.Now().Add(10 * time.Second); rusage()-r0 < 50*time.Millisecond; {
		require.True(t, time.Now().Before(deadline), "no 50 ms of CPU in 10 s")
	}
	r1 := rusage()
	c1, err := processCPUClock(pid)
	require.NoError(t, err)
	require.GreaterOrEqual(t, c1-c0, 50*time.Millisecond)
	require.InDelta(t, float64(r1-r0), float64(c1-c0), float64(20*time.Millisecond),
		"the clock and getrusage disagree")

	d, res, err := procCPURes(pid)
	require.NoError(t, err)
	require.Equal(t, time.Nanosecond, res)
	b, err := os.ReadFile("/proc/self/stat")
	require.NoError(t, err)
	ticks, err := parseProcStat(b)
	require.NoError(t, err)
	require.InDelta(t, float64(ticksToDuration(ticks)), float64(d), float64(30*time.Millisecond),
		"the clock and /proc/PID/stat disagree")

	for _, bad := range []int{0, -1, 1 << 28, 1 << 30} {
		_, err := processCPUClock(bad)
		require.Error(t, err, "pid %d", bad)
	}
}
