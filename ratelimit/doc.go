// Package ratelimit implements yaps.Limiter (RULINGS R8) on top of
// github.com/ulule/limiter/v3.
//
// Requests fall into groups (create_list, mutation, read) and classes
// (anonymous, authenticated). Each group and class has one or more fixed
// windows, such as "30 per hour and 200 per day"; a request is allowed only
// if it fits every window, and Take reports the tightest one, ready for the
// X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset and
// Retry-After headers.
//
// Counters live in ulule's in-memory store by default, private to the
// process. With Config.Redis set they live in Redis under Config.KeyPrefix,
// so every process pointed at the same Redis shares the limits.
//
// A rejected request consumes no budget in any window: Take counts it in
// every window, sees one is full, and takes the count back. A client
// hammering a full short window therefore does not drain its long window
// too, and the counters reflect served requests only. The give-back is not
// atomic with the count, so under contention a concurrent request can be
// refused one request early; it never lets a window allow more than its
// limit, except that a give-back landing just after its window expired
// grants the next window one extra request.
//
// A failing store never blocks requests for long. Each Take's store work
// is bounded by Config.CallTimeout (100ms by default), so a Redis that
// hangs costs a request that long rather than go-redis's timeouts of
// seconds. The Take that fails returns its error (yaps.Service logs it and
// lets the request through); a circuit breaker then skips the store for
// Config.BreakerCoolDown (5s by default), allowing every request at once
// without counting and without an error, and afterwards lets one Take
// probe the store. An outage therefore costs one error and one
// CallTimeout per cool-down.
//
// Close releases everything: the Redis connection pool, or the memory
// store's cleaner goroutine.
//
// The limits come from code (Config.Limits, DefaultLimits) or from the
// `yaps serve --rate-limit` value through ParseSpec: "default", "off" (every
// limit switched off, for benchmarks) or the path of a JSON file read by
// LoadFile:
//
//	{
//	  "create_list": {
//	    "anonymous": [{"limit": 30, "period": "1h"}, {"limit": 200, "period": "24h"}]
//	  },
//	  "read": {"authenticated": [{"limit": 10000, "period": "1m"}]}
//	}
//
// Groups and classes left out of the file keep their defaults.
package ratelimit
