package yaps_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// compactCounter is a store that counts what compaction writes.
type compactCounter struct {
	yaps.Store
	compactions, stateBytes atomic.Int64
}

func (c *compactCounter) CompactDoc(ctx context.Context, ref string, seq int64, state []byte) error {
	c.compactions.Add(1)
	c.stateBytes.Add(int64(len(state)))
	return c.Store.CompactDoc(ctx, ref, seq, state)
}

// TestCompactionOfAGrowingList writes 20,000 yaps to one list and checks
// that compaction wrote a few times the final state, not a multiple that
// grows with the list: with a fixed bound on the log's length (3,200
// updates) a list this long was compacted every 3,200 writes, each time
// rewriting its whole state.
func TestCompactionOfAGrowingList(t *testing.T) {
	t.Parallel()
	st := &compactCounter{Store: memstore.New()}
	e := newEnvOn(t, st)
	owner := e.list()
	const n = 20000
	for i := range n {
		_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task(fmt.Sprintf("task %d", i)), "", nil)
		require.NoError(t, err)
	}
	// Compact once more, in the foreground, for the whole state to compare
	// with. That last state (written now or by a background compaction
	// that covered every update) is not counted.
	require.NoError(t, e.svc.CompactNow(e.ctx, owner.List.Ref))
	require.NoError(t, e.svc.Close()) // waits for background compactions
	l, err := st.Doc(e.ctx, owner.List.Ref, 0)
	require.NoError(t, err)
	require.Empty(t, l.Updates)
	whole := len(l.State)
	require.Positive(t, whole)
	before, beforeBytes := st.compactions.Load()-1, st.stateBytes.Load()-int64(whole)
	ratio := float64(beforeBytes) / float64(whole)
	t.Logf("%d yaps: %d compactions wrote %d bytes of state, %.2f× the whole state (%d bytes)",
		n, before, beforeBytes, ratio, whole)
	// Each compaction waits for a log as large as the state, so the
	// states it writes grow geometrically and add up to less than twice
	// the last one (with a fixed bound of 3,200 updates: 3.45×, growing
	// with the list).
	require.Less(t, ratio, 2.5)
}

// gatedCompactions is a store whose CompactDoc waits for release, and
// which records how many ran at once.
type gatedCompactions struct {
	yaps.Store
	release        chan struct{}
	inFlight, most atomic.Int64
	done           atomic.Int64
}

func (g *gatedCompactions) CompactDoc(ctx context.Context, ref string, seq int64, state []byte) error {
	n := g.inFlight.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	defer g.inFlight.Add(-1)
	defer g.done.Add(1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.CompactDoc(ctx, ref, seq, state)
}

// TestCompactionsBounded: however many lists fall due at once, at most two
// background compactions run (each holds an encoded copy of a state); the
// others wait their turn and all are done in the end.
func TestCompactionsBounded(t *testing.T) {
	t.Parallel()
	st := &gatedCompactions{Store: memstore.New(), release: make(chan struct{})}
	e := newEnvOn(t, st, func(c *yaps.Config) { c.CompactAfter = 1 })
	const lists = 6
	for range lists {
		owner := e.list()
		t.Cleanup(e.svc.Pin(owner.List.Ref))
		for range 3 {
			_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("x"), "", nil)
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool { return st.inFlight.Load() == 2 }, 10*time.Second, time.Millisecond)
	time.Sleep(200 * time.Millisecond) // room for a third, were there no bound
	require.EqualValues(t, 2, st.most.Load())
	close(st.release)
	require.Eventually(t, func() bool { return st.done.Load() >= lists }, 10*time.Second, time.Millisecond)
	require.EqualValues(t, 2, st.most.Load())
}

// TestCompactNowWaitsForBackground: CompactNow while a background
// compaction writes an older state waits for it, then compacts the rest:
// it leaves no update behind (it used to return at once, doing nothing).
func TestCompactNowWaitsForBackground(t *testing.T) {
	t.Parallel()
	st := &gatedCompactions{Store: memstore.New(), release: make(chan struct{})}
	e := newEnvOn(t, st, func(c *yaps.Config) { c.CompactAfter = 1 })
	owner := e.list()
	ref := owner.List.Ref
	t.Cleanup(e.svc.Pin(ref))
	for range 3 {
		_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("x"), "", nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return st.inFlight.Load() == 1 }, 10*time.Second, time.Millisecond)
	for range 2 { // after the state the background compaction writes
		_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("y"), "", nil)
		require.NoError(t, err)
	}
	done := make(chan error, 1)
	go func() { done <- e.svc.CompactNow(e.ctx, ref) }()
	time.Sleep(50 * time.Millisecond)
	close(st.release)
	require.NoError(t, <-done)
	l, err := st.Doc(e.ctx, ref, 0)
	require.NoError(t, err)
	require.Empty(t, l.Updates)
}
