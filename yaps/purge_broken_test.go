package yaps_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// TestPurgeGoesOnPastABrokenList: a list whose document does not load (a
// logged update that does not decode) keeps its own deleted yaps and makes
// Purge report the error, but every other list's expired yaps are purged,
// though the broken list's sort first (found by the store review of
// 2026-11-22: one such list stopped the purge for all).
func TestPurgeGoesOnPastABrokenList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	broken := e.list()
	var brokenIDs []string
	for range 3 {
		y, _, err := e.svc.CreateYap(e.ctx, broken, yaps.KindTask, task("old"), "", nil)
		require.NoError(t, err)
		require.NoError(t, e.svc.DeleteYap(e.ctx, broken, y.ID, ""))
		brokenIDs = append(brokenIDs, y.ID)
	}
	e.clock.Advance(time.Hour)
	// More than one batch of the store's answers (yaps.PurgeBatch).
	good := e.list()
	var goodIDs []string
	for range yaps.PurgeBatch + 10 {
		y, _, err := e.svc.CreateYap(e.ctx, good, yaps.KindTask, task("newer"), "", nil)
		require.NoError(t, err)
		require.NoError(t, e.svc.DeleteYap(e.ctx, good, y.ID, ""))
		goodIDs = append(goodIDs, y.ID)
	}

	require.NoError(t, e.store.Update(e.ctx, broken.List.Ref, func(tx yaps.Tx) error {
		_, err := tx.AppendUpdate([]byte{0xff, 0xff, 0xff})
		return err
	}))
	e.clock.Advance(31 * 24 * time.Hour)
	p2 := e.secondProcess() // loads documents from the store
	n, err := p2.Purge(e.ctx)
	require.Error(t, err, "the broken list is reported")
	require.Equal(t, len(goodIDs), n)
	for _, id := range goodIDs {
		_, err = e.store.Yap(e.ctx, good.List.Ref, id)
		requireCode(t, yaps.ENOTFOUND, err)
	}
	for _, id := range brokenIDs {
		_, err = e.store.Yap(e.ctx, broken.List.Ref, id)
		require.NoError(t, err, "kept until its list loads again")
	}
}
