package bunstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/yaps"
)

// On the SQLite writer an edit that keeps a yap's times rewrites only its
// data; any other change, and a hint that no longer holds, takes the full
// upsert. Each step reads back what the API would serve.
func TestSQLiteYapDataRewrite(t *testing.T) {
	t.Parallel()
	_, s, ref := sqliteFileList(t)
	ctx := context.Background()
	put := func(y *yaps.Yap) {
		t.Helper()
		require.NoError(t, s.Update(ctx, ref, func(tx yaps.Tx) error { return tx.PutYap(y) }))
	}
	page := func(q yaps.YapQuery) []string {
		t.Helper()
		q.Limit = 10
		ys, err := s.Yaps(ctx, ref, q)
		require.NoError(t, err)
		var ids []string
		for _, y := range ys {
			ids = append(ids, y.ID+":"+y.Content)
		}
		return ids
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	a, b := benchYap("a", t0), benchYap("b", t0.Add(time.Second))
	put(a)
	put(b)

	a.Content = "edited" // same times: data only
	put(a)
	got, err := s.Yap(ctx, ref, "a")
	require.NoError(t, err)
	require.Equal(t, "edited", got.Content)

	a.CreatedAt = t0.Add(2 * time.Second) // moves a after b in the order
	put(a)
	require.Equal(t, []string{"b:" + b.Content, "a:edited"}, page(yaps.YapQuery{}))

	del := t0.Add(3 * time.Second)
	a.DeletedAt = &del
	put(a)
	require.Equal(t, []string{"b:" + b.Content}, page(yaps.YapQuery{}))
	require.Len(t, page(yaps.YapQuery{IncludeDeleted: true}), 2)

	// A stale hint (the row is stored with other times, as after a write
	// rolled back to its savepoint) still stores the new times.
	b.CreatedAt = t0.Add(5 * time.Second)
	bunstore.HintYapStored(t, s, ref, "b", b.CreatedAt, nil)
	put(b)
	got, err = s.Yap(ctx, ref, "b")
	require.NoError(t, err)
	require.True(t, got.CreatedAt.Equal(b.CreatedAt), "created %v, want %v", got.CreatedAt, b.CreatedAt)

	// A stale hint (the row is not stored) still stores the yap.
	c := benchYap("c", t0.Add(4*time.Second))
	bunstore.HintYapStored(t, s, ref, "c", c.CreatedAt, nil)
	put(c)
	got, err = s.Yap(ctx, ref, "c")
	require.NoError(t, err)
	require.Equal(t, c.Content, got.Content)
}
