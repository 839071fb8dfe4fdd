package yaps_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, rep, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("Milk"), "", nil)
	require.NoError(t, err)
	require.Nil(t, rep)
	require.Equal(t, "Milk", y.Content)
	got, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, y, got)
	y2, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("Oat milk")}, yaps.YapETag(y))
	require.NoError(t, err)
	require.Equal(t, "Oat milk", y2.Content)
	page, err := e.svc.ListYaps(e.ctx, a, "", 0, false)
	require.NoError(t, err)
	require.Len(t, page.Yaps, 1)
	require.Equal(t, y2, page.Yaps[0])
	snap, etag, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	require.NotEmpty(t, snap)
	require.NotEmpty(t, etag)
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.EqualValues(t, 3, l.DocVersion)
}
