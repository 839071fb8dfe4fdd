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

// ViewMatchesDoc reports, for ref's loaded document, the yaps where the
// service's view (what it projected into the store) differs from reading
// the document afresh.
func ViewMatchesDoc(s *Service, ref string) (diffs []string) {
	_ = s.withDoc(context.Background(), ref, func(e *docEntry) error {
		fresh, _ := projectDoc(ref, e.doc)
		for id, y := range fresh {
			if v := e.view[id]; !sameYap(v, y) {
				diffs = append(diffs, id)
			}
		}
		for id := range e.view {
			if fresh[id] == nil {
				diffs = append(diffs, id)
			}
		}
		return nil
	})
	return diffs
}
