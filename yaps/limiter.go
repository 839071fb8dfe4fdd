package yaps

import (
	"context"
	"time"
)

// LimitGroup is a family of operations sharing a rate limit (RULINGS R8).
type LimitGroup string

const (
	LimitCreateList LimitGroup = "create_list"
	LimitMutation   LimitGroup = "mutation"
	LimitRead       LimitGroup = "read"
)

// LimitClass separates anonymous callers from authenticated ones (an account
// credential, or a list that was rolled up into an account).
type LimitClass string

const (
	ClassAnonymous     LimitClass = "anonymous"
	ClassAuthenticated LimitClass = "authenticated"
)

// Limiter decides whether one more request fits the limits of a group.
// The adapter is in ratelimit/ (ulule/limiter, memory or Redis).
type Limiter interface {
	// Take counts one request for key in the group and class and reports
	// the tightest window's state. Exceeded requests return Allowed false.
	Take(ctx context.Context, group LimitGroup, class LimitClass, key string) (LimitResult, error)
}

// LimitResult is the state of the tightest window after a Take.
type LimitResult struct {
	Allowed    bool
	Limit      int64
	Remaining  int64
	Reset      time.Time
	RetryAfter time.Duration // when not Allowed
}

// Unlimited is a Limiter that allows everything (for benchmarks).
type Unlimited struct{}

// Take always allows.
func (Unlimited) Take(context.Context, LimitGroup, LimitClass, string) (LimitResult, error) {
	return LimitResult{Allowed: true, Limit: -1, Remaining: -1}, nil
}
