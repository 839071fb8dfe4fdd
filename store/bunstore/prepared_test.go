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
		rows = append(rows, preparedList(t, s, fmt.Sprintf("list%d", i), fmt.Sprintf("perm%d", i), now))
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
	// Round 1: four good writes, one stale (list4 expects an older row)
	// and one permission that is not list5's: one pipeline.
	stale := rows[4].Clone()
	stale.DocVersion = 0
	ws := []*yaps.PreparedWrite{
		write(rows[0], "perm0", "a"), write(rows[1], "perm1", "a"), write(rows[2], "", "a"), write(rows[3], "perm3", "a"),
		write(stale, "perm4", "a"), write(rows[5], "perm0", "a"),
	}
	before := bunstore.PreparedPipelines(s)
	applied, errs := gatedBatch(t, s, ws)
	require.Equal(t, before+1, bunstore.PreparedPipelines(s), "one pipeline for the whole batch")
	for i := range ws {
		require.NoError(t, errs[i], i)
		require.Equal(t, i < 4, applied[i], i)
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
	applied, errs = gatedBatch(t, s, ws)
	require.NoError(t, errs[0])
	require.Error(t, errs[1])
	require.NoError(t, errs[2])
	require.True(t, applied[2])
	require.NoError(t, errs[3])
	// Whichever of list0's writes queued first applied; the other was
	// stale in the next batch.
	require.NotEqual(t, applied[0], applied[3])
	lost := "c"
	if applied[3] {
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

// preparedList creates list ref, owned by permission permID, and returns
// its row.
func preparedList(t *testing.T, s *bunstore.Store, ref, permID string, now time.Time) *yaps.List {
	t.Helper()
	ctx := context.Background()
	l := &yaps.List{Ref: ref, Title: "t", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}
	owner := &yaps.Permission{ID: permID, ListRef: ref, Role: yaps.RoleOwner, CreatedAt: now, CodeHash: yaps.HashSecret("code-" + permID)}
	require.NoError(t, s.CreateList(ctx, l, owner, []byte("u1"), nil))
	row, err := s.List(ctx, ref)
	require.NoError(t, err)
	return row
}

// gatedBatch runs ws as one batch of prepared writes: each concurrently,
// held back until all are queued.
func gatedBatch(t *testing.T, s *bunstore.Store, ws []*yaps.PreparedWrite) (applied []bool, errs []error) {
	t.Helper()
	wait, release := bunstore.GatePrepared(t, s)
	applied, errs = make([]bool, len(ws)), make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { applied[i], errs[i] = s.WritePrepared(context.Background(), w) })
	}
	wait(len(ws))
	release()
	wg.Wait()
	return applied, errs
}

// The batcher (prepgroup.go) runs batches while writes keep coming and
// stops when none is left: writes that queue behind a running batch go in
// the next one, in one pipeline, and after a run of writes one at a time
// no batcher is left behind.
func TestPreparedBatcher(t *testing.T) {
	t.Parallel()
	s := open(t, storetest.PostgresDSN(t))
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	write := func(row *yaps.List, perm string) *yaps.PreparedWrite {
		next := row.Clone()
		next.DocVersion++
		return &yaps.PreparedWrite{Expect: row, PermissionID: perm, List: next, Ops: []yaps.PreparedOp{{Update: []byte("u")}}}
	}
	var ws []*yaps.PreparedWrite
	for i := range 4 {
		ws = append(ws, write(preparedList(t, s, fmt.Sprintf("list%d", i), fmt.Sprintf("perm%d", i), now), fmt.Sprintf("perm%d", i)))
	}
	before := bunstore.PreparedPipelines(s)
	applied, errs := gatedBatch(t, s, ws)
	require.Equal(t, before+1, bunstore.PreparedPipelines(s), "the queued writes in one pipeline")
	for i := range ws {
		require.NoError(t, errs[i])
		require.True(t, applied[i])
	}

	row := ws[0].List
	for range 30 {
		p := write(row, "perm0")
		ok, err := s.WritePrepared(context.Background(), p)
		require.NoError(t, err)
		require.True(t, ok)
		row = p.List
	}
	require.Eventually(t, func() bool { return !bunstore.PreparedBatcherRunning(s) }, 5*time.Second, time.Millisecond,
		"no batcher left behind")
}

