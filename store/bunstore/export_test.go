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
	if g.leading {
		g.mu.Unlock()
		t.Fatal("GatePrepared: a batch is running")
	}
	g.leading = true
	g.mu.Unlock()
	wait = func(n int) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			g.mu.Lock()
			got := len(g.queue)
			g.mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GatePrepared: %d writes queued, want %d", got, n)
			}
			runtime.Gosched()
		}
	}
	release = g.handOff
	return wait, release
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
