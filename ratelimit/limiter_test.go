package ratelimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/yaps"
)

func newLimiter(t *testing.T, cfg ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// only sets the windows of one group and class.
func only(g yaps.LimitGroup, c yaps.LimitClass, ws ...ratelimit.Window) ratelimit.Config {
	return ratelimit.Config{Limits: ratelimit.Limits{g: {c: ws}}}
}

func take(t *testing.T, l yaps.Limiter, g yaps.LimitGroup, c yaps.LimitClass, key string) yaps.LimitResult {
	t.Helper()
	res, err := l.Take(context.Background(), g, c, key)
	require.NoError(t, err)
	return res
}

// sleepUntil sleeps until just after t0. ulule/limiter has no injectable
// clock, so the window tests sleep through one 1s window.
func sleepUntil(t0 time.Time) { time.Sleep(time.Until(t0) + 20*time.Millisecond) }

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg := ratelimit.Config{}.WithDefaults()
	require.Equal(t, ratelimit.DefaultKeyPrefix, cfg.KeyPrefix)
	require.Equal(t, ratelimit.DefaultRedisTimeout, cfg.RedisTimeout)
	require.Equal(t, ratelimit.DefaultCleanUpInterval, cfg.CleanUpInterval)
	require.Equal(t, ratelimit.DefaultCallTimeout, cfg.CallTimeout)
	require.Equal(t, 100*time.Millisecond, cfg.CallTimeout)
	require.Equal(t, ratelimit.DefaultBreakerCoolDown, cfg.BreakerCoolDown)
	require.Equal(t, 5*time.Second, cfg.BreakerCoolDown)
	require.Equal(t, -time.Second, ratelimit.Config{BreakerCoolDown: -time.Second}.WithDefaults().BreakerCoolDown, "negative switches the breaker off")
	require.Empty(t, cfg.Redis)
	require.False(t, cfg.Disabled)

	l := newLimiter(t, ratelimit.Config{})
	for _, tc := range []struct {
		group  yaps.LimitGroup
		class  yaps.LimitClass
		limit  int64
		period time.Duration
	}{
		{yaps.LimitCreateList, yaps.ClassAnonymous, 20, time.Hour},
		{yaps.LimitCreateList, yaps.ClassAuthenticated, 100, time.Hour},
		{yaps.LimitMutation, yaps.ClassAnonymous, 60, time.Minute},
		{yaps.LimitMutation, yaps.ClassAuthenticated, 600, time.Minute},
		{yaps.LimitRead, yaps.ClassAnonymous, 600, time.Minute},
		{yaps.LimitRead, yaps.ClassAuthenticated, 6000, time.Minute},
	} {
		t.Run(string(tc.group)+"/"+string(tc.class), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, []ratelimit.Window{{Limit: tc.limit, Period: tc.period}}, cfg.Limits[tc.group][tc.class])
			before := time.Now()
			res := take(t, l, tc.group, tc.class, "10.0.0.1")
			after := time.Now()
			require.True(t, res.Allowed)
			require.Equal(t, tc.limit, res.Limit)
			require.Equal(t, tc.limit-1, res.Remaining)
			require.Zero(t, res.RetryAfter)
			require.True(t, res.Reset.After(before.Add(tc.period-time.Second)), "reset %s", res.Reset)
			// Within the window, though ulule counts in whole seconds: a
			// fresh 60s window shows 60 seconds, not 61.
			require.False(t, res.Reset.After(after.Add(tc.period)), "reset %s", res.Reset)
		})
	}
}

