package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	limiter "github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/yaps-dev/yaps/yaps"
)

// Limiter implements yaps.Limiter with fixed windows kept in a
// github.com/ulule/limiter/v3 store (memory, or Redis when configured).
// It is safe for concurrent use.
type Limiter struct {
	cfg     Config
	store   limiter.Store
	mem     *memStore     // the store when it is in memory, else nil
	rdb     *redis.Client // nil with the memory store
	limits  map[yaps.LimitGroup]map[yaps.LimitClass][]compiled
	breaker breaker
	now     func() time.Time
}

var _ yaps.Limiter = (*Limiter)(nil)

// compiled is a window with its ulule rate and the key part naming it.
type compiled struct {
	rate limiter.Rate
	tag  string // GROUP:CLASS:PERIOD
}

// New builds a Limiter from cfg (after cfg.WithDefaults()). With cfg.Redis
// set it connects to Redis and fails if Redis does not answer within
// cfg.RedisTimeout. With cfg.Disabled it returns a Limiter that allows
// everything. The in-memory store runs a cleaner goroutine until Close
// (or until the Limiter is garbage collected).
func New(cfg Config) (*Limiter, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Limiter{cfg: cfg, now: time.Now}
	l.breaker.coolDown = cfg.BreakerCoolDown
	if cfg.Disabled {
		return l, nil
	}
	l.limits = map[yaps.LimitGroup]map[yaps.LimitClass][]compiled{}
	for g, classes := range cfg.Limits {
		l.limits[g] = map[yaps.LimitClass][]compiled{}
		for cl, ws := range classes {
			ws = slices.Clone(ws)
			slices.SortFunc(ws, func(a, b Window) int { return int(a.Period - b.Period) })
			cs := make([]compiled, len(ws))
			for i, w := range ws {
				cs[i] = compiled{
					rate: limiter.Rate{Limit: w.Limit, Period: w.Period},
					tag:  string(g) + ":" + string(cl) + ":" + strconv.FormatInt(w.Period.Milliseconds(), 10) + "ms",
				}
			}
			l.limits[g][cl] = cs
		}
	}

	opts := limiter.StoreOptions{Prefix: cfg.KeyPrefix, CleanUpInterval: cfg.CleanUpInterval}
	if cfg.Redis == "" {
		l.mem = newMemStore(cfg.KeyPrefix, cfg.CleanUpInterval)
		l.store = l.mem
		// A host that never calls Close still gets the cleaner stopped
		// once the Limiter is unreachable (as ulule's store does).
		runtime.AddCleanup(l, (*memStore).halt, l.mem)
		return l, nil
	}
	ropts, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return nil, badRedisURL(cfg.Redis, err)
	}
	if ropts.DialTimeout == 0 || ropts.DialTimeout > cfg.RedisTimeout {
		ropts.DialTimeout = cfg.RedisTimeout
	}
	// Without this go-redis ignores context deadlines on the socket and
	// waits for its own read/write timeouts (seconds), so CallTimeout
	// would not bound a hung Redis.
	ropts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(ropts)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RedisTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("ratelimit: Redis at %s unreachable: %w", ropts.Addr, err)
	}
	store, err := redisstore.NewStoreWithOptions(rdb, opts)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("ratelimit: Redis store: %w", err)
	}
	l.store, l.rdb = store, rdb
	return l, nil
}

// Close releases everything the Limiter holds: the Redis connection pool,
// or the memory store's cleaner goroutine (stopped before Close returns).
// The Limiter must not be used afterwards.
func (l *Limiter) Close() error {
	if l.mem != nil {
		l.mem.close()
	}
	if l.rdb != nil {
		return l.rdb.Close()
	}
	return nil
}

// Config returns the effective configuration (defaults applied).
func (l *Limiter) Config() Config { return l.cfg.WithDefaults() }

