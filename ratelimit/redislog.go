package ratelimit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// LogRedisTo sends go-redis's own log lines (connection pool and
// reconnection notices, printed to stderr by default) to l at warning
// level. go-redis has one logger per process, so this changes it for every
// Redis client of the program: the binary calls it, a host application
// embedding Yaps decides for itself.
func LogRedisTo(l *slog.Logger) {
	redis.SetLogger(slogRedis{l})
}

type slogRedis struct{ l *slog.Logger }

func (s slogRedis) Printf(ctx context.Context, format string, v ...any) {
	s.l.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
