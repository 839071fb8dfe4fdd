package yaps

import (
	"context"
	"errors"
	"time"
)

// background runs the purge, the idempotency prune and compaction at start
// and then every interval (if > 0), and evicts idle documents, until
// Close. The first run is at start, not an interval later: a process
// restarted (or scaled down) more often than hourly would otherwise never
// purge.
func (s *Service) background(interval time.Duration) {
	defer s.wg.Done()
	var purge <-chan time.Time // nil: purge and compaction ticker disabled
	ctx := s.ctx               // cancelled by Close
	if interval > 0 {
		s.housekeep(ctx)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		purge = tick.C
	}
	evict := time.NewTicker(max(min(s.cfg.DocIdleTimeout/2, time.Minute), time.Second))
	defer evict.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-evict.C:
			s.docs.evictIdle()
		case <-purge:
			s.housekeep(ctx)
		}
	}
}

// housekeep runs the purge, the idempotency prune and the compaction of
// every cached document that is due.
func (s *Service) housekeep(ctx context.Context) {
	if n, err := s.Purge(ctx); err != nil {
		if ctx.Err() == nil { // else Close cut it short
			s.log.Error("yaps: purge failed", "err", err, "purged", n)
		}
	} else if n > 0 {
		s.log.Info("yaps: purged deleted yaps", "purged", n)
	}
	if n, err := s.PruneIdempotency(ctx); err != nil {
		if ctx.Err() == nil {
			s.log.Error("yaps: pruning idempotency records failed", "err", err, "pruned", n)
		}
	} else if n > 0 {
		s.log.Debug("yaps: pruned expired idempotency records", "pruned", n)
	}
	for _, ref := range s.docs.refs() {
		// errCompacting: a background compaction is writing it.
		if err := s.compact(ctx, ref, false); err != nil && err != errCompacting && ctx.Err() == nil {
			s.log.Error("yaps: compaction failed", "list", ref, "err", err)
		}
	}
}

// poller refreshes watched documents every interval until Close.
func (s *Service) poller(interval time.Duration) {
	defer s.wg.Done()
	ctx := s.ctx // cancelled by Close
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.poll(ctx)
		}
	}
}

// compactAsync compacts ref's document in the background; compactLater
// started it. Close cancels it (the next process compacts).
func (s *Service) compactAsync(ref string) {
	defer s.wg.Done()
	// At most maxCompactions at once: each holds an encoded copy of its
	// document's state, and many lists can fall due together (a busy
	// moment, a cache that warms up).
	select {
	case s.compactions <- struct{}{}:
		defer func() { <-s.compactions }()
	case <-s.ctx.Done():
		return // closing: the next process compacts
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if err := s.compact(ctx, ref, true); err != nil && err != errCompacting && s.ctx.Err() == nil {
		s.log.Error("yaps: compaction failed", "list", ref, "err", err)
	}
}

// errCompacting: another compaction of the list is writing its state.
var errCompacting = errors.New("yaps: a compaction of the list is running")

// maxCompactions bounds the compactions running at once (compactAsync).
const maxCompactions = 2

// compact replaces the list's update log up to the cached document's seq by
// the document's state, when compaction is due (or always with force and
// at least one update). The state is encoded under the list's lock; the
// store writes it without the lock, so the list's writes go on meanwhile
// (they append after seq, which the compaction leaves alone).
func (s *Service) compact(ctx context.Context, ref string, force bool) error {
	e := s.docs.acquire(ref)
	defer s.docs.release(e)
	done := false
	defer func() {
		e.compacting = false
		// Writes went on while the store wrote: they may make it due again.
		if done && e.doc != nil && s.compactDue(e) {
			s.compactLater(e)
		}
	}()
	if e.compactRunning {
		return errCompacting // it schedules another when due
	}
	if force {
		// Up to date with the store first: loaded again if evicted since
		// compactLater scheduled it (a list evicted after every write, with
		// more open rooms than the cache holds, was otherwise never
		// compacted, its log growing and every load replaying all of it),
		// and caught up with other processes' writes.
		if err := s.fresh(ctx, e); err != nil {
			return err
		}
	}
	if e.doc == nil || e.sinceState == 0 {
		return nil
	}
	if !force && !s.compactDue(e) {
		return nil
	}
	d, seq, n, b := e.doc, e.seq, e.sinceState, e.sinceBytes
	state, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		return err
	}
	// Unlock without releasing: the entry stays in the cache (users > 0).
	e.compactRunning = true
	e.mu.Unlock()
	err = s.cfg.Store.CompactDoc(ctx, ref, seq, state)
	e.mu.Lock()
	e.compactRunning = false
	if err != nil {
		return err
	}
	if e.doc == d { // else a reload counted the log afresh
		e.sinceState -= n
		e.sinceBytes -= b
		e.stateBytes = int64(len(state))
	}
	done = true
	return nil
}

