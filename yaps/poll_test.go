package yaps_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// pollCounter counts the store reads the poller makes.
type pollCounter struct {
	yaps.Store
	docs, perms, versions atomic.Int64
}

func (c *pollCounter) Doc(ctx context.Context, ref string, afterSeq int64) (*yaps.DocLog, error) {
	c.docs.Add(1)
	return c.Store.Doc(ctx, ref, afterSeq)
}

func (c *pollCounter) Permissions(ctx context.Context, ref string) ([]*yaps.Permission, error) {
	c.perms.Add(1)
	return c.Store.Permissions(ctx, ref)
}

func (c *pollCounter) ListVersions(ctx context.Context, refs []string) (map[string]yaps.ListVersion, error) {
	c.versions.Add(1)
	return c.Store.ListVersions(ctx, refs)
}

// reset returns the counts of Doc, Permissions and ListVersions calls
// since the last reset.
func (c *pollCounter) reset() [3]int64 {
	return [3]int64{c.docs.Swap(0), c.perms.Swap(0), c.versions.Swap(0)}
}

// TestPollReadsOnlyChangedLists checks what one poller tick costs: with
// nothing changed, or only this process's own writes, a single
// ListVersions call for every watched list (it used to read each list's
// document and permissions, so idle sync rooms cost CPU in proportion to
// their number); after another process's write, revocation and owner
// rotation, the document or permissions of just those lists, with the
// same events as before.
func TestPollReadsOnlyChangedLists(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st := &pollCounter{Store: sk.open(t)}
			e := newEnvOn(t, st, func(c *yaps.Config) { c.PollInterval = -1 })
			owners := make([]*yaps.Actor, 20)
			for i := range owners {
				owners[i] = e.list()
				t.Cleanup(e.svc.Pin(owners[i].List.Ref))
			}
			viewer := e.actor(owners[1], yaps.RoleViewer)
			var (
				mu     sync.Mutex
				events []yaps.Event
			)
			t.Cleanup(e.svc.Subscribe(func(ev yaps.Event) {
				mu.Lock()
				events = append(events, yaps.Event{Kind: ev.Kind, ListRef: ev.ListRef, PermissionID: ev.PermissionID})
				mu.Unlock()
			}))
			takeEvents := func() []yaps.Event {
				mu.Lock()
				defer mu.Unlock()
				out := events
				events = nil
				return out
			}

			yaps.Poll(e.svc, e.ctx) // the baseline: every list is read once
			_, _, err := e.svc.CreateYap(e.ctx, owners[2], yaps.KindTask, task("here"), "", nil)
			require.NoError(t, err)
			st.reset()
			takeEvents()
			for range 3 {
				yaps.Poll(e.svc, e.ctx)
			}
			require.Equal(t, [3]int64{0, 0, 3}, st.reset(), "Doc, Permissions, ListVersions calls of 3 idle ticks")
			require.Empty(t, takeEvents())

			p2 := e.secondProcess()
			_, _, err = p2.CreateYap(e.ctx, owners[0], yaps.KindTask, task("there"), "", nil)
			require.NoError(t, err)
			require.NoError(t, p2.RevokePermission(e.ctx, owners[1], viewer.Permission.ID))
			_, err = p2.RotateOwner(e.ctx, owners[3])
			require.NoError(t, err)
			st.reset()
			takeEvents()
			yaps.Poll(e.svc, e.ctx)
			require.Equal(t, [3]int64{1, 2, 1}, st.reset(), "Doc, Permissions, ListVersions calls")
			require.ElementsMatch(t, []yaps.Event{
				{Kind: yaps.EventDocUpdate, ListRef: owners[0].List.Ref},
				{Kind: yaps.EventCodeRevoked, ListRef: owners[1].List.Ref, PermissionID: viewer.Permission.ID},
				{Kind: yaps.EventCodeRevoked, ListRef: owners[3].List.Ref, PermissionID: owners[3].Permission.ID},
			}, takeEvents())

			yaps.Poll(e.svc, e.ctx)
			require.Equal(t, [3]int64{0, 0, 1}, st.reset(), "idle again")
		})
	}
}
