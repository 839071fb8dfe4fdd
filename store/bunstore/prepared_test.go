package bunstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// Prepared writes queued together on Postgres go as one pipeline. A stale
// write in it writes nothing and the others apply; a write whose statement
// fails rolls the pipeline back, and then every write is retried alone, so
// only the failing one fails.
func TestPreparedGroupCommit(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	s := open(t, dsn)
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()

	var rows []*yaps.List
	for i := range 6 {
		l := &yaps.List{Ref: fmt.Sprintf("list%d", i), Title: "t", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}
		owner := &yaps.Permission{ID: fmt.Sprintf("perm%d", i), ListRef: l.Ref, Role: yaps.RoleOwner, CreatedAt: now,
			CodeHash: yaps.HashSecret(fmt.Sprintf("code%d", i))}
		require.NoError(t, s.CreateList(ctx, l, owner, []byte("u1"), nil))
		row, err := s.List(ctx, l.Ref)
		require.NoError(t, err)
		rows = append(rows, row)
	}
	write := func(row *yaps.List, perm, yap string) *yaps.PreparedWrite {
		next := row.Clone()
		next.DocVersion++
		return &yaps.PreparedWrite{Expect: row, PermissionID: perm, List: next, Ops: []yaps.PreparedOp{
			{Update: []byte(yap)},
			{PutYap: &yaps.Yap{ID: yap, ListRef: row.Ref, Kind: yaps.KindNote, CreatedAt: now, UpdatedAt: now}},
			{Audit: &yaps.AuditEntry{ListRef: row.Ref, At: now, PermissionID: perm, Role: yaps.RoleOwner, Action: "yap.create", YapID: yap}},
		}}
	}
	type result struct {
		applied bool
		err     error
	}
	// runBatch runs ws concurrently, held back until all are queued.
	runBatch := func(ws []*yaps.PreparedWrite) []result {
		wait, release := bunstore.GatePrepared(t, s)
		out := make([]result, len(ws))
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				applied, err := s.WritePrepared(ctx, w)
				out[i] = result{applied, err}
			})
		}
		wait(len(ws))
		release()
		wg.Wait()
		return out
	}

	// Round 1: four good writes, one stale (list4 expects an older row)
	// and one permission that is not list5's: one pipeline.
	stale := rows[4].Clone()
	stale.DocVersion = 0
	ws := []*yaps.PreparedWrite{
		write(rows[0], "perm0", "a"), write(rows[1], "perm1", "a"), write(rows[2], "", "a"), write(rows[3], "perm3", "a"),
		write(stale, "perm4", "a"), write(rows[5], "perm0", "a"),
	}
	before := bunstore.PreparedPipelines(s)
	got := runBatch(ws)
	require.Equal(t, before+1, bunstore.PreparedPipelines(s), "one pipeline for the whole batch")
	for i, r := range got {
		require.NoError(t, r.err, i)
		require.Equal(t, i < 4, r.applied, i)
	}
	for i := range 6 {
		l, err := s.List(ctx, rows[i].Ref)
		require.NoError(t, err)
		_, yerr := s.Yap(ctx, rows[i].Ref, "a")
		if i < 4 {
			require.EqualValues(t, 2, l.DocVersion)
			require.NoError(t, yerr)
			require.NotZero(t, ws[i].Ops[2].Audit.Seq)
			rows[i] = l
		} else {
			require.EqualValues(t, 1, l.DocVersion)
			require.Equal(t, yaps.ENOTFOUND, yaps.ErrorCode(yerr))
			require.Zero(t, ws[i].Ops[2].Audit.Seq)
		}
	}

	// Round 2: list1's log already holds the seq its write appends (put
	// there behind the store's back), so its insert fails and rolls the
	// pipeline back; the retries apply the others. Two writes of list0 are
	// never batched together: the second waits for a later batch, where
	// its row is stale.
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, `INSERT INTO doc_updates (list_ref, seq, data) VALUES ('list1', 3, 'x')`)
	require.NoError(t, err)
	ws = []*yaps.PreparedWrite{
		write(rows[0], "perm0", "b"), write(rows[1], "perm1", "b"), write(rows[2], "perm2", "b"), write(rows[0], "perm0", "c"),
	}
	before = bunstore.PreparedPipelines(s)
	got = runBatch(ws)
	require.NoError(t, got[0].err)
	require.Error(t, got[1].err)
	require.NoError(t, got[2].err)
	require.True(t, got[2].applied)
	require.NoError(t, got[3].err)
	// Whichever of list0's writes queued first applied; the other was
	// stale in the next batch.
	require.NotEqual(t, got[0].applied, got[3].applied)
	lost := "c"
	if got[3].applied {
		lost = "b"
	}
	require.Equal(t, before+1+3+1, bunstore.PreparedPipelines(s), "batch, three retries, then list0's other write")
	for i, want := range []int64{3, 2, 3} {
		l, err := s.List(ctx, rows[i].Ref)
		require.NoError(t, err)
		require.Equal(t, want, l.DocVersion, rows[i].Ref)
	}
	_, err = s.Yap(ctx, "list1", "b")
	require.Equal(t, yaps.ENOTFOUND, yaps.ErrorCode(err))
	_, err = s.Yap(ctx, "list0", lost)
	require.Equal(t, yaps.ENOTFOUND, yaps.ErrorCode(err))
}

// Many writers, each writing its own list in sequence, through batches
// that run side by side: every write applies exactly once, and its caller
// learns so only after it committed.
func TestPreparedConcurrentWriters(t *testing.T) {
	t.Parallel()
	s := open(t, storetest.PostgresDSN(t))
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	const writers, each = 6, 25
	seqs := make(chan int64, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		l := &yaps.List{Ref: fmt.Sprintf("w%d", w), Title: "t", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}
		require.NoError(t, s.CreateList(ctx, l, nil, []byte("u1"), nil))
		row, err := s.List(ctx, l.Ref)
		require.NoError(t, err)
		wg.Go(func() {
			for i := range each {
				next := row.Clone()
				next.DocVersion++
				audit := &yaps.AuditEntry{ListRef: row.Ref, At: now, PermissionID: "p", Role: yaps.RoleOwner, Action: "yap.create"}
				applied, err := s.WritePrepared(ctx, &yaps.PreparedWrite{Expect: row, List: next, Ops: []yaps.PreparedOp{
					{Update: fmt.Appendf(nil, "%d", i)}, {Audit: audit},
				}})
				if !assert.NoError(t, err) || !assert.True(t, applied) {
					return
				}
				// Committed: the store already serves it.
				got, err := s.List(ctx, row.Ref)
				if !assert.NoError(t, err) || !assert.Equal(t, next.DocVersion, got.DocVersion) {
					return
				}
				seqs <- audit.Seq
				row = got
			}
		})
	}
	wg.Wait()
	close(seqs)
	distinct := map[int64]bool{}
	for q := range seqs {
		require.NotZero(t, q)
		distinct[q] = true
	}
	require.Len(t, distinct, writers*each)
	for w := range writers {
		log, err := s.Doc(ctx, fmt.Sprintf("w%d", w), 1)
		require.NoError(t, err)
		require.Len(t, log.Updates, each)
	}
}