// compactLater starts a background compaction of e's list unless one was
// started already or the service is closing. e.mu is held.
func (s *Service) compactLater(e *docEntry) {
	if e.compacting {
		return
	}
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.ctx.Err() != nil { // closing: the next process compacts
		return
	}
	e.compacting = true
	s.wg.Add(1)
	go s.compactAsync(e.ref)
}

// compactDue reports whether the entry's update log is due for compaction
// (see Config.CompactAfter): more than CompactAfter updates that add up to
// at least compactLogRatio times the state's size, or more updates than
// 16×CompactAfter plus one per 64 bytes of state.
//
// The size condition keeps the cost of compaction, which rewrites the
// whole state, proportional to what was written: a list that has grown
// large is compacted less often instead of costing more per write. The
// count condition bounds what loading the list costs when its updates are
// tiny (typing): replaying one small update costs about what decoding
// 37 bytes of state does (yjs BenchmarkTraceRemoteUpdates against
// BenchmarkTraceDecode), so stateBytes/64 updates replay in about half the
// state's decoding time. A fixed count would rewrite a large state every
// few thousand writes however little they add.
func (s *Service) compactDue(e *docEntry) bool {
	c := int64(s.cfg.CompactAfter)
	return e.sinceState > c && (e.sinceBytes >= compactLogRatio*e.stateBytes || e.sinceState > 16*c+e.stateBytes/64)
}

// compactLogRatio is how many times the state's size the update log grows
// to before a compaction rewrites the state. Each compaction writes the
// state anew, so over a list's life compaction writes about
// (1+compactLogRatio)/compactLogRatio bytes of state per byte of update:
// 2 with a ratio of 1, 1.25 with 4. In the create-yap benchmark on
// Postgres, compaction took a tenth to a seventh of all CPU (the server's
// encoding, Postgres's compression, TOAST and log deletes) with a ratio of
// 1. The price is a longer log to replay when a list is loaded: a list of
// 1,500 yaps took 19-31 ms to load from its state alone, 35-48 with 1,500
// created yaps in its log and 88-102 with 6,000 (docs/decisions.md,
// Storage).
const compactLogRatio = 4

