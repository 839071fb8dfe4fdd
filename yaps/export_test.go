package yaps

import "context"

// WriteAheads reports how many writes of s took the write-ahead path.
func WriteAheads(s *Service) int64 { return s.writeAheads.Load() }

// PreparedWrites reports how many of them a yaps.PreparedWriter applied.
func PreparedWrites(s *Service) int64 { return s.prepared.Load() }

// DocLoads reports how many times s read a list document from its store.
func DocLoads(s *Service) int64 { return s.loads.Load() }

// PurgeBatch is how many deleted yaps Purge asks the store for at a time.
const PurgeBatch = purgeBatch

// HoldDoc takes ref's document lock, as a long write would, until the
// returned function is called.
func HoldDoc(s *Service, ref string) (release func()) {
	e := s.docs.acquire(ref)
	return func() { s.docs.release(e) }
}

// Poll runs one tick of the poller.
func Poll(s *Service, ctx context.Context) { s.poll(ctx) }
