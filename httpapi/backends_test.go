package httpapi_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// backends lists the stores the suite runs on: SQLite in a temporary file
// always, and Postgres when YAPS_TEST_POSTGRES holds a DSN (each test in its
// own schema; skipped with a message when unset, failed when set but
// unusable).
func backends() []backend {
	return []backend{
		{name: "sqlite", open: func(t *testing.T) yaps.Store {
			return openBun(t, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
		}},
		{name: "postgres", open: func(t *testing.T) yaps.Store {
			return openBun(t, storetest.PostgresDSN(t))
		}},
	}
}

func openBun(t *testing.T, dsn string) yaps.Store {
	t.Helper()
	s, err := bunstore.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}
