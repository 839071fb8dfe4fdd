package ratelimit

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// Window is one fixed window of a limit: at most Limit requests per Period.
type Window struct {
	// Limit is the number of requests allowed in one period. Must be at
	// least 1.
	Limit int64
	// Period is the length of the window. Must be at least one second
	// (the rate-limit headers carry whole seconds), at most MaxPeriod, and
	// a whole number of milliseconds (the unit of the counter keys and of
	// Redis expiries).
	Period time.Duration
}

// MaxPeriod is the longest window period: 36,500 days (100 years). The
// memory store computes now+period in nanoseconds since 1970, which
// overflows for periods of about 236 years or more from 2026 on (and
// fewer every year); the counter would then reset on every request and
// the limit would never apply. 100 years keeps a wide margin.
const MaxPeriod = maxPeriodDays * 24 * time.Hour

const maxPeriodDays = 36500

// String renders the window as "LIMIT/PERIOD", e.g. "20/1h0m0s".
func (w Window) String() string { return fmt.Sprintf("%d/%s", w.Limit, w.Period) }

// Limits gives the windows of every group and class. A request is allowed
// only when it fits every window of its group and class.
type Limits map[yaps.LimitGroup]map[yaps.LimitClass][]Window

// Groups lists the limit groups known to the package, in a stable order.
var Groups = []yaps.LimitGroup{yaps.LimitCreateList, yaps.LimitMutation, yaps.LimitRead}

// Classes lists the limit classes known to the package, in a stable order.
var Classes = []yaps.LimitClass{yaps.ClassAnonymous, yaps.ClassAuthenticated}

// DefaultLimits returns the reference limits of RULINGS R8 (a fresh copy
// each call):
//
//	create_list: anonymous 20/hour,   authenticated 100/hour
//	mutation:    anonymous 60/minute, authenticated 600/minute
//	read:        anonymous 600/minute, authenticated 6000/minute
func DefaultLimits() Limits {
	return Limits{
		yaps.LimitCreateList: {
			yaps.ClassAnonymous:     {{Limit: 20, Period: time.Hour}},
			yaps.ClassAuthenticated: {{Limit: 100, Period: time.Hour}},
		},
		yaps.LimitMutation: {
			yaps.ClassAnonymous:     {{Limit: 60, Period: time.Minute}},
			yaps.ClassAuthenticated: {{Limit: 600, Period: time.Minute}},
		},
		yaps.LimitRead: {
			yaps.ClassAnonymous:     {{Limit: 600, Period: time.Minute}},
			yaps.ClassAuthenticated: {{Limit: 6000, Period: time.Minute}},
		},
	}
}

// Default values of Config fields.
const (
	DefaultKeyPrefix       = "yaps:rl"
	DefaultRedisTimeout    = 5 * time.Second
	DefaultCleanUpInterval = 30 * time.Second
	DefaultCallTimeout     = 100 * time.Millisecond
	DefaultBreakerCoolDown = 5 * time.Second
)

// Config configures a Limiter. The zero value is valid: R8's defaults in a
// process-local memory store.
type Config struct {
	// Disabled switches every limit off: Take always allows, like
	// yaps.Unlimited (for benchmarks). Nothing else is used or checked.
	// Default false.
	Disabled bool

	// Limits holds the windows per group and class. A group or class that
	// is absent keeps its entry from DefaultLimits; a present entry
	// replaces the default's windows for that group and class entirely.
	// Default: DefaultLimits().
	Limits Limits

	// Redis is a Redis URL (redis://[user:pass@]host:port/db, or rediss://
	// for TLS). When set, counters live in Redis so every process using the
	// same Redis and KeyPrefix shares the limits; New fails if Redis is not
	// reachable. Default "" (in-memory store, local to the process).
	Redis string

	// KeyPrefix starts every counter key; the keys are
	// KeyPrefix:GROUP:CLASS:PERIOD:KEY. Different prefixes on one Redis
	// give independent limiters. Default DefaultKeyPrefix ("yaps:rl").
	KeyPrefix string

	// RedisTimeout bounds the connectivity check New makes against Redis
	// (and its dials). Take is bounded by CallTimeout instead.
	// Default DefaultRedisTimeout (5s).
	RedisTimeout time.Duration

	// CallTimeout bounds the store work of one Take, so a Redis that hangs
	// (accepts connections but never answers) costs a request at most
	// CallTimeout before Take fails and the caller lets the request through
	// (at most twice that when counts already taken must be given back).
	// Must exceed Redis's worst healthy round trip: a Take cut short fails
	// and trips the breaker. Default DefaultCallTimeout (100ms).
	CallTimeout time.Duration

	// BreakerCoolDown is how long Take leaves the store alone after a
	// failure. The Take that fails returns its error (the caller logs it
	// once); the Takes of the next BreakerCoolDown allow at once without
	// counting and without an error, returning what yaps.Unlimited returns
	// (Limit and Remaining -1, so no rate-limit headers are sent). After
	// the cool-down one Take probes the store while the others keep
	// skipping it: success resumes counting, failure returns its error and
	// starts another cool-down. So a store outage costs one error and one
	// CallTimeout per cool-down, not one per request. A Take cancelled by
	// its own context does not count as a failure. A negative value
	// switches the breaker off: every Take tries the store and returns its
	// error. Default DefaultBreakerCoolDown (5s).
	BreakerCoolDown time.Duration

	// CleanUpInterval is how often the memory store drops expired
	// counters, from a goroutine that Close stops. Default
	// DefaultCleanUpInterval (30s).
	CleanUpInterval time.Duration
}

