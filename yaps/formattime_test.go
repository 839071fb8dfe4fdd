package yaps

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FormatTime (through appendTime's digits) renders what time's own layout
// does, for the years it writes itself and for those it leaves to time.
func TestFormatTimeMatchesLayout(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		{},
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 15, 12, 30, 0, 0, time.UTC),
		time.Date(2024, 2, 29, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(2026, 11, 29, 17, 4, 5, 1_234_567, time.FixedZone("", -5*3600)),
		time.Date(2026, 3, 29, 1, 30, 0, 999_999, time.FixedZone("", 14*3600)),
		time.Unix(0, 0),
		time.Unix(1<<40, 999_999_999),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		times = append(times, time.Unix(r.Int64N(400_000_000_000)-62_135_596_800, r.Int64N(1e9)).In(time.FixedZone("", (r.IntN(49)-24)*1800)))
	}
	for _, tm := range times {
		require.Equal(t, tm.UTC().Format(timeLayout), FormatTime(tm), "%v", tm)
	}
}

func BenchmarkFormatTime(b *testing.B) {
	tm := time.Date(2026, 11, 29, 17, 4, 5, 123_456_789, time.UTC)
	for b.Loop() {
		_ = FormatTime(tm)
	}
}
