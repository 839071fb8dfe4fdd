package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	limiter "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/yaps-dev/yaps/yaps"
)

// Limiter implements yaps.Limiter with fixed windows kept in a
// github.com/ulule/limiter/v3 store (memory, or Redis when configured).
// It is safe for concurrent use.
type Limiter struct {
	cfg    Config
	store  limiter.Store
	rdb    *redis.Client // nil with the memory store
	limits map[yaps.LimitGroup]map[yaps.LimitClass][]compiled
	now    func() time.Time
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
// everything.
func New(cfg Config) (*Limiter, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Limiter{cfg: cfg, now: time.Now}
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
		l.store = memory.NewStoreWithOptions(opts)
		return l, nil
	}
	ropts, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: bad Redis URL: %w", err)
	}
	if ropts.DialTimeout == 0 || ropts.DialTimeout > cfg.RedisTimeout {
		ropts.DialTimeout = cfg.RedisTimeout
	}
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

// Close releases the Redis connection pool, if any. The Limiter must not
// be used afterwards.
func (l *Limiter) Close() error {
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
// not also drain its long window. Reset is rounded up to the next second,
// so a client waiting until Reset is never early.
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

	states := make([]limiter.Context, 0, len(ws))
	rejected := false
	var err error
	for _, w := range ws {
		var st limiter.Context
		st, err = l.store.Increment(ctx, w.tag+":"+key, 1, w.rate)
		if err != nil {
			break
		}
		states = append(states, st)
		rejected = rejected || st.Reached
	}
	if err != nil || rejected {
		// Give back what this request counted. Done without the caller's
		// cancellation so a cancelled request still leaves counts right.
		// Not atomic with the increments: a concurrent request may briefly
		// see one extra count (it errs towards limiting, never over-allows).
		bg := context.WithoutCancel(ctx)
		for i := range states {
			_, _ = l.store.Increment(bg, ws[i].tag+":"+key, -1, ws[i].rate)
		}
	}
	if err != nil {
		return yaps.LimitResult{}, fmt.Errorf("ratelimit: %w", err)
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
	res := yaps.LimitResult{
		Allowed:   !rejected,
		Limit:     st.Limit,
		Remaining: st.Remaining,
		// ulule reports the reset in whole seconds, truncated: round up.
		Reset: time.Unix(st.Reset+1, 0),
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
