package bunstore

import (
	"context"
	"errors"
	"slices"
)

// Group commit (SQLite files). SQLite has one writer per database, and a
// small write's cost is dominated by its COMMIT: the WAL frames of every
// page it dirtied, most of which (the lists table, the rightmost pages of
// the log) the next write dirties again. So writers queue, and whoever
// finds no batch running leads one: it runs every queued write in one
// transaction, each inside its own SAVEPOINT, and commits once. A write
// whose fn fails is rolled back to its savepoint and gets its error; the
// others are unaffected. Nothing returns before the COMMIT that holds it:
// a write is acknowledged (and its effects emitted by the caller) only
// once durable, exactly as with a transaction of its own. A failed COMMIT
// fails every write of the batch.
//
// The leader runs the others' fn on its goroutine while their callers wait
// (holding whatever locks they took, e.g. the service's list lock). A
// panic in fn is re-raised in its own caller's goroutine.
//
// A savepoint is not free: SQLite copies every page a write changes first
// into the savepoint's journal, so that it can roll the write back alone.
// Writes the service prepared ahead (UpdateReplayable) can run again from
// the start with the same effect, and nearly always succeed; a batch made
// only of such writes therefore runs without savepoints (the create-yap
// benchmark: 6-7% more requests per second, 4-9% less CPU per request). One
// that fails before it wrote anything (a stale list row, a revoked code)
// leaves nothing to undo. One that fails after writing rolls the whole
// batch back, and the batch runs again, each write in its savepoint.

// writeReq is one write transaction waiting for the writer.
type writeReq struct {
	turn
	ctx        context.Context
	fn         func(*wtx) error
	replayable bool // fn may run again from the start (see above)
	err        error
	panicked   bool
	panicVal   any
}

// maxBatch bounds one batch, so a steady stream of writers cannot keep one
// leader (and its caller) busy indefinitely.
const maxBatch = 64

var errAborted = errors.New("bunstore: the write batch was rolled back")

func (r *writeReq) result() error {
	if r.panicked {
		panic(r.panicVal)
	}
	return r.err
}

// groupWrite runs fn as part of a batch (see above) and returns once the
// batch committed or rolled back.
func (s *Store) groupWrite(ctx context.Context, fn func(*wtx) error, replayable bool) error {
	r := &writeReq{turn: newTurn(), ctx: ctx, fn: fn, replayable: replayable}
	g := &s.group
	if lead, err := g.enter(ctx, r); err != nil {
		return err
	} else if !lead {
		return r.result()
	}
	batch := g.take(func(queue *[]*writeReq) []*writeReq {
		n := min(len(*queue), maxBatch-1)
		batch := append([]*writeReq{r}, (*queue)[:n]...)
		*queue = slices.Delete(*queue, 0, n)
		return batch
	})

	finished := false
	defer func() {
		if !finished {
			// runtime.Goexit inside fn (a failing test): the batch was
			// rolled back by runBatch's deferred function.
			for _, b := range batch {
				if b.err == nil && !b.panicked {
					b.err = errAborted
				}
			}
		}
		g.done(batch, r)
	}()
	s.runBatch(batch)
	finished = true
	return r.result()
}

// runBatch runs the writes of batch in one transaction and records each
// one's outcome. It does not panic.
func (s *Store) runBatch(batch []*writeReq) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	live := slices.DeleteFunc(slices.Clone(batch), (*writeReq).cancelled)
	if len(live) == 0 {
		return
	}
	guarded := len(live) > 1 && slices.ContainsFunc(live, func(r *writeReq) bool { return !r.replayable })
	if !s.tryBatch(live, guarded) {
		for _, r := range live {
			r.err, r.panicked, r.panicVal = nil, false, nil
		}
		s.tryBatch(live, true)
	}
}

// tryBatch runs live in one transaction, each write in a savepoint of its
// own when guarded, and records each one's outcome. Unguarded, it reports
// false, having rolled everything back, when a write failed after it wrote
// something: the batch must run again, guarded.
func (s *Store) tryBatch(live []*writeReq, guarded bool) (done bool) {
	failAll := func(err error) {
		for _, r := range live {
			if r.err == nil && !r.panicked {
				r.err = err
			}
		}
	}
	w, err := s.writerLocked(noCancel)
	if err != nil {
		failAll(wrap(err, "begin"))
		return true
	}
	if _, err := w.exec(sqlBegin); err != nil {
		// A failed BEGIN leaves no transaction open, but a broken
		// connection is replaced.
		s.dropWriterLocked()
		failAll(wrap(err, "begin"))
		return true
	}
	open := true
	rollback := func() {
		open = false
		w.cache.clear()
		if _, err := w.exec(sqlRollback); err != nil {
			s.dropWriterLocked()
		}
	}
	if err := w.checkVersion(); err != nil {
		rollback()
		failAll(wrap(err, "data version"))
		return true
	}
	defer func() {
		if open { // runtime.Goexit in fn
			rollback()
		}
	}()
	single := len(live) == 1
	savepoints := guarded && !single
	ok := 0
	for i, r := range live {
		if savepoints {
			s.savepoints.Add(1)
			if _, err := w.exec(sqlSavepoint); err != nil {
				rollback()
				failAll(wrap(err, "savepoint"))
				return true
			}
		}
		wrote := s.call(r, w)
		if r.err == nil && !r.panicked {
			ok++
			if savepoints {
				if _, err := w.exec(sqlRelease); err != nil {
					rollback()
					failAll(wrap(err, "release savepoint"))
					return true
				}
			}
			continue
		}
		if single {
			rollback()
			return true
		}
		if !savepoints {
			if !wrote {
				continue // nothing of it to undo
			}
			rollback()
			return false
		}
		// Undo this write only. If SQLite already rolled back the whole
		// transaction (some errors do), everything before fails too. The
		// writer's cache may hold what it read of its own changes.
		w.cache.clear()
		_, err1 := w.exec(sqlRollbackTo)
		var err2 error
		if err1 == nil {
			_, err2 = w.exec(sqlRelease)
		}
		if err1 != nil || err2 != nil {
			rollback()
			for _, p := range live[:i] {
				if p.err == nil && !p.panicked {
					p.err = errAborted
				}
			}
			for _, p := range live[i+1:] {
				p.err = errAborted
			}
			return true
		}
	}
	if ok == 0 {
		rollback()
		return true
	}
	if _, err := w.exec(sqlCommit); err != nil {
		rollback()
		failAll(wrap(err, "commit"))
		return true
	}
	open = false
	s.ckpt.committed()
	return true
}

// call runs r.fn and records its error or panic. It reports whether fn
// ran a statement that writes.
func (s *Store) call(r *writeReq, w *writer) (wrote bool) {
	t := &wtx{w: w}
	done := false
	defer func() {
		wrote = t.wrote
		if !done {
			if p := recover(); p != nil {
				r.panicked, r.panicVal = true, p
			}
		}
	}()
	r.err = r.fn(t)
	done = true
	return
}

// cancelled reports whether r's context is done, which is then its error.
func (r *writeReq) cancelled() bool {
	r.err = r.ctx.Err()
	return r.err != nil
}