// Take counts one request for key in every window of group and class and
// returns the state of the tightest window:
//
//   - allowed: the window with the fewest remaining requests (on a tie, the
//     one resetting last);
//   - rejected (some window is full): among the full windows, the one
//     resetting last, with Remaining 0 and RetryAfter the whole seconds
//     until it resets (at least 1s).
//
// A rejected request consumes no budget: its count is taken back from every
// window, so a client that keeps retrying against a full short window does
// not also drain its long window. Reset is never before the window's
// reset (ulule counts in whole seconds: it is rounded up, but never past
// now plus the window), so a client waiting until Reset is never early.
//
// The store work is bounded by Config.CallTimeout. When the store fails,
// Take returns the error once and then, for Config.BreakerCoolDown, allows
// every request at once without counting it (the result of
// yaps.Unlimited, and no error); see Config.BreakerCoolDown.
func (l *Limiter) Take(ctx context.Context, group yaps.LimitGroup, class yaps.LimitClass, key string) (yaps.LimitResult, error) {
	if l.cfg.Disabled {
		return yaps.Unlimited{}.Take(ctx, group, class, key)
	}
	ws, ok := l.limits[group][class]
	if !ok {
		return yaps.LimitResult{}, fmt.Errorf("ratelimit: unknown group/class %q/%q", group, class)
	}
	if err := ctx.Err(); err != nil {
		return yaps.LimitResult{}, err
	}
	tok, use := l.breaker.enter(l.now())
	if !use {
		return yaps.Unlimited{}.Take(ctx, group, class, key)
	}
	res, err := l.take(ctx, ws, key)
	switch {
	case err == nil:
		l.breaker.succeeded(tok)
		return res, nil
	case ctx.Err() != nil: // the caller gave up: no verdict on the store
		l.breaker.abandoned(tok)
		return yaps.LimitResult{}, fmt.Errorf("ratelimit: %w", err)
	case !l.breaker.failed(tok, l.now()):
		// Another Take already reported the failure and opened the breaker.
		return yaps.Unlimited{}.Take(ctx, group, class, key)
	case l.breaker.coolDown > 0:
		return yaps.LimitResult{}, fmt.Errorf("ratelimit: %w (store skipped for %s: requests allowed uncounted)", err, l.breaker.coolDown)
	default:
		return yaps.LimitResult{}, fmt.Errorf("ratelimit: %w", err)
	}
}

// take does Take's store work, bounded by CallTimeout.
func (l *Limiter) take(ctx context.Context, ws []compiled, key string) (yaps.LimitResult, error) {
	callCtx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	defer cancel()
	states := make([]limiter.Context, 0, len(ws))
	rejected := false
	var err error
	for _, w := range ws {
		var st limiter.Context
		st, err = l.store.Increment(callCtx, w.tag+":"+key, 1, w.rate)
		if err != nil {
			break
		}
		states = append(states, st)
		rejected = rejected || st.Reached
	}
	if len(states) > 0 && (err != nil || rejected) {
		// Give back what this request counted. Done without the caller's
		// cancellation so a cancelled request still leaves counts right,
		// but bounded by its own CallTimeout.
		// Not atomic with the increments: a concurrent request may briefly
		// see one extra count (it errs towards limiting, never over-allows).
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CallTimeout)
		defer cancel()
		for i := range states {
			_, _ = l.store.Increment(bg, ws[i].tag+":"+key, -1, ws[i].rate)
		}
	}
	if err != nil {
		return yaps.LimitResult{}, err
	}

	now := l.now()
	best := -1
	for i, st := range states {
		if rejected != st.Reached {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := states[best]
		switch {
		case rejected && st.Reset > b.Reset:
			best = i
		case !rejected && (st.Remaining < b.Remaining || st.Remaining == b.Remaining && st.Reset > b.Reset):
			best = i
		}
	}
	st := states[best]
	// ulule reports the reset in whole seconds, truncated: round up. The
	// window began at or before now, so it also ends by now+period, which
	// is the tighter bound when it began within the last second.
	reset := time.Unix(st.Reset+1, 0)
	if end := now.Add(ws[best].rate.Period); reset.After(end) {
		reset = end
	}
	res := yaps.LimitResult{
		Allowed:   !rejected,
		Limit:     st.Limit,
		Remaining: st.Remaining,
		Reset:     reset,
	}
	if rejected {
		res.Remaining = 0
		res.RetryAfter = retryAfter(res.Reset.Sub(now))
	}
	return res, nil
}

// retryAfter rounds d up to whole seconds, at least one.
func retryAfter(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second * time.Second
	return max(s, time.Second)
}

// badRedisURL describes a Redis URL that go-redis refused, without the
// password: url.Parse's error quotes the raw URL, so only its cause is
// kept, and the URL is shown with its user information hidden. go-redis's
// own errors name the part at fault, never the user information.
func badRedisURL(raw string, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return fmt.Errorf("ratelimit: bad Redis URL %q: %s", redactURL(raw), err)
}

// redactURL hides everything between "//" (or the start, without one)
// and the last "@" of raw: the user name and password. It works on URLs
// that do not parse, where url.URL.Redacted cannot be used.
func redactURL(raw string) string {
	j := strings.LastIndex(raw, "@")
	if j < 0 {
		return raw
	}
	i := strings.Index(raw, "//") + 2
	if i < 2 || i > j {
		i = 0
	}
	return raw[:i] + "xxxxx" + raw[j:]
}
