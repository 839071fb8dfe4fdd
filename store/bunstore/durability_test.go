package bunstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/storetest"
)

// A Postgres DSN may trade durability for throughput as the README
// describes: synchronous_commit=off reaches the store's connections, which
// the batches of prepared writes use too (their settings leave it alone).
func TestPostgresSynchronousCommitOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ param, want string }{{"", "on"}, {"&synchronous_commit=off", "off"}} {
		s, err := Open(ctx, storetest.PostgresDSN(t)+tc.param)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		conn, err := s.sqldb.Conn(ctx)
		require.NoError(t, err)
		var got string
		require.NoError(t, conn.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&got))
		require.Equal(t, tc.want, got, tc.param)
		require.NoError(t, conn.Close())
	}
}
