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

// writeReq is one write transaction waiting for the writer.
type writeReq struct {
	turn
	ctx      context.Context
	fn       func(*wtx) error
	err      error
	panicked bool
	panicVal any
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
func (s *Store) groupWrite(ctx context.Context, fn func(*wtx) error) error {
	r := &writeReq{turn: newTurn(), ctx: ctx, fn: fn}
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
		return
	}
	if _, err := w.exec(sqlBegin); err != nil {
		// A failed BEGIN leaves no transaction open, but a broken
		// connection is replaced.
		s.dropWriterLocked()
		failAll(wrap(err, "begin"))
		return
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
		return
	}
	defer func() {
		if open { // runtime.Goexit in fn
			rollback()
		}
	}()
	single := len(live) == 1
	ok := 0
	for i, r := range live {
		if !single {
			if _, err := w.exec(sqlSavepoint); err != nil {
				rollback()
				failAll(wrap(err, "savepoint"))
				return
			}
		}
		s.call(r, w)
		if r.err == nil && !r.panicked {
			ok++
			if !single {
				if _, err := w.exec(sqlRelease); err != nil {
					rollback()
					failAll(wrap(err, "release savepoint"))
					return
				}
			}
			continue
		}
		if single {
			rollback()
			return
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
			return
		}
	}
	if ok == 0 {
		rollback()
		return
	}
	if _, err := w.exec(sqlCommit); err != nil {
		rollback()
		failAll(wrap(err, "commit"))
		return
	}
	open = false
	s.ckpt.committed()
}

// call runs r.fn and records its error or panic.
func (s *Store) call(r *writeReq, w *writer) {
	done := false
	defer func() {
		if !done {
			if p := recover(); p != nil {
				r.panicked, r.panicVal = true, p
			}
		}
	}()
	r.err = r.fn(&wtx{w: w})
	done = true
}

// cancelled reports whether r's context is done, which is then its error.
func (r *writeReq) cancelled() bool {
	r.err = r.ctx.Err()
	return r.err != nil
}
