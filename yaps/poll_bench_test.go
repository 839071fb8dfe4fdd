//go:build unix

package yaps_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/yaps"
)

// processCPU is the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdlePoll measures one tick of the poller over pinned lists
// nobody writes to (open sync rooms on a quiet server), on a SQLite file
// without a notifier as `yaps serve` runs it. "%core" is the share of a
// core the poller takes at the default PollInterval (500 ms).
func BenchmarkIdlePoll(b *testing.B) {
	for _, n := range []int{100, 2000} {
		b.Run(fmt.Sprintf("lists=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := bunstore.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "yaps.db"))
			require.NoError(b, err)
			defer st.Close()
			svc, err := yaps.NewService(yaps.Config{Store: st, PurgeInterval: -1, PollInterval: -1})
			require.NoError(b, err)
			defer svc.Close()
			for range n {
				cl, err := svc.CreateList(ctx, yaps.CreateListInput{})
				require.NoError(b, err)
				defer svc.Pin(cl.List.Ref)()
			}
			yaps.Poll(svc, ctx) // the baseline: documents and permissions read once
			b.ResetTimer()
			cpu := processCPU()
			for range b.N {
				yaps.Poll(svc, ctx)
			}
			perTick := (processCPU() - cpu) / time.Duration(b.N)
			b.ReportMetric(float64(perTick.Microseconds()), "cpu-µs/op")
			b.ReportMetric(100*float64(perTick)/float64(yaps.DefaultPollInterval), "%core")
		})
	}
}
