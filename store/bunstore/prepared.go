package bunstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/yaps-dev/yaps/yaps"
)

// Prepared writes on Postgres (yaps.PreparedWriter). Update's callback
// makes one round trip per statement: BEGIN, the list row FOR UPDATE, the
// permission check, each write, COMMIT. A prepared write knows all its
// statements up front, so it goes as one pgx pipeline: the statements and a
// single Sync, which Postgres runs as one implicit transaction (an error in
// any statement rolls back all of them).
//
// The checks cannot stop the pipeline half way, so they guard the writes
// instead. The first statement locks the list rows of the pipeline (in ref
// order), so writers of the list in other processes queue behind it, and
// so does a revocation: it locks the list row too, and commits before the
// lock is released. The guard, the next statement, then reads with a
// snapshot taken after the lock was granted: it updates the list row only
// if it still holds the expected values and the writer's permission is
// still active. (Locking in the guard itself is not enough: under READ
// COMMITTED, a statement that waited for a row lock re-checks that row
// only, and would still see the permission as its snapshot had it, so a
// write could commit after the revocation that should have stopped it.) Every
// later statement writes only if the list row was updated by this very
// transaction (its xmin is our transaction id). A failed check thus writes
// nothing, and the service falls back to Update, which reports why.

// preparedSQL holds the Postgres statements of a prepared write.
var preparedSQL = struct {
	guard, update, putYap, deleteYap, audit string
}{
	// saveListSQL ($1-$8), if the row still holds the expected values
	// ($9-$16) and the permission $17, if any, is active.
	guard: saveListSQL + ` AND title = $9 AND kind = $10 AND created_at = $11 AND updated_at = $12
		AND archived_at IS NOT DISTINCT FROM $13 AND rolled_up_at IS NOT DISTINCT FROM $14
		AND account_id IS NOT DISTINCT FROM $15 AND doc_version = $16
		AND ($17::text = '' OR EXISTS (SELECT 1 FROM permissions WHERE id = $17 AND list_ref = $1 AND revoked_at IS NULL))`,
	update: `INSERT INTO doc_updates (list_ref, seq, n, data) SELECT $1::text, $2::bigint, $3::int, $4::bytea WHERE ` + guardedBy,
	putYap: `INSERT INTO yaps (list_ref, id, created_at, deleted_at, data) SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::bytea WHERE ` + guardedBy + `
		ON CONFLICT (list_ref, id) DO UPDATE SET created_at = excluded.created_at,
		deleted_at = excluded.deleted_at, data = excluded.data`,
	deleteYap: `DELETE FROM yaps WHERE list_ref = $1 AND id = $2 AND ` + guardedBy,
	audit: `INSERT INTO audit (list_ref, at, permission_id, role, action, yap_id, detail)
		SELECT $1::text, $2::bigint, $3::text, $4::text, $5::text, $6::text, $7::text WHERE ` + guardedBy + ` RETURNING seq`,
}

// guardedBy holds when this transaction updated the list row $1.
const guardedBy = `EXISTS (SELECT 1 FROM lists WHERE ref = $1 AND xmin = pg_current_xact_id()::xid)`

var _ yaps.PreparedWriter = (*Store)(nil)

// WritePrepared implements yaps.PreparedWriter on Postgres through pgx. It
// declines (yaps.ErrPreparedUnsupported) on SQLite, whose group commit
// already runs a write's statements without round trips, and on a
// database/sql driver other than pgx's.
func (s *Store) WritePrepared(ctx context.Context, p *yaps.PreparedWrite) (applied bool, err error) {
	if !s.pg || s.noPipeline.Load() {
		return false, yaps.ErrPreparedUnsupported
	}
	if s.closed.Load() {
		return false, errClosed
	}
	if err := checkPrepared(p); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return s.groupPrepared(ctx, p)
}

// checkPrepared rejects a PreparedWrite whose guard would not tell this
// write from another: it must advance DocVersion by its updates.
func checkPrepared(p *yaps.PreparedWrite) error {
	n := int64(0)
	for _, op := range p.Ops {
		set := 0
		for _, ok := range []bool{op.Update != nil, op.PutYap != nil, op.DeleteYapID != "", op.Audit != nil} {
			if ok {
				set++
			}
		}
		if set != 1 {
			return yaps.Errorf(yaps.EINTERNAL, "bunstore: a prepared op must do exactly one thing")
		}
		if op.Update != nil {
			n++
		}
	}
	if p.Expect == nil || p.List == nil || n == 0 || p.List.Ref != p.Expect.Ref ||
		p.List.DocVersion != p.Expect.DocVersion+n {
		return yaps.Errorf(yaps.EINTERNAL, "bunstore: malformed prepared write")
	}
	return nil
}