// CompactNow compacts the list's document at once (for tests and tools).
func (s *Service) CompactNow(ctx context.Context, ref string) error {
	// A background compaction may be writing an older state: wait for it,
	// then compact what came after.
	for {
		err := s.compact(ctx, ref, true)
		if err != errCompacting {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// purgeBatch is how many deleted yaps Purge asks the store for at a time,
// beyond those it already knows it cannot purge in this run.
const purgeBatch = 500

// maxPurgeSkipped bounds the yaps one Purge run passes over (their list
// failed, or they could not be purged) before it gives up until the next.
const maxPurgeSkipped = 20_000

// Purge removes the yaps deleted more than DeletedRetention ago (Config.Now
// decides "now"): each is removed from its list document's "yaps" map by a
// document update and its projection is deleted. Each list that lost yaps
// is then compacted, so their content leaves the stored update log and
// state too (a list written rarely would keep it there until its log grew
// enough). It returns how many yaps were purged. The background ticker
// calls it; tests call it directly.
//
// A list that fails (its document does not load, say) is logged and passed
// over, with any yap that could not be purged, until the next run: the
// store hands out the oldest first, so one bad list must not keep every
// other list's yaps past their retention. The first such error is returned
// once the run is over.
func (s *Service) Purge(ctx context.Context) (int, error) {
	total := 0
	skipped := map[YapKey]bool{}
	var firstErr error
	var compact []string // lists that lost yaps, in order
	toCompact := map[string]bool{}
	defer func() {
		for _, ref := range compact {
			if ctx.Err() != nil {
				return // the next process compacts
			}
			if err := s.CompactNow(ctx, ref); err != nil && ctx.Err() == nil {
				s.log.Error("yaps: compacting a list after its purge failed; its log still holds the purged yaps", "list", ref, "err", err)
			}
		}
	}()
	for {
		cut := s.now().Add(-s.cfg.DeletedRetention)
		limit := purgeBatch + len(skipped)
		keys, err := s.cfg.Store.DeletedYapsBefore(ctx, cut, limit)
		if err != nil {
			return total, err
		}
		byList := map[string][]string{}
		var order []string
		for _, k := range keys {
			if skipped[k] {
				continue
			}
			if _, ok := byList[k.ListRef]; !ok {
				order = append(order, k.ListRef)
			}
			byList[k.ListRef] = append(byList[k.ListRef], k.ID)
		}
		for _, ref := range order {
			purged, err := s.purgeList(ctx, ref, byList[ref], cut)
			total += len(purged)
			if len(purged) > 0 && !toCompact[ref] {
				toCompact[ref] = true
				compact = append(compact, ref)
			}
			if err != nil {
				if ctx.Err() != nil {
					return total, err
				}
				s.log.Error("yaps: purging deleted yaps of a list failed; they are kept until the next run", "list", ref, "err", err)
				if firstErr == nil {
					firstErr = err
				}
			}
			gone := make(map[string]bool, len(purged))
			for _, id := range purged {
				gone[id] = true
			}
			for _, id := range byList[ref] {
				if !gone[id] {
					skipped[YapKey{ListRef: ref, ID: id}] = true
				}
			}
		}
		// Every key of this batch was purged or is skipped now, so a full
		// batch means there may be more.
		if len(keys) < limit || len(order) == 0 {
			return total, firstErr
		}
		if len(skipped) > maxPurgeSkipped {
			s.log.Error("yaps: purge passed over too many deleted yaps; it goes on at the next run", "skipped", len(skipped))
			return total, firstErr
		}
	}
}

// purgeList purges the yaps ids of list ref deleted before cut, and
// returns the ids whose projection is gone (purged, or a stray projection
// of a yap no longer in the document).
func (s *Service) purgeList(ctx context.Context, ref string, ids []string, cut time.Time) ([]string, error) {
	var done []string
	err := s.write(ctx, ref, nil, func(w *writeOp) error {
		done = done[:0]
		ym := w.doc.GetMap(rootYaps)
		var gone []string
		for _, id := range ids {
			y := w.e.view[id]
			if y == nil {
				// Not in the document (any more): drop the stray projection.
				if _, inDoc := ym.Get(id); !inDoc {
					if err := w.tx.DeleteYap(id); err != nil && !IsCode(err, ENOTFOUND) {
						return err
					}
					done = append(done, id)
				}
				continue
			}
			if y.DeletedAt == nil || y.DeletedAt.After(cut) {
				continue // restored or re-deleted meanwhile
			}
			gone = append(gone, id)
		}
		if len(gone) == 0 {
			return nil
		}
		w.edit(func() {
			for _, id := range gone {
				ym.Delete(id)
			}
		}, nil)
		for _, id := range gone {
			w.touch(id)
		}
		done = append(done, gone...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}
