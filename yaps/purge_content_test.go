package yaps_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// A purged yap's content leaves the stored document too, not only the
// projection and the live document: the purge compacts the lists it
// touched. Before, the updates that created the yap stayed in the log (and
// an older compacted state) until the list happened to be written enough
// to be compacted, which a quiet list never was.
func TestPurgedContentLeavesTheStore(t *testing.T) {
	t.Parallel()
	secret := []byte("SECRET-PAYLOAD-1234")
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, sk.open(t))
			stored := func(ref string) bool {
				t.Helper()
				dl, err := e.store.Doc(e.ctx, ref, 0)
				require.NoError(t, err)
				for _, b := range append([][]byte{dl.State}, dl.Updates...) {
					if bytes.Contains(b, secret) {
						return true
					}
				}
				return false
			}
			a := e.list()
			kept := e.list() // another list, its yap deleted later: kept
			y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(string(secret)), "", nil)
			require.NoError(t, err)
			_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("stays"), "", nil)
			require.NoError(t, err)
			y2, _, err := e.svc.CreateYap(e.ctx, kept, yaps.KindTask, task(string(secret)), "", nil)
			require.NoError(t, err)
			require.NoError(t, e.svc.DeleteYap(e.ctx, a, y.ID, ""))
			e.clock.Advance(20 * 24 * time.Hour)
			require.NoError(t, e.svc.DeleteYap(e.ctx, kept, y2.ID, ""))
			require.True(t, stored(a.List.Ref))

			e.clock.Advance(11 * 24 * time.Hour)
			n, err := e.svc.Purge(e.ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.False(t, stored(a.List.Ref), "the purged yap's content is still in the stored document")
			require.True(t, stored(kept.List.Ref), "a yap deleted 11 days ago lost its content")

			// The list is whole: its other yap, in the projection and in
			// the document a new reader loads.
			page, err := e.svc.ListYaps(e.ctx, a, "", 0, true)
			require.NoError(t, err)
			require.Len(t, page.Yaps, 1)
			require.Equal(t, "stays", page.Yaps[0].Content)
			other, err := e.secondProcess().ListYaps(e.ctx, a, "", 0, true)
			require.NoError(t, err)
			require.Len(t, other.Yaps, 1)
		})
	}
}
