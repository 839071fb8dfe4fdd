package bunstore

import (
	"runtime"
	"testing"
	"time"
)

// GatePrepared holds s's prepared writes in the queue, as if a batch were
// running, until release: they then run as one batch. wait blocks until n
// writes are queued.
func GatePrepared(t *testing.T, s *Store) (wait func(n int), release func()) {
	g := &s.prepGroup
	g.mu.Lock()
	if g.running {
		g.mu.Unlock()
		t.Fatal("gate: a batch is running")
	}
	g.running = true
	g.mu.Unlock()
	wait = func(n int) {
		waitQueued(t, n, func() int {
			g.mu.Lock()
			defer g.mu.Unlock()
			return len(g.queue)
		})
	}
	return wait, func() { go s.runBatches() }
}

// PreparedBatcherRunning reports whether s's batcher runs (prepgroup.go).
func PreparedBatcherRunning(s *Store) bool {
	s.prepGroup.mu.Lock()
	defer s.prepGroup.mu.Unlock()
	return s.prepGroup.running
}

// GateWrites is GatePrepared for the SQLite file's group commit.
func GateWrites(t *testing.T, s *Store) (wait func(n int), release func()) {
	return gateQueue(t, &s.group)
}

// Savepoints reports how many savepoints s's SQLite group commit took.
func Savepoints(s *Store) int64 { return s.savepoints.Load() }

// gateQueue is GatePrepared for a batch queue (the SQLite group's).
func gateQueue[R queued](t *testing.T, q *batchQueue[R]) (wait func(n int), release func()) {
	q.mu.Lock()
	if q.leading {
		q.mu.Unlock()
		t.Fatal("gate: a batch is running")
	}
	q.leading = true
	q.mu.Unlock()
	wait = func(n int) {
		waitQueued(t, n, func() int {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.queue)
		})
	}
	return wait, q.handOff
}

// waitQueued waits until queued reports n writes or more.
func waitQueued(t *testing.T, n int, queued func() int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := queued()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate: %d writes queued, want %d", got, n)
		}
		runtime.Gosched()
	}
}

// PreparedPipelines reports how many pipelines of prepared writes s sent.
func PreparedPipelines(s *Store) int64 { return s.prepGroup.pipelines.Load() }

// MultiRowPipelines reports how many of them took the multi-row form.
func MultiRowPipelines(s *Store) int64 { return s.prepGroup.multiRow.Load() }

// SetCheckpointHooks makes s's checkpointer call afterFirstPass between
// the two passes of each checkpoint and afterCheckpoint after both. s must
// have written once (the checkpointer starts with the writer).
func SetCheckpointHooks(t *testing.T, s *Store, afterFirstPass, afterCheckpoint func()) {
	t.Helper()
	s.writeMu.Lock()
	c := s.ckpt
	s.writeMu.Unlock()
	if c == nil {
		t.Fatal("SetCheckpointHooks: no checkpointer (a SQLite file store that has written)")
	}
	c.afterFirstPass.Store(&afterFirstPass)
	c.afterCheckpoint.Store(&afterCheckpoint)
}

// HintYapStored tells s's SQLite writer that the yap row (ref, id) is
// stored with these times, whether or not it is: a stale hint.
func HintYapStored(t *testing.T, s *Store, ref, id string, created time.Time, deleted *time.Time) {
	t.Helper()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.writer == nil {
		t.Fatal("HintYapStored: no writer (a SQLite file store that has written)")
	}
	s.writer.cache.putYap(ref, id, ms(created), msPtr(deleted))
}