// A batch goes as one statement for all its writes' guards and ops
// (prepmulti.go): every op of every applied write lands, a stale write's
// rows are skipped among them, and audit entries get the seqs they were
// stored under. A batch that puts or deletes one yap twice keeps the ops'
// order through the statement-per-op form.
func TestPreparedMultiRow(t *testing.T) {
	t.Parallel()
	s := open(t, storetest.PostgresDSN(t))
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	later := now.Add(time.Minute)

	rows := make([]*yaps.List, 4)
	for i := range rows {
		rows[i] = preparedList(t, s, fmt.Sprintf("list%d", i), fmt.Sprintf("perm%d", i), now)
	}
	yap := func(ref, id string) *yaps.Yap {
		return &yaps.Yap{ID: id, ListRef: ref, Kind: yaps.KindNote, Content: "c-" + id, CreatedAt: now, UpdatedAt: now}
	}
	audit := func(ref, perm, action, id string) *yaps.AuditEntry {
		return &yaps.AuditEntry{ListRef: ref, At: now, PermissionID: perm, Role: yaps.RoleOwner, Action: action, YapID: id, Detail: action + "/" + ref}
	}
	write := func(row *yaps.List, perm string, ops ...yaps.PreparedOp) *yaps.PreparedWrite {
		next := row.Clone()
		for _, op := range ops {
			if op.Update != nil {
				next.DocVersion++
			}
		}
		return &yaps.PreparedWrite{Expect: row, PermissionID: perm, List: next, Ops: ops}
	}
	refresh := func() {
		for i := range rows {
			l, err := s.List(ctx, rows[i].Ref)
			require.NoError(t, err)
			rows[i] = l
		}
	}
	// list2 holds a yap "old" for the batch to delete. A write alone
	// takes the statement-per-op form.
	lone := bunstore.MultiRowPipelines(s)
	applied, err := s.WritePrepared(ctx, write(rows[2], "perm2", yaps.PreparedOp{Update: []byte("u")}, yaps.PreparedOp{PutYap: yap("list2", "old")}))
	require.NoError(t, err)
	require.True(t, applied)
	require.Equal(t, lone, bunstore.MultiRowPipelines(s))
	refresh()

	deleted := yap("list0", "a")
	deleted.DeletedAt = &later
	stale := rows[1].Clone()
	stale.DocVersion = 0
	ws := []*yaps.PreparedWrite{
		write(rows[0], "perm0",
			yaps.PreparedOp{Update: []byte("x0")}, yaps.PreparedOp{Audit: audit("list0", "perm0", "yap.create", "a")},
			yaps.PreparedOp{PutYap: deleted}, yaps.PreparedOp{Update: []byte("y0")}, yaps.PreparedOp{PutYap: yap("list0", "b")},
			yaps.PreparedOp{Audit: audit("list0", "perm0", "yap.delete", "a")}),
		write(stale, "perm1", yaps.PreparedOp{Update: []byte("x1")}, yaps.PreparedOp{PutYap: yap("list1", "a")},
			yaps.PreparedOp{Audit: audit("list1", "perm1", "yap.create", "a")}),
		write(rows[2], "perm2", yaps.PreparedOp{Update: []byte("x2")}, yaps.PreparedOp{Update: []byte("x2b")}, yaps.PreparedOp{DeleteYapID: "old"},
			yaps.PreparedOp{Audit: audit("list2", "perm2", "yap.remove", "old")}),
		write(rows[3], "", yaps.PreparedOp{Audit: audit("list3", "", "list.update", "")}, yaps.PreparedOp{Update: []byte("x3")}),
	}
	pipelines, multi := bunstore.PreparedPipelines(s), bunstore.MultiRowPipelines(s)
	got, errs := gatedBatch(t, s, ws)
	require.Equal(t, pipelines+1, bunstore.PreparedPipelines(s), "one pipeline")
	require.Equal(t, multi+1, bunstore.MultiRowPipelines(s), "in the multi-row form")
	for i := range ws {
		require.NoError(t, errs[i], i)
	}
	require.Equal(t, []bool{true, false, true, true}, got)

	// The update log: list0 got seqs 2 and 3, list2 3 and 4 (one row),
	// list3 2; list1 nothing.
	for i, want := range []int64{3, 1, 4, 2} {
		l, err := s.List(ctx, rows[i].Ref)
		require.NoError(t, err)
		require.Equal(t, want, l.DocVersion, rows[i].Ref)
	}
	log, err := s.Doc(ctx, "list0", 1)
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("x0"), []byte("y0")}, log.Updates)
	log, err = s.Doc(ctx, "list1", 1)
	require.NoError(t, err)
	require.Empty(t, log.Updates)
	for _, tc := range []struct {
		after int64
		want  []string
	}{{2, []string{"x2", "x2b"}}, {3, []string{"x2b"}}} {
		log, err = s.Doc(ctx, "list2", tc.after)
		require.NoError(t, err)
		var got []string
		for _, u := range log.Updates {
			got = append(got, string(u))
		}
		require.Equal(t, tc.want, got, "list2 after %d", tc.after)
	}

	// The projections, including a NULL and a set deleted_at.
	y, err := s.Yap(ctx, "list0", "a")
	require.NoError(t, err)
	require.NotNil(t, y.DeletedAt)
	require.True(t, later.Equal(*y.DeletedAt))
	y, err = s.Yap(ctx, "list0", "b")
	require.NoError(t, err)
	require.Nil(t, y.DeletedAt)
	require.Equal(t, "c-b", y.Content)
	_, err = s.Yap(ctx, "list1", "a")
	require.Equal(t, yaps.ENOTFOUND, yaps.ErrorCode(err))
	_, err = s.Yap(ctx, "list2", "old")
	require.Equal(t, yaps.ENOTFOUND, yaps.ErrorCode(err))

	// Audit seqs: the skipped write's entry got none; every other entry
	// got the seq it is stored under, ascending in batch order.
	require.Zero(t, ws[1].Ops[2].Audit.Seq)
	var order []int64
	for _, w := range []*yaps.PreparedWrite{ws[0], ws[2], ws[3]} {
		for _, op := range w.Ops {
			if op.Audit == nil {
				continue
			}
			require.NotZero(t, op.Audit.Seq)
			order = append(order, op.Audit.Seq)
			stored, err := s.Audit(ctx, w.Expect.Ref, op.Audit.Seq-1, 1)
			require.NoError(t, err)
			require.Len(t, stored, 1)
			require.Equal(t, op.Audit.Seq, stored[0].Seq)
			require.Equal(t, op.Audit.Detail, stored[0].Detail)
			require.Equal(t, op.Audit.Action, stored[0].Action)
		}
	}
	require.IsIncreasing(t, order)
	audits, err := s.Audit(ctx, "list1", 0, 10)
	require.NoError(t, err)
	require.Empty(t, audits)

	// One yap put, then deleted, in one write; and one deleted, then put
	// again: the statement-per-op form keeps each order.
	refresh()
	ws = []*yaps.PreparedWrite{
		write(rows[0], "perm0", yaps.PreparedOp{Update: []byte("z0")}, yaps.PreparedOp{PutYap: yap("list0", "c")}, yaps.PreparedOp{DeleteYapID: "c"}),
		write(rows[1], "perm1", yaps.PreparedOp{Update: []byte("z1")}, yaps.PreparedOp{DeleteYapID: "d"}, yaps.PreparedOp{PutYap: yap("list1", "d")}),
	}
	pipelines, multi = bunstore.PreparedPipelines(s), bunstore.MultiRowPipelines(s)
	got, errs = gatedBatch(t, s, ws)
	require.Equal(t, pipelines+1, bunstore.PreparedPipelines(s))
	require.Equal(t, multi, bunstore.MultiRowPipelines(s), "not in the multi-row form")
	require.Equal(t, []bool{true, true}, got)
	require.Equal(t, []error{nil, nil}, errs)
	_, err = s.Yap(ctx, "list0", "c")
	require.Equal(t, yaps.ENOTFOUND, yaps.ErrorCode(err))
	_, err = s.Yap(ctx, "list1", "d")
	require.NoError(t, err)

	// A write for a list that does not exist, batched with one that does:
	// the row guards leave nothing of it.
	refresh()
	ghost := rows[3].Clone()
	ghost.Ref = "ghost"
	ws = []*yaps.PreparedWrite{
		write(rows[3], "", yaps.PreparedOp{Update: []byte("g3")}, yaps.PreparedOp{PutYap: yap("list3", "g")}),
		write(ghost, "", yaps.PreparedOp{Update: []byte("g")}, yaps.PreparedOp{PutYap: yap("ghost", "g")},
			yaps.PreparedOp{Audit: audit("ghost", "", "yap.create", "g")}),
	}
	multi = bunstore.MultiRowPipelines(s)
	got, errs = gatedBatch(t, s, ws)
	require.Equal(t, multi+1, bunstore.MultiRowPipelines(s))
	require.Equal(t, []bool{true, false}, got)
	require.Equal(t, []error{nil, nil}, errs)
	_, err = s.Yap(ctx, "list3", "g")
	require.NoError(t, err)
	_, err = s.Yap(ctx, "ghost", "g")
	require.Equal(t, yaps.ENOTFOUND, yaps.ErrorCode(err))
	audits, err = s.Audit(ctx, "ghost", 0, 10)
	require.NoError(t, err)
	require.Empty(t, audits)
}

