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
	if g.leaders > 0 {
		g.mu.Unlock()
		t.Fatal("GatePrepared: a batch is running")
	}
	held := maxPrepLeaders
	g.leaders = held
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
	release = func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		// One held slot becomes the leader of what queued; the others
		// were never used.
		g.leaders -= held - 1
		if len(g.queue) == 0 {
			g.leaders--
			return
		}
		next := g.queue[0]
		g.queue = g.queue[1:]
		next.lead = true
		next.wake <- struct{}{}
	}
	return wait, release
}

// PreparedPipelines reports how many pipelines of prepared writes s sent.
func PreparedPipelines(s *Store) int64 { return s.prepGroup.pipelines.Load() }
