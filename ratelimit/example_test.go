package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/yaps"
)

func Example() {
	// Anonymous list creation: 2 per hour and 5 per day; everything else
	// keeps R8's defaults. Add Redis: "redis://host:6379/0" to share the
	// counters between processes.
	lim, err := ratelimit.New(ratelimit.Config{
		Limits: ratelimit.Limits{
			yaps.LimitCreateList: {
				yaps.ClassAnonymous: {
					{Limit: 2, Period: time.Hour},
					{Limit: 5, Period: 24 * time.Hour},
				},
			},
		},
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	ctx := context.Background()
	for range 3 {
		res, err := lim.Take(ctx, yaps.LimitCreateList, yaps.ClassAnonymous, "198.51.100.4")
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%t limit=%d remaining=%d retry-after>=59m:%t\n",
			res.Allowed, res.Limit, res.Remaining, res.RetryAfter >= 59*time.Minute)
	}
	// Output:
	// allowed=true limit=2 remaining=1 retry-after>=59m:false
	// allowed=true limit=2 remaining=0 retry-after>=59m:false
	// allowed=false limit=2 remaining=0 retry-after>=59m:true
}