// Each write of a multi-row batch keeps its own guard, which checks every
// field of its expected row, NULL or not, and its permission: a batch of
// a good write and a write with one stale field applies the good one only.
func TestPreparedMultiRowGuards(t *testing.T) {
	t.Parallel()
	s := open(t, storetest.PostgresDSN(t))
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	newList := func(ref string, rolledUp bool) *yaps.List {
		row := preparedList(t, s, ref, "perm-"+ref, now)
		if !rolledUp {
			return row
		}
		require.NoError(t, s.Update(ctx, ref, func(tx yaps.Tx) error {
			l := tx.List()
			l.AccountID, l.RolledUpAt, l.ArchivedAt = "acct", &now, &now
			return tx.SaveList(l)
		}))
		row, err := s.List(ctx, ref)
		require.NoError(t, err)
		return row
	}
	write := func(expect *yaps.List, perm string) *yaps.PreparedWrite {
		next := expect.Clone()
		next.DocVersion++
		next.Title = "written"
		return &yaps.PreparedWrite{Expect: expect, PermissionID: perm, List: next, Ops: []yaps.PreparedOp{{Update: []byte("u2")}}}
	}
	newList("other", false)
	changes := map[string]func(l *yaps.List, perm *string){
		"none":       func(*yaps.List, *string) {},
		"title":      func(l *yaps.List, _ *string) { l.Title = "x" },
		"kind":       func(l *yaps.List, _ *string) { l.Kind = yaps.KindNote },
		"createdAt":  func(l *yaps.List, _ *string) { l.CreatedAt = l.CreatedAt.Add(time.Millisecond) },
		"updatedAt":  func(l *yaps.List, _ *string) { l.UpdatedAt = l.UpdatedAt.Add(time.Millisecond) },
		"archivedAt": func(l *yaps.List, _ *string) { l.ArchivedAt = toggle(l.ArchivedAt, now) },
		"rolledUpAt": func(l *yaps.List, _ *string) { l.RolledUpAt = toggle(l.RolledUpAt, now) },
		"accountID": func(l *yaps.List, _ *string) {
			l.AccountID = map[string]string{"": "acct", "acct": ""}[l.AccountID]
		},
		"docVersion":     func(l *yaps.List, _ *string) { l.DocVersion-- },
		"unknownPerm":    func(_ *yaps.List, p *string) { *p = "nobody" },
		"otherListsPerm": func(_ *yaps.List, p *string) { *p = "perm-other" },
	}
	for name, change := range changes {
		for _, rolledUp := range []bool{false, true} {
			good := newList(fmt.Sprintf("good-%s-%v", name, rolledUp), false)
			row := newList(fmt.Sprintf("x-%s-%v", name, rolledUp), rolledUp)
			expect, perm := row.Clone(), "perm-"+row.Ref
			change(expect, &perm)
			pipelines, multi := bunstore.PreparedPipelines(s), bunstore.MultiRowPipelines(s)
			applied, errs := gatedBatch(t, s, []*yaps.PreparedWrite{write(good, "perm-"+good.Ref), write(expect, perm)})
			require.Equal(t, multi+1, bunstore.MultiRowPipelines(s))
			// One pipeline: the guards decided, not a failed batch run
			// again write by write.
			require.Equal(t, pipelines+1, bunstore.PreparedPipelines(s), "%s, rolled up %v", name, rolledUp)
			require.Equal(t, []error{nil, nil}, errs)
			want := name == "none"
			require.Equal(t, []bool{true, want}, applied, "%s, rolled up %v", name, rolledUp)
			got, err := s.List(ctx, row.Ref)
			require.NoError(t, err)
			if want {
				require.Equal(t, "written", got.Title)
				require.Equal(t, row.DocVersion+1, got.DocVersion)
				require.Equal(t, row.AccountID, got.AccountID)
				require.Equal(t, row.RolledUpAt, got.RolledUpAt)
			} else {
				require.Equal(t, row, got)
			}
		}
	}
}