// lockSQL locks the list rows $1, in ref order (see above).
const lockSQL = `SELECT 1 FROM lists WHERE ref = ANY($1::text[]) ORDER BY ref FOR UPDATE`

// settingsSQL sets, for the pipeline's transaction, two settings.
//
// lock_timeout bounds how long a pipeline waits for its list rows. One
// pipeline runs at a time, for every list: a row held elsewhere (another
// process's write, a hung connection) must not stall the writes to all
// the other lists. A write that times out is not lost: it is tried alone,
// and if its row is still held it is reported not applied, so the service
// writes it through Update, which waits under its caller's deadline.
//
// plan_cache_mode: the statements take their rows as arrays. Postgres
// plans a prepared statement for its first five runs with the values at
// hand, and then keeps doing so whenever those plans looked cheaper than
// the generic one, which they do for short arrays (a lone write): planning
// the batch statement (prepmulti.go) then cost about 1 ms of Postgres CPU
// per write, ten times its run (BenchmarkPreparedCreates with one writer).
// The generic plan does not depend on the arrays' values, and with tables
// of any size it looks rows up by their keys.
const settingsSQL = `SELECT set_config('lock_timeout', '` + pipelineLockTimeout + `', true),
	set_config('plan_cache_mode', 'force_generic_plan', true)`

const pipelineLockTimeout = "100ms"

// queueLocks queues the lock of rs's list rows on b, after the settings:
// the first two statements of every pipeline.
func queueLocks(b *pgx.Batch, rs []*prepReq) {
	refs := make([]string, len(rs))
	for i, r := range rs {
		refs[i] = r.p.Expect.Ref
	}
	b.Queue(settingsSQL)
	b.Queue(lockSQL, refs)
}

// queueGuard queues p's guard on b.
func queueGuard(b *pgx.Batch, p *yaps.PreparedWrite) {
	args := append(saveListArgs(p.List, p.List.DocVersion), listArgs(p.Expect)[1:]...)
	b.Queue(preparedSQL.guard, append(args, p.PermissionID)...)
}

// updateRow joins the updates of ops from ops[i] on (consecutive ones, one
// write's) into one row of the update log (updaterows.go), and returns the
// row's n and data and the index of its last update.
func updateRow(ops []yaps.PreparedOp, i int) (n int, data []byte, last int) {
	j := i
	for j+1 < len(ops) && ops[j+1].Update != nil {
		j++
	}
	if j == i {
		return 1, ops[i].Update, i
	}
	us := make([][]byte, 0, j-i+1)
	for _, op := range ops[i : j+1] {
		us = append(us, op.Update)
	}
	return len(us), packUpdates(us), j
}

// queuePrepared queues p's statements on b.
func queuePrepared(b *pgx.Batch, p *yaps.PreparedWrite) {
	ref, seq := p.Expect.Ref, p.Expect.DocVersion
	queueGuard(b, p)
	for i := 0; i < len(p.Ops); i++ {
		switch op := p.Ops[i]; {
		case op.Update != nil:
			n, data, last := updateRow(p.Ops, i)
			seq += int64(n)
			b.Queue(preparedSQL.update, ref, seq, n, data)
			i = last
		case op.PutYap != nil:
			b.Queue(preparedSQL.putYap, yapArgs(ref, op.PutYap)...)
		case op.DeleteYapID != "":
			b.Queue(preparedSQL.deleteYap, ref, op.DeleteYapID)
		case op.Audit != nil:
			b.Queue(preparedSQL.audit, auditArgs(ref, op.Audit)...)
		}
	}
}

// readPrepared reads the results of p's statements from br: whether p
// applied, and the seqs of its audit entries, in order.
func readPrepared(br pgx.BatchResults, p *yaps.PreparedWrite) (bool, []int64, error) {
	tag, err := br.Exec()
	if err != nil {
		return false, nil, err
	}
	applied := tag.RowsAffected() == 1
	var seqs []int64
	for i, op := range p.Ops {
		if op.Update != nil && i > 0 && p.Ops[i-1].Update != nil {
			continue // in the row of the update before (updateRow)
		}
		if op.Audit == nil {
			if _, err := br.Exec(); err != nil {
				return false, nil, err
			}
			continue
		}
		var seq int64
		rows, err := br.Query()
		if err != nil {
			return false, nil, err
		}
		for rows.Next() {
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return false, nil, err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, nil, err
		}
		seqs = append(seqs, seq)
	}
	return applied, seqs, nil
}

// setAuditSeqs gives p's audit entries their seqs, once p committed.
func setAuditSeqs(p *yaps.PreparedWrite, seqs []int64) {
	i := 0
	for _, op := range p.Ops {
		if op.Audit != nil {
			op.Audit.Seq = seqs[i]
			i++
		}
	}
}
