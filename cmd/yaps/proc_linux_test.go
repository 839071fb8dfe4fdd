package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The process CPU-time clock counts what the process burns, agrees with
// /proc's ticks, and refuses pids it cannot name.
func TestProcessCPUClock(t *testing.T) {
	pid := os.Getpid()
	c0, err := processCPUClock(pid)
	require.NoError(t, err)
	spins := 0
	for start := time.Now(); time.Since(start) < 60*time.Millisecond; {
		spins++
	}
	require.Positive(t, spins)
	c1, err := processCPUClock(pid)
	require.NoError(t, err)
	require.GreaterOrEqual(t, c1-c0, 40*time.Millisecond, "60 ms of spinning")

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