func toggle(t *time.Time, v time.Time) *time.Time {
	if t == nil {
		return &v
	}
	return nil
}

// A prepared write waiting for the list row lock held by a revocation of
// its permission does not apply once the revocation commits, alone or in a
// multi-row pipeline with another list's write (which applies). The guard
// must read the permission with a snapshot taken after the lock.
func TestPreparedGuardAfterRevocation(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	s := open(t, dsn)
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	write := func(expect *yaps.List) *yaps.PreparedWrite {
		next := expect.Clone()
		next.DocVersion++
		return &yaps.PreparedWrite{Expect: expect, PermissionID: "perm-" + expect.Ref, List: next, Ops: []yaps.PreparedOp{{Update: []byte("u2")}}}
	}
	for _, multi := range []bool{false, true} {
		revoked := preparedList(t, s, fmt.Sprintf("revoked-%v", multi), fmt.Sprintf("perm-revoked-%v", multi), now)
		ws := []*yaps.PreparedWrite{write(revoked)}
		if multi {
			ws = append(ws, write(preparedList(t, s, "unaffected", "perm-unaffected", now)))
		}
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		var pid int
		require.NoError(t, tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		_, err = tx.ExecContext(ctx, `SELECT 1 FROM lists WHERE ref = $1 FOR UPDATE`, revoked.Ref)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, `UPDATE permissions SET revoked_at = 1 WHERE id = $1`, "perm-"+revoked.Ref)
		require.NoError(t, err)

		pipelines := bunstore.MultiRowPipelines(s)
		type result struct {
			applied []bool
			errs    []error
		}
		done := make(chan result, 1)
		go func() {
			applied, errs := gatedBatch(t, s, ws)
			done <- result{applied, errs}
		}()
		require.Eventually(t, func() bool {
			var n int
			err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
			return err == nil && n > 0
		}, 10*time.Second, 5*time.Millisecond, "the pipeline waits for the revocation's lock")
		require.NoError(t, tx.Commit())
		r := <-done
		require.Equal(t, make([]error, len(ws)), r.errs)
		if multi {
			require.Equal(t, []bool{false, true}, r.applied)
			require.Equal(t, pipelines+1, bunstore.MultiRowPipelines(s), "the multi-row form")
		} else {
			require.Equal(t, []bool{false}, r.applied)
		}
		got, err := s.List(ctx, revoked.Ref)
		require.NoError(t, err)
		require.Equal(t, revoked.DocVersion, got.DocVersion, "nothing written to the revoked code's list")
	}
}