// WithDefaults returns a copy of c with every unset field given its
// default and every missing group or class given its default windows.
// The returned Limits never share memory with c's.
func (c Config) WithDefaults() Config {
	out := c
	out.Limits = DefaultLimits()
	for g, classes := range c.Limits {
		if out.Limits[g] == nil {
			out.Limits[g] = map[yaps.LimitClass][]Window{}
		}
		for cl, ws := range classes {
			out.Limits[g][cl] = slices.Clone(ws)
		}
	}
	if out.KeyPrefix == "" {
		out.KeyPrefix = DefaultKeyPrefix
	}
	if out.RedisTimeout == 0 {
		out.RedisTimeout = DefaultRedisTimeout
	}
	if out.CleanUpInterval == 0 {
		out.CleanUpInterval = DefaultCleanUpInterval
	}
	if out.CallTimeout == 0 {
		out.CallTimeout = DefaultCallTimeout
	}
	if out.BreakerCoolDown == 0 {
		out.BreakerCoolDown = DefaultBreakerCoolDown
	}
	return out
}

// validate checks a config that went through WithDefaults.
func (c Config) validate() error {
	if c.Disabled {
		return nil
	}
	var errs []error
	for _, g := range slices.Sorted(maps.Keys(c.Limits)) {
		if !slices.Contains(Groups, g) {
			errs = append(errs, fmt.Errorf("unknown group %q (want one of %s)", g, joinNames(Groups)))
			continue
		}
		for _, cl := range slices.Sorted(maps.Keys(c.Limits[g])) {
			if !slices.Contains(Classes, cl) {
				errs = append(errs, fmt.Errorf("%s: unknown class %q (want one of %s)", g, cl, joinNames(Classes)))
				continue
			}
			if err := validateWindows(c.Limits[g][cl]); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", g, cl, err))
			}
		}
	}
	if c.KeyPrefix == "" {
		errs = append(errs, errors.New("KeyPrefix is empty"))
	}
	if c.RedisTimeout < 0 {
		errs = append(errs, fmt.Errorf("RedisTimeout %s is negative", c.RedisTimeout))
	}
	if c.CleanUpInterval < 0 {
		errs = append(errs, fmt.Errorf("CleanUpInterval %s is negative", c.CleanUpInterval))
	}
	if c.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("CallTimeout %s is negative", c.CallTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratelimit: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

func validateWindows(ws []Window) error {
	if len(ws) == 0 {
		return errors.New("no windows (give at least one, or switch all limits off)")
	}
	seen := map[time.Duration]bool{}
	var errs []error
	for i, w := range ws {
		if w.Limit <= 0 {
			errs = append(errs, fmt.Errorf("window %d: limit %d must be positive", i, w.Limit))
		}
		if w.Period <= 0 {
			errs = append(errs, fmt.Errorf("window %d: period %s must be positive", i, w.Period))
		} else if w.Period < time.Second {
			errs = append(errs, fmt.Errorf("window %d: period %s is shorter than 1s", i, w.Period))
		} else if w.Period > MaxPeriod {
			errs = append(errs, fmt.Errorf("window %d: period %s is longer than %dd (100 years)", i, w.Period, maxPeriodDays))
		} else if w.Period%time.Millisecond != 0 {
			// Periods equal in whole ms would share one counter key and
			// count every request twice.
			errs = append(errs, fmt.Errorf("window %d: period %s is not a whole number of milliseconds", i, w.Period))
		}
		if seen[w.Period] {
			errs = append(errs, fmt.Errorf("window %d: period %s appears twice", i, w.Period))
		}
		seen[w.Period] = true
	}
	return errors.Join(errs...)
}

func joinNames[T ~string](names []T) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
