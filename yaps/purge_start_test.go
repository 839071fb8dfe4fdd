package yaps_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// The background purge runs as the service starts, not only an interval
// later: a process restarted more often than PurgeInterval (an hour by
// default) used to never purge at all.
func TestPurgeRunsAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("old"), "", nil)
	require.NoError(t, err)
	require.NoError(t, e.svc.DeleteYap(e.ctx, a, y.ID, ""))
	e.clock.Advance(31 * 24 * time.Hour)

	// A new process on the store, with the default hourly interval.
	e.secondProcess(func(c *yaps.Config) { c.PurgeInterval = 0 })
	require.Eventually(t, func() bool {
		_, err := e.store.Yap(e.ctx, a.List.Ref, y.ID)
		return yaps.IsCode(err, yaps.ENOTFOUND)
	}, 10*time.Second, 5*time.Millisecond, "the yap deleted 31 days ago was not purged at start")
}