// A list row locked elsewhere (another process's transaction, a hung
// connection) holds up neither the prepared writes to other lists nor,
// past its caller's deadline, a write queued behind it; the write to the
// locked list is reported not applied once its lock wait times out, for
// the service to write it through Update. Before, one pipeline waited on
// the lock with no bound and every list's writes queued behind it.
func TestPreparedLockedRowStallsNoOne(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	s := open(t, dsn)
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	a := preparedList(t, s, "list-a", "perm-a", now)
	b := preparedList(t, s, "list-b", "perm-b", now)
	write := func(row *yaps.List, perm string) *yaps.PreparedWrite {
		next := row.Clone()
		next.DocVersion++
		return &yaps.PreparedWrite{Expect: row, PermissionID: perm, List: next, Ops: []yaps.PreparedOp{{Update: []byte("u2")}}}
	}

	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer holder.Rollback()
	_, err = holder.ExecContext(ctx, `SELECT 1 FROM lists WHERE ref = 'list-a' FOR UPDATE`)
	require.NoError(t, err)

	// Both in one batch: a's lock fails it, b is retried alone and lands.
	applied, errs := gatedBatch(t, s, []*yaps.PreparedWrite{write(a, "perm-a"), write(b, "perm-b")})
	require.NoError(t, errs[0])
	require.False(t, applied[0], "list-a's row is locked elsewhere")
	require.NoError(t, errs[1])
	require.True(t, applied[1])

	// A write queued behind a held-up batch leaves at its deadline.
	wait, release := bunstore.GatePrepared(t, s)
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	b2, err := s.List(ctx, "list-b")
	require.NoError(t, err)
	go func() { _, err := s.WritePrepared(qctx, write(b2, "perm-b")); done <- err }()
	wait(1)
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("a queued write outlived its deadline")
	}
	release()

	// Nothing of the refused writes landed; the lock's holder still has
	// list-a as it was.
	require.NoError(t, holder.Rollback())
	row, err := s.List(ctx, "list-a")
	require.NoError(t, err)
	require.Equal(t, a.DocVersion, row.DocVersion)
	row, err = s.List(ctx, "list-b")
	require.NoError(t, err)
	require.Equal(t, b.DocVersion+1, row.DocVersion)
}

