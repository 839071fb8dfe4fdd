package bunstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/yaps-dev/yaps/yaps"
)

// Group commit of prepared writes (Postgres). Writers queue, and a
// goroutine of the store's, the batcher, runs their batches one after the
// other for as long as writers keep coming. A batch is one pgx pipeline:
// every queued write's statements, then one Sync, so one round trip and
// one transaction for all of them. Each write
// keeps its own guard (prepared.go), so a stale write in a batch writes
// nothing and the others are unaffected. If any statement fails, Postgres
// rolls the whole batch back; each write is then retried alone, so it gets
// its own outcome. A batch holds at most one write per list (a second
// write of a list would see the first's row as its own, see guardedBy) and
// locks its list rows in ref order, so two processes' batches cannot
// deadlock each other.

// sqlstateLockNotAvailable is Postgres's error for a lock_timeout.
const sqlstateLockNotAvailable = "55P03"

type prepReq struct {
	ctx     context.Context
	p       *yaps.PreparedWrite
	applied bool
	err     error
	done    chan struct{} // buffered: the batcher never blocks on it
}

type prepGroup struct {
	mu        sync.Mutex
	queue     []*prepReq
	running   bool         // the batcher runs, or is about to
	buf       []byte       // the parameter buffer of the batcher (one runs at a time), pipelineMulti
	wbuf      []byte       // the batcher's write buffer, lent to pgx (lendBuffer)
	pipelines atomic.Int64 // pipelines sent, for tests
	multiRow  atomic.Int64 // of which in the multi-row form (prepmulti.go)
}

// groupPrepared runs p in a batch and returns its outcome. One batch runs
// at a time: in the HTTP benchmark (16 writers, two CPUs) two or four
// concurrent batches cost 20-40% more CPU per write, for smaller batches,
// and no throughput.
//
// Why a goroutine of its own rather than a leader among the writers, as
// SQLite's group commit (batchQueue): between two batches, Postgres waits
// for the client. With a leader, the lead passed from the last batch's
// leader to the next one through the scheduler (its wake-up queued behind
// the writers of the batch just done), and the new leader yielded once
// more to let late writers join: in the create-yap benchmark 128-155 and
// 109-118 µs (means) of every batch's 1.4-1.5 ms, against 11-17 and 2-3
// µs with the batcher, which goes straight on with the writers that
// queued during the batch.
func (s *Store) groupPrepared(ctx context.Context, p *yaps.PreparedWrite) (bool, error) {
	r := &prepReq{ctx: ctx, p: p, done: make(chan struct{}, 1)}
	g := &s.prepGroup
	g.mu.Lock()
	g.queue = append(g.queue, r)
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start {
		go s.runBatches()
	}
	select {
	case <-r.done:
		return r.applied, r.err
	case <-ctx.Done():
	}
	// A write still queued leaves with its context's error (see
	// batchQueue.enter); one taken into a batch stays to its end.
	g.mu.Lock()
	i := slices.Index(g.queue, r)
	if i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
	}
	g.mu.Unlock()
	if i >= 0 {
		return false, ctx.Err()
	}
	<-r.done
	return r.applied, r.err
}

// runBatches is the batcher: it runs batches of the queued writes until
// the queue is empty, and returns each batch's writers their outcomes.
//
// A batch's writers are woken only once the next batch is on its way to
// Postgres (or none is queued): woken first, they took the CPU from the
// batcher while it built and sent the next batch, which Postgres waited
// for (create-yap benchmark: 296-321 µs from taking a batch to its send,
// means of three runs, p90 780-820, against 148-164, p90 170-210; about
// 7% more requests per second). They are answered while Postgres runs
// the next batch, which is the overlap that matters.
func (s *Store) runBatches() {
	g := &s.prepGroup
	var conn *sql.Conn // held from batch to batch (runPreparedBatch)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var done []*prepReq // the last batch, its writers not yet woken
	wake := func() {
		for _, r := range done {
			r.done <- struct{}{}
		}
		done = nil
	}
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running = false
			g.mu.Unlock()
			wake()
			return
		}
		first := g.queue[0]
		g.queue = g.queue[1:]
		batch := takeBatch(&g.queue, first)
		g.mu.Unlock()
		s.runPreparedBatch(batch, wake, &conn)
		wake()
		done = batch
	}
}

// takeBatch returns lead and up to maxBatch-1 queued writes of other lists,
// oldest first, removed from the queue, sorted by list ref. Writes it
// leaves keep their order.
func takeBatch(queue *[]*prepReq, lead *prepReq) []*prepReq {
	q := *queue
	batch := []*prepReq{lead}
	seen := map[string]bool{lead.p.Expect.Ref: true}
	rest := q[:0]
	for _, r := range q {
		ref := r.p.Expect.Ref
		if len(batch) == maxBatch || seen[ref] {
			rest = append(rest, r)
			continue
		}
		seen[ref] = true
		batch = append(batch, r)
	}
	clear(q[len(rest):])
	*queue = rest
	slices.SortFunc(batch, func(a, b *prepReq) int { return strings.Compare(a.p.Expect.Ref, b.p.Expect.Ref) })
	return batch
}

