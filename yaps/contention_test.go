package yaps_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Two processes (two services, each with its own pool) writing one list on
// one Postgres schema at once, HTTP and sync, with and without compactions
// running all the time on both, never answer a fault: every write
// succeeds, and both processes end in step with the store. (This never
// exhausted writeAs's reloads, even before they ended under the list's
// lock: TestCompactionRaceReload forces the timing that does.) Runs when
// YAPS_TEST_POSTGRES is set.
func TestPostgresContention(t *testing.T) {
	t.Parallel()
	storetest.PostgresDSN(t) // skips early when unconfigured
	for _, tc := range []struct {
		name    string
		compact bool // each process compacts the list all the time
	}{
		{"writes", false},
		{"writes and compactions", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			svcs, actors := postgresProcesses(t, yaps.Config{})
			ref := actors[0].List.Ref
			y, _, err := svcs[0].CreateYap(ctx, actors[0], yaps.KindTask, task("shared"), "", nil)
			require.NoError(t, err)

			const writers, each = 3, 20 // per process
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				faults []error
			)
			for i, s := range svcs {
				a := actors[i]
				for w := range writers {
					wg.Go(func() {
						for j := range each {
							var err error
							switch (w + j) % 3 {
							case 0:
								_, _, err = s.CreateYap(ctx, a, yaps.KindTask, task(fmt.Sprintf("p%d-%d-%d", i, w, j)), "", nil)
							case 1:
								_, err = s.UpdateYap(ctx, a, y.ID, yaps.YapFields{Content: yaps.Set(fmt.Sprintf("p%d-%d-%d", i, w, j))}, "")
							default:
								err = syncType(ctx, s, a, y.ID)
							}
							if err != nil {
								mu.Lock()
								faults = append(faults, err)
								mu.Unlock()
							}
						}
					})
				}
			}
			stop := make(chan struct{})
			var compactors sync.WaitGroup
			for _, s := range svcs {
				if !tc.compact {
					break
				}
				compactors.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := s.CompactNow(ctx, ref); err != nil {
							mu.Lock()
							faults = append(faults, fmt.Errorf("compaction: %w", err))
							mu.Unlock()
						}
						time.Sleep(time.Millisecond)
					}
				})
			}
			wg.Wait()
			close(stop)
			compactors.Wait()
			require.Empty(t, faults)
			// Both processes agree with the store.
			for i, s := range svcs {
				require.NoError(t, s.Refresh(ctx, ref))
				require.Empty(t, yaps.ViewMatchesDoc(s, ref), "process %d", i)
			}
		})
	}
}

// syncType inserts a character into yap id's content as a sync client of
// s would: from the document s serves.
func syncType(ctx context.Context, s *yaps.Service, a *yaps.Actor, id string) error {
	state, err := s.EncodeState(ctx, a.List.Ref, nil)
	if err != nil {
		return err
	}
	d := yjs.NewDoc()
	if err := d.ApplyUpdate(state, nil); err != nil {
		return err
	}
	sv := d.EncodeStateVector()
	v, _ := d.GetMap("yaps").Get(id)
	content, _ := v.(*yjs.Map).Get("content")
	content.(*yjs.Text).Insert(0, "s", nil)
	u, err := d.EncodeStateAsUpdate(sv)
	if err != nil {
		return err
	}
	return s.ApplyUpdate(ctx, a, u, nil)
}

// raceCompaction is the store of one process whose next races loads of a
// list document each let another process write the list and compact it
// before the load returns: the document loaded is behind the compacted
// state by the time the write's transaction reads the log. It is the
// worst timing two processes sharing a list can give, every time.
type raceCompaction struct {
	yaps.Store
	races atomic.Int32
	other func() error // a write and a compaction on the other process
}

func (r *raceCompaction) Doc(ctx context.Context, ref string, after int64) (*yaps.DocLog, error) {
	d, err := r.Store.Doc(ctx, ref, after)
	if err == nil && after == 0 && r.races.Add(-1) >= 0 {
		if err := r.other(); err != nil {
			return nil, err
		}
	}
	return d, err
}

// A write whose document another process's compaction leaves behind at
// every reload still succeeds: the last reload is made under the list's
// write lock, where no other process can write or compact. Before,
// writeAs gave up after three reloads with EINTERNAL (500).
func TestCompactionRaceReload(t *testing.T) {
	t.Parallel()
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			for _, races := range []int32{1, 3, 10} {
				st := k.open(t)
				b := newEnvOn(t, st)
				owner := b.list()
				y, _, err := b.svc.CreateYap(b.ctx, owner, yaps.KindTask, task("Milk"), "", nil)
				require.NoError(t, err)
				n := 0
				rc := &raceCompaction{Store: st, other: func() error {
					n++
					_, err := b.svc.UpdateYap(b.ctx, owner, y.ID, yaps.YapFields{Content: yaps.Set(fmt.Sprint("B", n))}, "")
					if err != nil {
						return err
					}
					return b.svc.CompactNow(b.ctx, owner.List.Ref)
				}}
				rc.races.Store(races)
				a := newEnvOn(t, rc)
				got, err := a.svc.UpdateYap(a.ctx, owner, y.ID, yaps.YapFields{Status: yaps.Set(yaps.StatusDone)}, "")
				require.NoError(t, err, "%d races", races)
				require.Equal(t, yaps.StatusDone, got.Status)
				require.Equal(t, fmt.Sprint("B", n), got.Content, "%d races: the write saw the other process's last one", races)
				require.NoError(t, b.svc.Refresh(b.ctx, owner.List.Ref))
				fromB, err := b.svc.GetYap(b.ctx, owner, y.ID)
				require.NoError(t, err)
				require.Equal(t, got, fromB)
			}
		})
	}
}
