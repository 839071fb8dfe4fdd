package yaps_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Date-times are RFC 3339 exactly, over HTTP and sync alike: Go's parser
// also took a comma before the fraction and offsets to ±24:59, minute 60
// included, which JavaScript clients cannot read (core review).
func TestParseTimeStrictRFC3339(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"2026-03-01T12:00:00Z", true},
		{"2026-03-01T12:00:00.123456789Z", true},
		{"2026-03-01t12:00:00z", true}, // HTTP takes lower case
		{"2026-03-01T12:00:00+23:59", true},
		{"2026-03-01T12:00:00-00:00", true},
		{"2026-03-01T12:00:00+00:60", false},
		{"2026-03-01T12:00:00+24:00", false},
		{"2026-03-01T12:00:00,5Z", false},
		{"2026-03-01T12:00:00.Z", false},
		{"2026-03-01T12:00:00+0100", false},
		{"2026-03-01 12:00:00Z", false},
		{"2026-03-01T12:00:00", false},
	} {
		_, err := yaps.ParseTime("dueAt", tc.in)
		require.Equal(t, tc.ok, err == nil, "%s: %v", tc.in, err)
	}
}

// A sync client's date-time with an offset past 23:59 is compensated like
// any invalid member; the document kept it, and HTTP served a shifted
// instant.
func TestSyncTimeOffsetPast23(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	start := e.clock.Now()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindEvent, yaps.YapFields{Title: yaps.Set("Party"), StartsAt: yaps.Set(start)}, "", nil)
	require.NoError(t, err)
	p := newPeer(t, e, a)
	require.NoError(t, p.send(func(d *yjs.Doc) {
		ymap(t, d, y.ID).Set("startsAt", "2026-03-02T12:00:00+24:30")
	}))
	p.sync()
	v, _ := ymap(t, p.doc, y.ID).Get("startsAt")
	require.Equal(t, yaps.FormatTime(start), v)
	got, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.True(t, got.StartsAt.Equal(start), "HTTP serves %v", got.StartsAt)
}
