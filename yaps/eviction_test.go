package yaps_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/internal/testlog"
	"github.com/yaps-dev/yaps/yaps"
)

// A list whose document is evicted as soon as each write releases it is
// still compacted: the background compaction a write schedules loads the
// document again. Before, it found the entry empty and did nothing, so the
// log grew without bound and every load replayed all of it. Two ways to
// get there: a memory budget every document exceeds, and more pinned
// rooms than the cache holds.
func TestCompactionAfterEviction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mod    func(*yaps.Config)
		pinned int
	}{
		{"memory", func(c *yaps.Config) { c.DocCacheMemory, c.DocCacheGrace = 1, -1 }, 0},
		{"pinned-rooms", func(c *yaps.Config) { c.DocCacheSize, c.DocCacheGrace = 2, -1 }, 2},
	} {
		for _, sk := range storeKinds {
			t.Run(tc.name+"/"+sk.name, func(t *testing.T) {
				t.Parallel()
				e := newEnvOn(t, sk.open(t), tc.mod, func(c *yaps.Config) { c.CompactAfter = 5 })
				for range tc.pinned {
					r := e.list()
					t.Cleanup(e.svc.Pin(r.List.Ref))
					require.NoError(t, e.svc.Refresh(e.ctx, r.List.Ref))
				}
				owners := []*yaps.Actor{e.list(), e.list()}
				for i := range 120 {
					_, _, err := e.svc.CreateYap(e.ctx, owners[i%2], yaps.KindTask, task(fmt.Sprint(i)), "", nil)
					require.NoError(t, err)
				}
				for _, a := range owners {
					deadline := time.Now().Add(10 * time.Second)
					for {
						n, err := e.store.UpdateCount(e.ctx, a.List.Ref)
						require.NoError(t, err)
						// 61 without a compaction; a compaction folds at
						// least the CompactAfter+1 updates that made the log
						// due (how many later ones depend on the log's size
						// against the state's, see Config.CompactAfter).
						if n <= 55 {
							break
						}
						require.True(t, time.Now().Before(deadline), "the log was not compacted: %d updates after the state", n)
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
	}
}

// A sync call marks its document watched (polled for other processes'
// writes) while it still holds it. Marked after the release, as before, a
// document evicted at once was never watched.
func TestWatchSurvivesEviction(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, openStore(t, "sqlite::memory:"), func(c *yaps.Config) {
		c.DocCacheMemory = 1
		c.DocCacheGrace = -1
		c.PollInterval = -1
	})
	a := e.list()
	_, err := e.svc.StateVector(e.ctx, a.List.Ref) // a sync client's step 1
	require.NoError(t, err)
	got := make(chan yaps.Event, 16)
	defer e.svc.Subscribe(func(ev yaps.Event) {
		if ev.Kind == yaps.EventDocUpdate {
			got <- ev
		}
	})()
	_, _, err = e.secondProcess().CreateYap(e.ctx, a, yaps.KindTask, task("from elsewhere"), "", nil)
	require.NoError(t, err)
	yaps.Poll(e.svc, e.ctx)
	select {
	case <-got:
	default:
		t.Fatal("the watched document was not refreshed: another process's write was not relayed")
	}
}

// The periodic compaction pass finding a background compaction of the
// same list still writing is not a failure, and logs nothing.
func TestPeriodicCompactionQuietWhileOneRuns(t *testing.T) {
	t.Parallel()
	st := &gatedCompactions{Store: openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "c.db")), release: make(chan struct{})}
	var logs testlog.Buffer
	e := newEnvOn(t, st, func(c *yaps.Config) {
		c.CompactAfter = 1
		c.PurgeInterval = 10 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
	})
	owner := e.list()
	t.Cleanup(e.svc.Pin(owner.List.Ref))
	for range 3 {
		_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("x"), "", nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return st.inFlight.Load() == 1 }, 10*time.Second, time.Millisecond)
	ticks := st.done.Load()
	time.Sleep(100 * time.Millisecond) // about ten periodic passes
	close(st.release)
	require.Eventually(t, func() bool { return st.done.Load() > ticks }, 10*time.Second, time.Millisecond)
	require.NotContains(t, logs.String(), "compaction failed")
}

// A list written over and over stays loaded past a memory bound it
// exceeds while it is in steady use (Config.DocCacheGrace), instead of
// being unloaded after each write and loaded again by the next; with no
// grace it is reloaded every time.
func TestDocCacheGraceKeepsBusyDocs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		reload bool
	}{
		{"default", 0, false},
		{"none", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *yaps.Config) {
				c.DocCacheMemory = 1 // every document is over it
				c.DocCacheGrace = tc.grace
				c.PollInterval = -1
			})
			a := e.list()
			const writes = 20
			loads := yaps.DocLoads(e.svc)
			for i := range writes {
				_, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(fmt.Sprint(i)), "", nil)
				require.NoError(t, err)
			}
			got := yaps.DocLoads(e.svc) - loads
			if tc.reload {
				require.GreaterOrEqual(t, got, int64(writes), "the document was not unloaded after each write")
			} else {
				require.LessOrEqual(t, got, int64(1), "the document was unloaded between writes")
			}
		})
	}
}
