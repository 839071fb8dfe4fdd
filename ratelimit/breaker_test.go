package ratelimit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	limiter "github.com/ulule/limiter/v3"

	"github.com/yaps-dev/yaps/yaps"
)

// TestBreaker walks the breaker through its states. Each step acts for
// one Take, named by slot: enter (want: use the store?), ok, fail (want:
// report the error?) or abandon.
func TestBreaker(t *testing.T) {
	t.Parallel()
	const cd = 10 * time.Second
	type step struct {
		at   time.Duration // since t0
		slot int
		op   string
		want bool
	}
	for _, tc := range []struct {
		name     string
		coolDown time.Duration
		steps    []step
	}{
		{"closed stays closed", cd, []step{
			{0, 0, "enter", true}, {0, 0, "ok", false}, {time.Second, 1, "enter", true},
		}},
		{"failure opens for the cool-down", cd, []step{
			{0, 0, "enter", true}, {0, 0, "fail", true},
			{time.Second, 1, "enter", false}, {cd - 1, 1, "enter", false},
		}},
		{"only the first failure reports", cd, []step{
			{0, 0, "enter", true}, {0, 1, "enter", true}, {0, 2, "enter", true},
			{time.Millisecond, 0, "fail", true}, {time.Millisecond, 1, "fail", false}, {time.Millisecond, 2, "fail", false},
		}},
		{"one probe after the cool-down, success closes", cd, []step{
			{0, 0, "enter", true}, {0, 0, "fail", true},
			{cd, 1, "enter", true}, {cd, 2, "enter", false}, {cd + time.Second, 2, "enter", false},
			{cd + time.Second, 1, "ok", false},
			{cd + time.Second, 2, "enter", true}, {cd + time.Second, 3, "enter", true},
		}},
		{"failed probe reports and reopens", cd, []step{
			{0, 0, "enter", true}, {0, 0, "fail", true},
			{cd, 1, "enter", true}, {cd, 1, "fail", true},
			{2*cd - 1, 2, "enter", false}, {2 * cd, 2, "enter", true},
		}},
		{"a late success does not close an open breaker", cd, []step{
			{0, 0, "enter", true}, {0, 1, "enter", true},
			{0, 0, "fail", true}, {0, 1, "ok", false},
			{time.Second, 2, "enter", false},
		}},
		{"abandoned probe hands over", cd, []step{
			{0, 0, "enter", true}, {0, 0, "fail", true},
			{cd, 1, "enter", true}, {cd, 1, "abandon", false},
			{cd, 2, "enter", true}, {cd, 3, "enter", false},
		}},
		{"abandoned while closed stays closed", cd, []step{
			{0, 0, "enter", true}, {0, 0, "abandon", false}, {0, 1, "enter", true},
		}},
		{"off: every failure reports, nothing is skipped", -1, []step{
			{0, 0, "enter", true}, {0, 0, "fail", true},
			{0, 1, "enter", true}, {0, 1, "fail", true}, {0, 2, "enter", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &breaker{coolDown: tc.coolDown}
			t0 := time.Unix(1_700_000_000, 0)
			toks := map[int]int64{}
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "enter":
					tok, use := b.enter(now)
					require.Equal(t, s.want, use, "step %d: enter of Take %d", i, s.slot)
					toks[s.slot] = tok
				case "ok":
					b.succeeded(toks[s.slot])
				case "fail":
					require.Equal(t, s.want, b.failed(toks[s.slot], now), "step %d: failure of Take %d reported", i, s.slot)
				case "abandon":
					b.abandoned(toks[s.slot])
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
			}
		})
	}
}

// hangStore is a limiter.Store whose Increment answers the first ok
// calls and then blocks until its context ends, like a Redis that hangs
// (but no longer than hangMax, so a missing deadline fails the test
// instead of hanging it).
type hangStore struct {
	limiter.Store
	ok    int64
	calls atomic.Int64
}

func (s *hangStore) Increment(ctx context.Context, key string, count int64, rate limiter.Rate) (limiter.Context, error) {
	if s.calls.Add(1) <= s.ok {
		return limiter.Context{Limit: rate.Limit, Remaining: rate.Limit - 1, Reset: time.Now().Add(rate.Period).Unix()}, nil
	}
	select {
	case <-ctx.Done():
		return limiter.Context{}, ctx.Err()
	case <-time.After(hangMax):
		return limiter.Context{}, errors.New("hung for hangMax: no deadline")
	}
}

const hangMax = 5 * time.Second

// newHanging returns a Limiter (two windows for read/anonymous) whose store
// hangs after ok answers.
func newHanging(t *testing.T, cfg Config, ok int64) (*Limiter, *hangStore) {
	t.Helper()
	cfg.Limits = Limits{yaps.LimitRead: {yaps.ClassAnonymous: {{Limit: 5, Period: time.Minute}, {Limit: 50, Period: time.Hour}}}}
	l, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	s := &hangStore{Store: l.store, ok: ok}
	l.store = s
	return l, s
}

// timedTake is one Take with its duration.
func timedTake(ctx context.Context, l *Limiter) (yaps.LimitResult, time.Duration, error) {
	start := time.Now()
	res, err := l.Take(ctx, yaps.LimitRead, yaps.ClassAnonymous, "k")
	return res, time.Since(start), err
}

// A hanging store costs a Take about CallTimeout (twice that when a count
// must be given back), then the breaker skips it.
func TestTakeBoundedOnHangingStore(t *testing.T) {
	t.Parallel()
	unlimited := yaps.LimitResult{Allowed: true, Limit: -1, Remaining: -1}
	for _, tc := range []struct {
		name string
		ok   int64 // Increments answered before the store hangs
	}{
		{"hangs at once", 0},
		{"hangs on the second window and the give-back", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, s := newHanging(t, Config{CallTimeout: 50 * time.Millisecond, BreakerCoolDown: time.Hour}, tc.ok)

			_, took, err := timedTake(context.Background(), l)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorContains(t, err, "store skipped for 1h0m0s")
			require.Less(t, took, 2*time.Second)

			calls := s.calls.Load()
			res, took, err := timedTake(context.Background(), l)
			require.NoError(t, err, "the breaker is open: allowed without the store")
			require.Equal(t, unlimited, res)
			require.Less(t, took, 2*time.Second)
			require.Equal(t, calls, s.calls.Load(), "the store was not asked")
		})
	}
}

// A Take cancelled by its caller is no verdict on the store: the breaker
// stays closed.
func TestTakeCancelledDoesNotTrip(t *testing.T) {
	t.Parallel()
	l, _ := newHanging(t, Config{CallTimeout: time.Minute, BreakerCoolDown: time.Hour}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, took, err := timedTake(ctx, l)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, 2*time.Second)
	tok, use := l.breaker.enter(time.Now())
	require.True(t, use, "the breaker is still closed")
	require.Zero(t, tok)
}

// With the breaker off every Take tries the store and fails.
func TestTakeBreakerOff(t *testing.T) {
	t.Parallel()
	l, s := newHanging(t, Config{CallTimeout: 20 * time.Millisecond, BreakerCoolDown: -1}, 0)
	for i := range 3 {
		_, took, err := timedTake(context.Background(), l)
		require.EqualValues(t, i+1, s.calls.Load(), "every Take asks the store")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotContains(t, err.Error(), "skipped")
		require.Less(t, took, 2*time.Second)
	}
}
