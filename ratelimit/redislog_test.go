package ratelimit

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSlogRedis(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	slogRedis{slog.New(slog.NewJSONHandler(&buf, nil))}.Printf(context.Background(), "redis: %s failed %d times", "dial", 3)
	require.Contains(t, buf.String(), `"level":"WARN"`)
	require.Contains(t, buf.String(), `"msg":"redis: dial failed 3 times"`)
	require.Contains(t, buf.String(), `"component":"go-redis"`)
}
