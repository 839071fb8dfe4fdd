package yaps_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// TestPanicInWriteDropsDocument: a panic inside a write (here the host's
// Config.Render, called in the transaction of an idempotent create) rolls
// the store back, and httpapi recovers it and serves on. The cached
// document must not keep the rolled-back edit: the next write would build
// on it, and the stored document would then lack a yap that was answered
// 201 and is in the projection (found by the store review of 2026-11-22).
func TestPanicInWriteDropsDocument(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := bunstore.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "y.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var panicOnce atomic.Bool
	panicOnce.Store(true)
	e := newEnvOn(t, st, func(c *yaps.Config) {
		c.Render = func(v any) ([]byte, error) {
			if panicOnce.CompareAndSwap(true, false) {
				panic("render failed")
			}
			return yaps.RenderJSON(v)
		}
	})
	owner := e.list()
	func() {
		defer func() { require.Equal(t, "render failed", recover()) }()
		_, _, _ = e.svc.CreateYap(ctx, owner, yaps.KindTask, task("rolled back"), "key-1", []byte("h"))
	}()
	y, _, err := e.svc.CreateYap(ctx, owner, yaps.KindTask, task("kept"), "", nil)
	require.NoError(t, err)

	// Another process reads the stored document: it holds the second yap
	// and not the first.
	state, err := e.secondProcess().EncodeState(ctx, owner.List.Ref, nil)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(state, nil))
	require.Equal(t, []string{y.ID}, d.GetMap("yaps").Keys())
	// So does this process's own view.
	page, err := e.svc.ListYaps(ctx, owner, "", 50, false)
	require.NoError(t, err)
	require.Len(t, page.Yaps, 1)
	require.Equal(t, "kept", page.Yaps[0].Content)
}
