package ysync

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A room worker's batches share one context until half of OpTimeout is
// spent; each batch's context has at least half of it left, and the last
// one is cancelled when the worker ends.
func TestApplyOpContext(t *testing.T) {
	t.Parallel()
	parent, stop := context.WithCancel(context.Background())
	defer stop()
	const timeout = time.Hour
	var sc applyScratch
	start := time.Now()

	first := sc.opContext(parent, timeout, start)
	deadline, ok := first.Deadline()
	require.True(t, ok)
	require.WithinDuration(t, start.Add(timeout), deadline, time.Minute)

	// Within the first half: the same context.
	require.Same(t, first, sc.opContext(parent, timeout, start.Add(timeout/2-time.Second)))
	require.NoError(t, first.Err())

	// From half on: a new one, with the whole timeout, and the old one ended.
	later := start.Add(timeout / 2)
	second := sc.opContext(parent, timeout, later)
	require.NotSame(t, first, second)
	require.ErrorIs(t, first.Err(), context.Canceled)
	deadline, _ = second.Deadline()
	require.GreaterOrEqual(t, deadline.Sub(later), timeout/2, "a batch got less than half the timeout")

	sc.release()
	require.ErrorIs(t, second.Err(), context.Canceled)
	sc.release() // twice is fine

	// The server's context still ends every batch's.
	third := sc.opContext(parent, timeout, time.Now())
	stop()
	require.ErrorIs(t, third.Err(), context.Canceled)
	sc.release()
}
