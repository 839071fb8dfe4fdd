package bunstore

import (
	"context"
	"runtime"
	"slices"
	"sync"
)

// batchQueue is the leader-follower queue of SQLite's group commit
// (group.go; prepared writes on Postgres have a batcher, prepgroup.go). A
// request that finds no batch running leads one; requests that arrive meanwhile
// wait. The leader takes its batch from the waiting ones, runs it, records
// every outcome, then hands the lead to the oldest request still waiting
// and wakes the others of its batch. Every request is taken off the queue
// exactly once: into a leader's batch, or as the next leader.
type batchQueue[R queued] struct {
	mu      sync.Mutex
	queue   []R
	leading bool // a batch is running, or its leader is about to run it
}

// queued is a request of a batchQueue: a pointer type embedding turn.
type queued interface{ turnOf() *turn }

// turn is a request's place in a batchQueue.
type turn struct {
	lead bool          // woken to lead the next batch
	wake chan struct{} // buffered: the leader never blocks on it
}

func newTurn() turn { return turn{wake: make(chan struct{}, 1)} }

func (t *turn) turnOf() *turn { return t }

// enter reports whether r leads a batch: at once when none runs, else once
// woken to lead the next. It returns false when r's batch is done and its
// outcome recorded. If ctx ends while r still waits in the queue, r leaves
// it and enter returns ctx's error: a batch held up (a slow disk, a row
// locked elsewhere) must not keep every writer behind it past its
// deadline. Once taken into a batch, r stays to its end.
func (q *batchQueue[R]) enter(ctx context.Context, r R) (lead bool, err error) {
	q.mu.Lock()
	if !q.leading {
		q.leading = true
		q.mu.Unlock()
		return true, nil
	}
	q.queue = append(q.queue, r)
	q.mu.Unlock()
	t := r.turnOf()
	select {
	case <-t.wake:
		return t.lead, nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	i := slices.IndexFunc(q.queue, func(o R) bool { return o.turnOf() == t })
	if i >= 0 {
		q.queue = slices.Delete(q.queue, i, i+1)
	}
	q.mu.Unlock()
	if i >= 0 {
		return false, ctx.Err()
	}
	<-t.wake // taken meanwhile: into a batch, or to lead one
	return t.lead, nil
}

// take returns the leader's batch, which pick removes from the queue. It
// first lets writers that are about to queue (runnable, just not scheduled
// yet) join: one commit for more writes, and fewer writes waiting a whole
// batch behind it.
func (q *batchQueue[R]) take(pick func(queue *[]R) []R) []R {
	runtime.Gosched()
	q.mu.Lock()
	defer q.mu.Unlock()
	return pick(&q.queue)
}

// done ends the leader's batch: the lead passes on, and the batch's other
// requests, whose outcomes are recorded, return.
func (q *batchQueue[R]) done(batch []R, leader R) {
	q.handOff()
	for _, b := range batch {
		if t := b.turnOf(); t != leader.turnOf() {
			t.wake <- struct{}{}
		}
	}
}

// handOff wakes the oldest waiting request to lead the next batch, or
// records that no batch runs.
func (q *batchQueue[R]) handOff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		q.leading = false
		return
	}
	next := q.queue[0].turnOf()
	q.queue = q.queue[1:]
	next.lead = true
	next.wake <- struct{}{}
}