func TestWithDefaultsMergesAndCopies(t *testing.T) {
	t.Parallel()
	mine := []ratelimit.Window{{Limit: 30, Period: time.Hour}, {Limit: 200, Period: 24 * time.Hour}}
	in := ratelimit.Config{Limits: ratelimit.Limits{yaps.LimitCreateList: {yaps.ClassAnonymous: mine}}}
	out := in.WithDefaults()
	def := ratelimit.DefaultLimits()
	require.Equal(t, mine, out.Limits[yaps.LimitCreateList][yaps.ClassAnonymous])
	require.Equal(t, def[yaps.LimitCreateList][yaps.ClassAuthenticated], out.Limits[yaps.LimitCreateList][yaps.ClassAuthenticated])
	require.Equal(t, def[yaps.LimitMutation], out.Limits[yaps.LimitMutation])
	require.Equal(t, def[yaps.LimitRead], out.Limits[yaps.LimitRead])

	out.Limits[yaps.LimitCreateList][yaps.ClassAnonymous][0].Limit = 1
	require.EqualValues(t, 30, mine[0].Limit, "WithDefaults must not share window slices")
	require.Len(t, in.Limits, 1, "WithDefaults must not modify its receiver")
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  ratelimit.Config
		want string
	}{
		{"unknown group", ratelimit.Config{Limits: ratelimit.Limits{"write": {yaps.ClassAnonymous: {{Limit: 1, Period: time.Second}}}}}, `unknown group "write"`},
		{"unknown class", only(yaps.LimitRead, "admin", ratelimit.Window{Limit: 1, Period: time.Second}), `read: unknown class "admin"`},
		{"zero limit", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 0, Period: time.Second}), "read.anonymous: window 0: limit 0 must be positive"},
		{"negative limit", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: -5, Period: time.Second}), "limit -5 must be positive"},
		{"zero period", only(yaps.LimitMutation, yaps.ClassAuthenticated, ratelimit.Window{Limit: 1}), "mutation.authenticated: window 0: period 0s must be positive"},
		{"sub-second period", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 1, Period: time.Millisecond}), "shorter than 1s"},
		{"duplicate period", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 1, Period: time.Minute}, ratelimit.Window{Limit: 2, Period: time.Minute}), "window 1: period 1m0s appears twice"},
		{"period too long", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 1, Period: ratelimit.MaxPeriod + time.Second}), "window 0: period 876000h0m1s is longer than 36500d (100 years)"},
		{"period of the longest duration", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 1, Period: math.MaxInt64}), "is longer than 36500d"},
		{"period not in whole ms", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 1, Period: time.Second + 400*time.Microsecond}), "window 0: period 1.0004s is not a whole number of milliseconds"},
		{"periods equal in ms", only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 4, Period: time.Second}, ratelimit.Window{Limit: 4, Period: time.Second + 400*time.Microsecond}), "window 1: period 1.0004s is not a whole number of milliseconds"},
		{"no windows", only(yaps.LimitRead, yaps.ClassAnonymous), "read.anonymous: no windows"},
		{"negative timeout", ratelimit.Config{RedisTimeout: -time.Second}, "RedisTimeout -1s is negative"},
		{"negative call timeout", ratelimit.Config{CallTimeout: -time.Millisecond}, "CallTimeout -1ms is negative"},
		{"bad redis url", ratelimit.Config{Redis: "http://example"}, "bad Redis URL"},
		{"bad redis port", ratelimit.Config{Redis: "redis://user:s3cret@127.0.0.1:notaport/0"}, `bad Redis URL "redis://xxxxx@127.0.0.1:notaport/0": invalid port ":notaport" after host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ratelimit.New(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// The longest period accepted still limits: the memory store's expiry
// (now+period in nanoseconds) must not overflow, or the counter would
// reset on every request. Sub-second parts in whole ms are fine.
func TestLongAndOddPeriodsLimit(t *testing.T) {
	t.Parallel()
	for _, period := range []time.Duration{ratelimit.MaxPeriod, 1500 * time.Millisecond, 90*time.Second + time.Millisecond} {
		t.Run(period.String(), func(t *testing.T) {
			t.Parallel()
			l := newLimiter(t, only(yaps.LimitRead, yaps.ClassAnonymous, ratelimit.Window{Limit: 2, Period: period}))
			var allowed []bool
			for range 5 {
				allowed = append(allowed, take(t, l, yaps.LimitRead, yaps.ClassAnonymous, "ip").Allowed)
			}
			require.Equal(t, []bool{true, true, false, false, false}, allowed)
		})
	}
}

func TestSingleWindow(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, only(yaps.LimitMutation, yaps.ClassAnonymous, ratelimit.Window{Limit: 3, Period: time.Hour}))
	for want := int64(2); want >= 0; want-- {
		res := take(t, l, yaps.LimitMutation, yaps.ClassAnonymous, "k")
		require.True(t, res.Allowed)
		require.EqualValues(t, 3, res.Limit)
		require.Equal(t, want, res.Remaining)
	}
	for range 3 {
		res := take(t, l, yaps.LimitMutation, yaps.ClassAnonymous, "k")
		require.False(t, res.Allowed)
		require.EqualValues(t, 3, res.Limit)
		require.Zero(t, res.Remaining)
		require.Greater(t, res.RetryAfter, 59*time.Minute)
		require.LessOrEqual(t, res.RetryAfter, time.Hour+2*time.Second)
		require.Zero(t, res.RetryAfter%time.Second, "RetryAfter is whole seconds")
	}
}

// The tightest window is reported: fewest remaining requests.
func TestTightestWindowReported(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, only(yaps.LimitRead, yaps.ClassAuthenticated,
		ratelimit.Window{Limit: 10, Period: time.Minute},
		ratelimit.Window{Limit: 3, Period: time.Hour}))
	res := take(t, l, yaps.LimitRead, yaps.ClassAuthenticated, "acct")
	require.True(t, res.Allowed)
	require.EqualValues(t, 3, res.Limit)
	require.EqualValues(t, 2, res.Remaining)
	require.Greater(t, time.Until(res.Reset), 59*time.Minute)
}

// "2 per second and 3 per hour": the hourly window trips once the
// per-second window has reset.
func TestMultiWindow(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, only(yaps.LimitCreateList, yaps.ClassAnonymous,
		ratelimit.Window{Limit: 2, Period: time.Second},
		ratelimit.Window{Limit: 3, Period: time.Hour}))
	const g, c, k = yaps.LimitCreateList, yaps.ClassAnonymous, "192.0.2.7"

	start := time.Now() // the 1s window opens with the first request
	require.True(t, take(t, l, g, c, k).Allowed)
	require.True(t, take(t, l, g, c, k).Allowed)
	res := take(t, l, g, c, k)
	require.False(t, res.Allowed, "the 1s window is full")
	require.EqualValues(t, 2, res.Limit)
	require.Zero(t, res.Remaining)
	require.GreaterOrEqual(t, res.RetryAfter, time.Second)
	require.LessOrEqual(t, res.RetryAfter, 2*time.Second)

	require.False(t, res.Reset.Before(start.Add(time.Second)), "Reset is never early")
	sleepUntil(start.Add(time.Second))
	res = take(t, l, g, c, k)
	require.True(t, res.Allowed, "the 1s window has reset")
	require.EqualValues(t, 3, res.Limit, "the hourly window is now the tightest")
	require.Zero(t, res.Remaining)

	res = take(t, l, g, c, k)
	require.False(t, res.Allowed, "the hourly window is full")
	require.EqualValues(t, 3, res.Limit)
	require.Zero(t, res.Remaining)
	require.Greater(t, res.RetryAfter, 59*time.Minute)
	require.LessOrEqual(t, res.RetryAfter, time.Hour, "never past the window")
}

// A rejected request gives its count back to every window.
func TestRejectedRequestsConsumeNothing(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, only(yaps.LimitMutation, yaps.ClassAnonymous,
		ratelimit.Window{Limit: 1, Period: time.Second},
		ratelimit.Window{Limit: 2, Period: time.Hour}))
	const g, c, k = yaps.LimitMutation, yaps.ClassAnonymous, "k"

	start := time.Now()
	require.True(t, take(t, l, g, c, k).Allowed)
	var res yaps.LimitResult
	for range 5 {
		res = take(t, l, g, c, k)
		require.False(t, res.Allowed)
		require.EqualValues(t, 1, res.Limit)
	}
	require.False(t, res.Reset.Before(start.Add(time.Second)), "Reset is never early")
	sleepUntil(start.Add(time.Second))
	res = take(t, l, g, c, k)
	require.True(t, res.Allowed, "five rejected requests must not have used the hourly budget")
	require.Zero(t, res.Remaining)
	res = take(t, l, g, c, k)
	require.False(t, res.Allowed)
	require.EqualValues(t, 2, res.Limit, "both full: the one resetting last is reported")
	// Both windows are full; the hourly one decides when to retry.
	require.Greater(t, res.RetryAfter, 59*time.Minute)
}

func TestKeysClassesAndGroupsAreIndependent(t *testing.T) {
	t.Parallel()
	one := []ratelimit.Window{{Limit: 1, Period: time.Hour}}
	l := newLimiter(t, ratelimit.Config{Limits: ratelimit.Limits{
		yaps.LimitMutation: {yaps.ClassAnonymous: one, yaps.ClassAuthenticated: one},
		yaps.LimitRead:     {yaps.ClassAnonymous: one, yaps.ClassAuthenticated: one},
	}})
	require.True(t, take(t, l, yaps.LimitMutation, yaps.ClassAnonymous, "a").Allowed)
	require.False(t, take(t, l, yaps.LimitMutation, yaps.ClassAnonymous, "a").Allowed)

	for _, tc := range []struct {
		name  string
		group yaps.LimitGroup
		class yaps.LimitClass
		key   string
	}{
		{"other key", yaps.LimitMutation, yaps.ClassAnonymous, "b"},
		{"other class", yaps.LimitMutation, yaps.ClassAuthenticated, "a"},
		{"other group", yaps.LimitRead, yaps.ClassAnonymous, "a"},
	} {
		require.True(t, take(t, l, tc.group, tc.class, tc.key).Allowed, tc.name)
	}
	require.False(t, take(t, l, yaps.LimitMutation, yaps.ClassAnonymous, "a").Allowed)
}

// Class separation with the default limits: an IP that used up the
// anonymous create_list budget can still act as authenticated.
func TestClassSeparationDefaults(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, ratelimit.Config{})
	for range 20 {
		require.True(t, take(t, l, yaps.LimitCreateList, yaps.ClassAnonymous, "ip").Allowed)
	}
	res := take(t, l, yaps.LimitCreateList, yaps.ClassAnonymous, "ip")
	require.False(t, res.Allowed)
	require.EqualValues(t, 20, res.Limit)
	res = take(t, l, yaps.LimitCreateList, yaps.ClassAuthenticated, "ip")
	require.True(t, res.Allowed)
	require.EqualValues(t, 100, res.Limit)
	require.EqualValues(t, 99, res.Remaining)
}

func TestConcurrentTakesNeverOverAllow(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, only(yaps.LimitRead, yaps.ClassAnonymous,
		ratelimit.Window{Limit: 10, Period: time.Hour},
		ratelimit.Window{Limit: 50, Period: 2 * time.Hour}))
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			res, err := l.Take(context.Background(), yaps.LimitRead, yaps.ClassAnonymous, "k")
			if err == nil && res.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 10, allowed.Load())
}

func TestTakeErrors(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, ratelimit.Config{})
	_, err := l.Take(context.Background(), "write", yaps.ClassAnonymous, "k")
	require.ErrorContains(t, err, "unknown group/class")
	_, err = l.Take(context.Background(), yaps.LimitRead, "admin", "k")
	require.ErrorContains(t, err, "unknown group/class")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = l.Take(ctx, yaps.LimitRead, yaps.ClassAnonymous, "k")
	require.ErrorIs(t, err, context.Canceled)
}

func TestDisabled(t *testing.T) {
	t.Parallel()
	// Disabled ignores everything else, even an unreachable Redis.
	l := newLimiter(t, ratelimit.Config{Disabled: true, Redis: "redis://127.0.0.1:1/0",
		Limits: ratelimit.Limits{yaps.LimitRead: {yaps.ClassAnonymous: {{Limit: 1, Period: time.Hour}}}}})
	for range 5 {
		res := take(t, l, yaps.LimitRead, yaps.ClassAnonymous, "k")
		require.Equal(t, yaps.LimitResult{Allowed: true, Limit: -1, Remaining: -1}, res)
	}
}

// A Redis URL go-redis refuses is described without its password, even
// when it does not parse (url.Parse's error quotes the whole URL).
func TestBadRedisURLHidesPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"redis://user:s3cret@127.0.0.1:notaport/0",
		"redis://:s3cret@[::1/0",
		"redis://user:s3cr@t@127.0.0.1:notaport/0",
		"rediss://user:s3cret@127.0.0.1:6379/notadb",
		"redis://user:s3cret@127.0.0.1:6379/0?dial_timeout=soon",
		"http://user:s3cret@127.0.0.1:6379/0",
		"user:s3cret@127.0.0.1:6379",
	} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			_, err := ratelimit.New(ratelimit.Config{Redis: u})
			require.ErrorContains(t, err, "bad Redis URL")
			require.NotContains(t, err.Error(), "s3cr")
		})
	}
}

func TestRedisUnreachableFailsFast(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := ratelimit.New(ratelimit.Config{Redis: "redis://127.0.0.1:1/0", RedisTimeout: time.Second})
	require.ErrorContains(t, err, "unreachable")
	require.Less(t, time.Since(start), 3*time.Second)
}

// Two Limiters on one Redis share their counters. Needs YAPS_TEST_REDIS,
// e.g. redis://127.0.0.1:6379/0.
func TestRedisSharedBetweenLimiters(t *testing.T) {
	t.Parallel()
	url := os.Getenv("YAPS_TEST_REDIS")
	if url == "" {
		t.Skip("YAPS_TEST_REDIS is unset (e.g. redis://127.0.0.1:6379/0): skipping the Redis store test")
	}
	prefix := "yaps:rltest:" + randomHex(t)
	t.Cleanup(func() { deleteKeys(t, url, prefix) })

	cfg := only(yaps.LimitMutation, yaps.ClassAuthenticated,
		ratelimit.Window{Limit: 1, Period: time.Second},
		ratelimit.Window{Limit: 2, Period: time.Minute})
	cfg.Redis = url
	cfg.KeyPrefix = prefix
	a := newLimiter(t, cfg)
	b := newLimiter(t, cfg)
	const g, c = yaps.LimitMutation, yaps.ClassAuthenticated

	start := time.Now()
	res := take(t, a, g, c, "acct")
	require.True(t, res.Allowed)
	require.Zero(t, res.Remaining)
	res = take(t, b, g, c, "acct")
	require.False(t, res.Allowed, "b sees a's request")
	require.EqualValues(t, 1, res.Limit)
	require.GreaterOrEqual(t, res.RetryAfter, time.Second)
	require.LessOrEqual(t, res.RetryAfter, 2*time.Second)
	require.True(t, take(t, b, g, c, "other").Allowed, "keys are independent")

	require.False(t, res.Reset.Before(start.Add(time.Second)), "Reset is never early")
	sleepUntil(start.Add(time.Second))
	res = take(t, b, g, c, "acct")
	require.True(t, res.Allowed, "b's rejected request consumed nothing")
	require.EqualValues(t, 2, res.Limit, "both windows at 0: the minute window resets last")
	require.Zero(t, res.Remaining)
	res = take(t, a, g, c, "acct")
	require.False(t, res.Allowed)
	require.EqualValues(t, 2, res.Limit)
	require.Greater(t, res.RetryAfter, 55*time.Second)
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func deleteKeys(t *testing.T, url, prefix string) {
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+":*").Result()
	require.NoError(t, err)
	if len(keys) > 0 {
		require.NoError(t, rdb.Del(ctx, keys...).Err())
	}
}
