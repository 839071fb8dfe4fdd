package bunstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/yaps-dev/yaps/yaps"
)

// Group commit of prepared writes (Postgres). As with SQLite's group.go,
// writers queue and whoever finds no batch running leads one, but here a
// batch is one pgx pipeline: every queued write's statements, then one
// Sync, so one round trip and one transaction for all of them. Each write
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
	turn
	ctx     context.Context
	p       *yaps.PreparedWrite
	applied bool
	err     error
}

type prepGroup struct {
	batchQueue[*prepReq]
	pipelines atomic.Int64 // pipelines sent, for tests
	multiRow  atomic.Int64 // of which in the multi-row form (prepmulti.go)
}

// groupPrepared runs p in a batch and returns its outcome. One batch runs
// at a time: in the HTTP benchmark (16 writers, two CPUs) two or four
// concurrent batches cost 20-40% more CPU per write, for smaller batches,
// and no throughput.
func (s *Store) groupPrepared(ctx context.Context, p *yaps.PreparedWrite) (bool, error) {
	r := &prepReq{turn: newTurn(), ctx: ctx, p: p}
	g := &s.prepGroup
	if lead, err := g.enter(ctx, r); err != nil {
		return false, err
	} else if !lead {
		return r.applied, r.err
	}
	batch := g.take(func(queue *[]*prepReq) []*prepReq { return takeBatch(queue, r) })
	s.runPreparedBatch(batch)
	g.done(batch, r)
	return r.applied, r.err
}

// takeBatch returns lead and up to maxBatch-1 queued writes of other lists,
// oldest first, removed from the queue, sorted by list ref.
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

// runPreparedBatch runs batch and records each write's outcome. It does
// not panic.
func (s *Store) runPreparedBatch(batch []*prepReq) {
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
	conn, err := s.sqldb.Conn(context.Background())
	if err != nil {
		failAll(wrap(err, "connection"))
		return
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			s.noPipeline.Store(true)
			return yaps.ErrPreparedUnsupported
		}
		if len(live) > 1 {
			s.prepGroup.pipelines.Add(1)
			if s.pipeline(c.Conn(), live) == nil {
				return nil
			}
		}
		// Alone, or again one by one after the batch failed.
		for _, r := range live {
			r.applied, r.err = false, nil
			s.prepGroup.pipelines.Add(1)
			err := s.pipeline(c.Conn(), []*prepReq{r})
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == sqlstateLockNotAvailable {
				continue // not applied: written through Update instead
			}
			if err != nil {
				r.err = wrap(err, "prepared write")
			}
		}
		return nil
	})
	if err != nil {
		failAll(err)
	}
}

// pipeline sends the writes of rs as one pipeline and, if it committed,
// records their outcomes.
func (s *Store) pipeline(c *pgx.Conn, rs []*prepReq) error {
	b := &pgx.Batch{}
	queueLocks(b, rs)
	m, multi := collectMulti(rs)
	if multi {
		s.prepGroup.multiRow.Add(1)
		q, args := m.statement()
		b.Queue(q, args...)
	} else {
		for _, r := range rs {
			queuePrepared(b, r.p)
		}
	}
	br := c.SendBatch(context.Background(), b)
	var applied []bool
	var seqs [][]int64
	_, err := br.Exec() // the settings
	if err == nil {
		_, err = br.Exec() // the locks
	}
	switch {
	case err != nil:
	case multi:
		applied, seqs, err = readMulti(br, rs, m)
	default:
		applied, seqs, err = readEach(br, rs)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
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