// runPreparedBatch runs batch and records each write's outcome. It calls
// sent (which may be called again) once the batch's first pipeline is sent
// to Postgres, or on its way out. It does not panic.
//
// It runs the batch on *held, a connection the batcher keeps from one batch
// to the next while writes keep coming, or takes one from the pool into
// *held; it closes the connection and clears *held unless the batch left
// it open and without a panic. Taking a connection from the pool for each
// batch, as before, gave a batch whichever connection went back to the
// pool last, often a compaction's or a read's, so two Postgres backends
// ran the batches (22.5 % and 9 % of all samples of a perf record of
// create-yap on Postgres). With one, create-yap on Postgres gave
// 9,394 / 9,991 / 9,109 / 8,481 and 9,316 / 9,345 / 9,567 / 8,922 req/s
// against 8,882 / 9,227 / 9,183 / 8,973 and 8,827 / 8,896 / 9,199 / 9,346
// (eight alternating pairs of 6 s; about 2 % more on average, 61.5
// against 62.6 µs of Postgres CPU per create).
func (s *Store) runPreparedBatch(batch []*prepReq, sent func(), held **sql.Conn) {
	defer sent()
	live := slices.DeleteFunc(slices.Clone(batch), (*prepReq).cancelled)
	if len(live) == 0 {
		return
	}
	failAll := func(err error) {
		for _, r := range live {
			r.err = err
		}
	}
	defer func() {
		if v := recover(); v != nil {
			failAll(yaps.Errorf(yaps.EINTERNAL, "bunstore: prepared write panicked: %v", v))
		}
	}()
	// Statements run to their end once sent, whatever happens to the
	// writers' contexts: cancelling one would break the connection under
	// the whole batch.
	if *held == nil {
		conn, err := s.sqldb.Conn(context.Background())
		if err != nil {
			failAll(wrap(err, "connection"))
			return
		}
		*held = conn
	}
	conn := *held
	keep := false // the connection is fit for the next batch
	defer func() {
		if !keep {
			conn.Close()
			*held = nil
		}
	}()
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			s.noPipeline.Store(true)
			return yaps.ErrPreparedUnsupported
		}
		s.runOn(c.Conn(), live, sent)
		keep = !c.Conn().IsClosed() // not after a panic either
		return nil
	})
	if err != nil {
		failAll(err)
	}
}

// runOn runs the writes live on c: as one batch if there are several,
// then, if that failed, one by one.
func (s *Store) runOn(c *pgx.Conn, live []*prepReq, sent func()) {
	if len(live) > 1 {
		s.prepGroup.pipelines.Add(1)
		if s.pipeline(c, live, sent) == nil {
			return
		}
	}
	// Alone, or again one by one after the batch failed.
	for _, r := range live {
		r.applied, r.err = false, nil
		s.prepGroup.pipelines.Add(1)
		err := s.pipeline(c, []*prepReq{r}, sent)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == sqlstateLockNotAvailable {
			continue // not applied: written through Update instead
		}
		if err != nil {
			r.err = wrap(err, "prepared write")
		}
	}
}

// pipeline sends the writes of rs as one pipeline, calls sent, and, if
// the pipeline committed, records their outcomes.
func (s *Store) pipeline(c *pgx.Conn, rs []*prepReq, sent func()) error {
	var (
		applied []bool
		seqs    [][]int64
		err     error
	)
	if m, multi := collectMulti(rs); multi {
		s.prepGroup.multiRow.Add(1)
		applied, seqs, err = s.pipelineMulti(c, rs, m, sent)
	} else {
		b := &pgx.Batch{}
		queueLocks(b, rs)
		for _, r := range rs {
			queuePrepared(b, r.p)
		}
		br := c.SendBatch(context.Background(), b)
		sent()
		_, err = br.Exec() // the settings
		if err == nil {
			_, err = br.Exec() // the locks
		}
		if err == nil {
			applied, seqs, err = readEach(br, rs)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	for i, r := range rs {
		r.applied = applied[i]
		if applied[i] {
			setAuditSeqs(r.p, seqs[i])
		}
	}
	return nil
}

// readEach reads the results of rs's statement-per-op form, as readMulti.
func readEach(br pgx.BatchResults, rs []*prepReq) ([]bool, [][]int64, error) {
	applied := make([]bool, len(rs))
	seqs := make([][]int64, len(rs))
	for i, r := range rs {
		var err error
		if applied[i], seqs[i], err = readPrepared(br, r.p); err != nil {
			return nil, nil, err
		}
	}
	return applied, seqs, nil
}

// cancelled reports whether r's context is done, which is then its error.
func (r *prepReq) cancelled() bool {
	r.err = r.ctx.Err()
	return r.err != nil
}
