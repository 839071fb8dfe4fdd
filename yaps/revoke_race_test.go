package yaps_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// TestRevokeCommittedWhileWriteWaits: on Postgres, a write prepared ahead
// that waits for the list row lock held by a revocation of its code is
// refused once that revocation commits (RULINGS R4: revoking takes effect
// at once), and another list's write queued behind it is unaffected (the
// multi-row pipeline is TestPreparedGuardAfterRevocation's). Found by the
// store review of 2026-11-22: the guard statement kept its snapshot, so
// the write committed after the revocation.
func TestRevokeCommittedWhileWriteWaits(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{false, true} {
		name := map[bool]string{false: "alone", true: "with another list's write queued behind"}[batched]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := storetest.PostgresDSN(t)
			ctx := context.Background()
			st, err := bunstore.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			e := newEnvOn(t, st)
			owner := e.list()
			ed := e.actor(owner, yaps.RoleEditor)
			other := e.list()
			// The cached document and row: the next write is prepared ahead.
			_, _, err = e.svc.CreateYap(ctx, ed, yaps.KindTask, task("warm"), "", nil)
			require.NoError(t, err)
			_, _, err = e.svc.CreateYap(ctx, other, yaps.KindTask, task("warm"), "", nil)
			require.NoError(t, err)

			// What a revocation does: lock the list row, revoke, commit.
			db, err := sql.Open("pgx", dsn)
			require.NoError(t, err)
			defer db.Close()
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			var pid int
			require.NoError(t, tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			_, err = tx.ExecContext(ctx, `SELECT 1 FROM lists WHERE ref = $1 FOR UPDATE`, owner.List.Ref)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, `UPDATE permissions SET revoked_at = 1 WHERE id = $1`, ed.Permission.ID)
			require.NoError(t, err)

			before := yaps.PreparedWrites(e.svc)
			done, otherDone := make(chan error, 1), make(chan error, 1)
			go func() {
				_, _, err := e.svc.CreateYap(ctx, ed, yaps.KindTask, task("after the revocation"), "", nil)
				done <- err
			}()
			// Wait until the write is blocked by the revocation's lock.
			require.Eventually(t, func() bool {
				var n int
				err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
				return err == nil && n > 0
			}, 10*time.Second, 5*time.Millisecond)
			if batched {
				// Another list's write queues behind the blocked pipeline
				// and runs in the next batch; it must be unaffected.
				go func() {
					_, _, err := e.svc.CreateYap(ctx, other, yaps.KindTask, task("unaffected"), "", nil)
					otherDone <- err
				}()
			}
			require.NoError(t, tx.Commit())
			requireCode(t, yaps.EUNAUTHORIZED, <-done)
			if batched {
				require.NoError(t, <-otherDone)
			}
			require.Zero(t, yaps.PreparedWrites(e.svc)-before-map[bool]int64{false: 0, true: 1}[batched],
				"the refused write was not applied by the prepared path")
			page, err := e.svc.ListYaps(ctx, owner, "", 50, false)
			require.NoError(t, err)
			require.Len(t, page.Yaps, 1, "only the warm-up yap")
		})
	}
}
