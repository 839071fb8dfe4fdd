package yaps_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// opsRecorder is a store that records the prepared writes it is offered
// and declines them, so the service writes them through Update.
type opsRecorder struct {
	yaps.Store
	mu  sync.Mutex
	ops [][]yaps.PreparedOp
}

func (r *opsRecorder) WritePrepared(_ context.Context, p *yaps.PreparedWrite) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, p.Ops)
	return false, yaps.ErrPreparedUnsupported
}

// puts returns the yap puts of the last prepared write.
func (r *opsRecorder) puts(t *testing.T) []yaps.PreparedOp {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.ops)
	var puts []yaps.PreparedOp
	for _, op := range r.ops[len(r.ops)-1] {
		if op.PutYap != nil {
			puts = append(puts, op)
		}
	}
	return puts
}

// A prepared write marks the put of a yap the list's projection has no
// row for (created) as NewYap, and no other put.
func TestPreparedNewYap(t *testing.T) {
	t.Parallel()
	rec := &opsRecorder{Store: memstore.New()}
	e := newEnvOn(t, rec)
	owner := e.list()
	// The first write loads the document; write-ahead needs it cached.
	_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("zero")}, "", nil)
	require.NoError(t, err)

	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("one")}, "", nil)
	require.NoError(t, err)
	puts := rec.puts(t)
	require.Len(t, puts, 1)
	require.Equal(t, y.ID, puts[0].PutYap.ID)
	require.True(t, puts[0].NewYap, "created")

	_, err = e.svc.UpdateYap(e.ctx, owner, y.ID, yaps.YapFields{Body: yaps.Set("two")}, "")
	require.NoError(t, err)
	puts = rec.puts(t)
	require.Len(t, puts, 1)
	require.False(t, puts[0].NewYap, "edited: its row exists")

	got, err := e.store.Yap(e.ctx, owner.List.Ref, y.ID)
	require.NoError(t, err)
	require.Equal(t, "two", got.Body)
}

// The yap CreateYap returns is the caller's: the service keeps none of its
// memory, so a caller that changes it and then writes the change is not
// told that nothing changed (GetYap reads the store, not the view).
func TestCreateYapReturnsOwnCopy(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, memstore.New())
	owner := e.list()
	for i := range 2 { // the first write loads the document, the others write ahead
		y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("buy milk"), "", nil)
		require.NoError(t, err, i)
		y.Content = "changed"
		_, err = e.svc.UpdateYap(e.ctx, owner, y.ID, yaps.YapFields{Content: yaps.Set("changed")}, "")
		require.NoError(t, err)
		got, err := e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		require.Equal(t, "changed", got.Content, i)

		// So for the members held by pointer.
		n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{
			Title: yaps.Set("old"), Body: yaps.Set("b")}, "", nil)
		require.NoError(t, err, i)
		*n.Title = "new"
		_, err = e.svc.UpdateYap(e.ctx, owner, n.ID, yaps.YapFields{Title: yaps.Set("new")}, "")
		require.NoError(t, err)
		got, err = e.svc.GetYap(e.ctx, owner, n.ID)
		require.NoError(t, err)
		require.Equal(t, "new", *got.Title, i)
	}
}