// A yap put with the NewYap hint is inserted without looking for its row
// first. If the row exists after all, the batch fails on it and its writes
// are retried alone, each with the upsert: every write lands, the
// mistaken one replacing the row.
func TestPreparedNewYapHint(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	s := open(t, dsn)
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	rows := []*yaps.List{preparedList(t, s, "list0", "perm0", now), preparedList(t, s, "list1", "perm1", now)}
	write := func(row *yaps.List, perm, yap, text string) *yaps.PreparedWrite {
		next := row.Clone()
		next.DocVersion++
		y := &yaps.Yap{ID: yap, ListRef: row.Ref, Kind: yaps.KindNote, Body: text, CreatedAt: now, UpdatedAt: now}
		return &yaps.PreparedWrite{Expect: row, PermissionID: perm, List: next, Ops: []yaps.PreparedOp{
			{Update: []byte(yap + text)},
			{PutYap: y, NewYap: true},
			{Audit: &yaps.AuditEntry{ListRef: row.Ref, At: now, PermissionID: perm, Role: yaps.RoleOwner, Action: "yap.create", YapID: yap}},
		}}
	}
	check := func(ref, yap, text string) {
		t.Helper()
		y, err := s.Yap(ctx, ref, yap)
		require.NoError(t, err)
		require.Equal(t, text, y.Body)
	}

	// New yaps, as hinted: one multi-row pipeline.
	pipelines, multi := bunstore.PreparedPipelines(s), bunstore.MultiRowPipelines(s)
	applied, errs := gatedBatch(t, s, []*yaps.PreparedWrite{write(rows[0], "perm0", "a", "one"), write(rows[1], "perm1", "a", "one")})
	for i := range 2 {
		require.NoError(t, errs[i])
		require.True(t, applied[i])
		check(rows[i].Ref, "a", "one")
	}
	require.Equal(t, pipelines+1, bunstore.PreparedPipelines(s))
	require.Equal(t, multi+1, bunstore.MultiRowPipelines(s))

	// list0's yap "a" exists although hinted new; list1's "b" is new.
	for i := range rows {
		l, err := s.List(ctx, rows[i].Ref)
		require.NoError(t, err)
		rows[i] = l
	}
	pipelines = bunstore.PreparedPipelines(s)
	ws := []*yaps.PreparedWrite{write(rows[0], "perm0", "a", "two"), write(rows[1], "perm1", "b", "two")}
	applied, errs = gatedBatch(t, s, ws)
	for i := range 2 {
		require.NoError(t, errs[i])
		require.True(t, applied[i])
		require.NotZero(t, ws[i].Ops[2].Audit.Seq)
	}
	require.Equal(t, pipelines+3, bunstore.PreparedPipelines(s), "the batch, then each write alone")
	check("list0", "a", "two")
	check("list1", "a", "one")
	check("list1", "b", "two")
	for i := range rows {
		l, err := s.List(ctx, rows[i].Ref)
		require.NoError(t, err)
		require.Equal(t, rows[i].DocVersion+1, l.DocVersion)
	}
}
