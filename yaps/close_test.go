package yaps_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/internal/testlog"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// stuckStore hangs in one kind of call until its context ends, as a
// database that stopped answering would.
type stuckStore struct {
	yaps.Store
	call    string // "CompactDoc", "DeletedYapsBefore" or "ListVersions"
	started chan struct{}
}

// stuck reports whether call is the one that hangs, and if so hangs.
func (s *stuckStore) stuck(ctx context.Context, call string) (bool, error) {
	if call != s.call {
		return false, nil
	}
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return true, ctx.Err()
}

func (s *stuckStore) CompactDoc(ctx context.Context, ref string, seq int64, state []byte) error {
	if ok, err := s.stuck(ctx, "CompactDoc"); ok {
		return err
	}
	return s.Store.CompactDoc(ctx, ref, seq, state)
}

func (s *stuckStore) DeletedYapsBefore(ctx context.Context, t time.Time, limit int) ([]yaps.YapKey, error) {
	if ok, err := s.stuck(ctx, "DeletedYapsBefore"); ok {
		return nil, err
	}
	return s.Store.DeletedYapsBefore(ctx, t, limit)
}

func (s *stuckStore) ListVersions(ctx context.Context, refs []string) (map[string]yaps.ListVersion, error) {
	if ok, err := s.stuck(ctx, "ListVersions"); ok {
		return nil, err
	}
	return s.Store.ListVersions(ctx, refs)
}

// TestCloseCancelsBackgroundWork checks that Close cancels background work
// waiting on the store, instead of waiting (a background compaction used
// to get a minute of its own), and that the cancelled work logs nothing.
func TestCloseCancelsBackgroundWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		call string
		cfg  func(*yaps.Config)
	}{
		{"CompactDoc", func(c *yaps.Config) { c.CompactAfter = 1 }},
		{"DeletedYapsBefore", func(c *yaps.Config) { c.PurgeInterval = 10 * time.Millisecond }},
		{"ListVersions", func(c *yaps.Config) { c.PollInterval = 10 * time.Millisecond }},
	} {
		t.Run(tc.call, func(t *testing.T) {
			t.Parallel()
			st := &stuckStore{Store: memstore.New(), call: tc.call, started: make(chan struct{}, 1)}
			var logs testlog.Buffer
			e := newEnvOn(t, st, tc.cfg, func(c *yaps.Config) {
				c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			})
			owner := e.list()
			t.Cleanup(e.svc.Pin(owner.List.Ref))
			for range 3 {
				_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("x"), "", nil)
				require.NoError(t, err)
			}
			select {
			case <-st.started:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s was not called", tc.call)
			}
			start := time.Now()
			require.NoError(t, e.svc.Close())
			require.Less(t, time.Since(start), 5*time.Second, "Close waited for %s", tc.call)
			require.Empty(t, logs.String())
		})
	}
}
