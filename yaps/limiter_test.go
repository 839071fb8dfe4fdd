package yaps_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestLimitResultSetHeaders(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		res  yaps.LimitResult
		want http.Header // nil: no headers
	}{
		{"unlimited", yaps.LimitResult{Allowed: true, Limit: -1, Remaining: -1}, nil},
		{"zero without window", yaps.LimitResult{Allowed: true}, nil},
		{"allowed", yaps.LimitResult{Allowed: true, Limit: 60, Remaining: 59, Reset: now.Add(42 * time.Second)},
			http.Header{"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"59"}, "X-Ratelimit-Reset": {"42"}}},
		// Rounded up, like Retry-After: a client waiting that long is never early.
		{"exceeded", yaps.LimitResult{Limit: 60, Remaining: -3, Reset: now.Add(1400 * time.Millisecond), RetryAfter: 2 * time.Second},
			http.Header{"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"2"}}},
		{"reset passed", yaps.LimitResult{Allowed: true, Limit: 5, Remaining: 5, Reset: now.Add(-time.Minute)},
			http.Header{"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"5"}, "X-Ratelimit-Reset": {"0"}}},
		{"zero limit with window", yaps.LimitResult{Reset: now.Add(time.Second)},
			http.Header{"X-Ratelimit-Limit": {"0"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			c.res.SetHeaders(now, h.Set)
			if c.want == nil {
				require.Empty(t, h)
				return
			}
			require.Equal(t, c.want, h)
		})
	}
}
