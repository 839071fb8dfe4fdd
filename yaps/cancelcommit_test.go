package yaps_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// cancelAtCommit is a store whose Update, once armed, cancels the caller's
// context after fn succeeded, before the store's own last statements and
// its commit, and waits a moment (database/sql's rollback of a cancelled
// transaction runs meanwhile). Embedding yaps.Store hides the optional
// interfaces, so every write goes through Update.
type cancelAtCommit struct {
	yaps.Store
	cancel atomic.Pointer[context.CancelFunc]
}

func (c *cancelAtCommit) arm(ctx context.Context) context.Context {
	cctx, cancel := context.WithCancel(ctx)
	c.cancel.Store(&cancel)
	return cctx
}

func (c *cancelAtCommit) Update(ctx context.Context, ref string, fn func(tx yaps.Tx) error) error {
	return c.Store.Update(ctx, ref, func(tx yaps.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if cancel := c.cancel.Swap(nil); cancel != nil {
			(*cancel)()
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
}

// A client that goes away as its write commits gets either the write, or
// the context's error (the edges' "client went away", not a 500) with
// nothing stored and nothing of it left in the service's cache: no reader
// sees a write the store does not hold.
func TestCancelledCommit(t *testing.T) {
	t.Parallel()
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			st := &cancelAtCommit{Store: k.open(t)}
			e := newEnvOn(t, st)
			owner := e.list()
			y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("Milk"), "", nil)
			require.NoError(t, err)

			for _, tc := range []struct {
				name   string
				write  func(ctx context.Context) error
				stored func() bool // read back through the service
			}{
				{"create yap", func(ctx context.Context) error {
					_, _, err := e.svc.CreateYap(ctx, owner, yaps.KindTask, task("Eggs"), "", nil)
					return err
				}, func() bool {
					page, err := e.svc.ListYaps(e.ctx, owner, "", 10, false)
					require.NoError(t, err)
					return len(page.Yaps) == 2
				}},
				{"update yap", func(ctx context.Context) error {
					_, err := e.svc.UpdateYap(ctx, owner, y.ID, yaps.YapFields{Content: yaps.Set("Oat milk")}, "")
					return err
				}, func() bool {
					got, err := e.svc.GetYap(e.ctx, owner, y.ID)
					require.NoError(t, err)
					return got.Content == "Oat milk"
				}},
				{"sync update", func(ctx context.Context) error {
					u := clientUpdate(t, owner, docOf(t, e, owner), nil, func(d *yjs.Doc) {
						text(t, ymap(t, d, y.ID), "content").Insert(0, "Cold ", nil)
					})
					return e.svc.ApplyUpdate(ctx, owner, u.Update, nil)
				}, func() bool {
					got, err := e.svc.GetYap(e.ctx, owner, y.ID)
					require.NoError(t, err)
					return strings.HasPrefix(got.Content, "Cold ")
				}},
				{"issue permission", func(ctx context.Context) error {
					_, err := e.svc.IssuePermission(ctx, owner, yaps.RoleViewer, "late", nil)
					return err
				}, func() bool {
					ps, err := e.svc.Permissions(e.ctx, owner)
					require.NoError(t, err)
					for _, p := range ps {
						if p.Label == "late" {
							return true
						}
					}
					return false
				}},
			} {
				err := tc.write(st.arm(e.ctx))
				if err != nil {
					require.ErrorIs(t, err, context.Canceled, "%s: %v", tc.name, err)
					require.False(t, tc.stored(), "%s: failed, yet served", tc.name)
				} else {
					require.True(t, tc.stored(), "%s: succeeded, yet not served", tc.name)
				}
				require.Empty(t, yaps.ViewMatchesDoc(e.svc, owner.List.Ref), tc.name)
			}
			// The service's document is the store's, as a fresh service
			// loads it.
			require.Equal(t, docOf(t, newEnvOn(t, st), owner).ToJSON(), docOf(t, e, owner).ToJSON())
		})
	}
}
