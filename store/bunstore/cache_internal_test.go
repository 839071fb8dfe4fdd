package bunstore

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// The writer cache stays bounded however many lists, permissions and yaps
// a process writes, and keeps the entry it was just given.
func TestWriterCacheBounded(t *testing.T) {
	t.Parallel()
	var c writerCache
	for i := range 3 * maxCachedRows {
		ref := fmt.Sprintf("list-%d", i)
		c.putList(&yaps.List{Ref: ref}, 1)
		c.putPerm("perm-"+ref, ref, true)
		c.putYap(ref, "y", 1, sql.NullInt64{})
		require.LessOrEqual(t, len(c.lists), maxCachedRows)
		require.LessOrEqual(t, len(c.perms), maxCachedRows)
		require.LessOrEqual(t, len(c.yaps), maxCachedYaps)
		_, _, ok := c.listOK(ref)
		require.True(t, ok)
		active, ok := c.perm("perm-"+ref, ref)
		require.True(t, ok && active)
		require.True(t, c.yapStored(ref, "y", 1, sql.NullInt64{}))
	}
}
