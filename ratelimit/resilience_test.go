package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/yaps"
)

// slow bounds a Take against a hung Redis. go-redis's own timeouts are
// 3s and more; CallTimeout's default is 100ms.
const slow = 2 * time.Second

var unlimited = yaps.LimitResult{Allowed: true, Limit: -1, Remaining: -1}

// testRedis returns YAPS_TEST_REDIS or skips the test.
func testRedis(t *testing.T) string {
	t.Helper()
	u := os.Getenv("YAPS_TEST_REDIS")
	if u == "" {
		t.Skip("YAPS_TEST_REDIS is unset (e.g. redis://127.0.0.1:6379/0): skipping the Redis store test")
	}
	return u
}

// hangProxy is a TCP proxy to Redis that can hang: while hung it still
// accepts connections and reads what clients send, but forwards nothing
// and answers nothing, like a Redis that stopped responding.
type hangProxy struct {
	url  string // redis URL through the proxy
	up   string // upstream address
	ln   net.Listener
	hung atomic.Bool
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

func newHangProxy(t *testing.T, redisURL string) *hangProxy {
	t.Helper()
	opts, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u, err := url.Parse(redisURL)
	require.NoError(t, err)
	u.Host = ln.Addr().String()
	p := &hangProxy{url: u.String(), up: opts.Addr, ln: ln}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *hangProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *hangProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		if p.hung.Load() {
			p.wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
			continue
		}
		up, err := net.Dial("tcp", p.up)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(up)
		p.wg.Go(func() {
			p.forward(up, c)
			_, _ = c.Close(), up.Close()
		})
		p.wg.Go(func() {
			_, _ = io.Copy(c, up)
			_, _ = c.Close(), up.Close()
		})
	}
}

// forward copies client data upstream, dropping it while hung.
func (p *hangProxy) forward(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hung.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hungLimiter returns a Limiter on Redis through a fresh proxy, with a
// prefix of its own (10 per minute for read/anonymous).
func hungLimiter(t *testing.T, coolDown time.Duration) (*ratelimit.Limiter, *hangProxy) {
	t.Helper()
	redisURL := testRedis(t)
	p := newHangProxy(t, redisURL)
	prefix := "yaps:rltest:" + randomHex(t)
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) })
	cfg := only(yaps.LimitRead, yaps.ClassAnonymous,
		ratelimit.Window{Limit: 10, Period: time.Minute},
		ratelimit.Window{Limit: 100, Period: time.Hour})
	cfg.Redis, cfg.KeyPrefix, cfg.BreakerCoolDown = p.url, prefix, coolDown
	return newLimiter(t, cfg), p
}

// takeTimed is one read/anonymous Take with its duration.
func takeTimed(l *ratelimit.Limiter, key string) (yaps.LimitResult, time.Duration, error) {
	start := time.Now()
	res, err := l.Take(context.Background(), yaps.LimitRead, yaps.ClassAnonymous, key)
	return res, time.Since(start), err
}

// A Redis that accepts connections but never answers costs a request
// CallTimeout, not go-redis's read timeouts; the breaker then skips Redis
// (no error, no wait) and probes it again after each cool-down. Needs
// YAPS_TEST_REDIS.
func TestRedisHungFailsOpenFast(t *testing.T) {
	t.Parallel()
	const coolDown = 500 * time.Millisecond
	l, p := hungLimiter(t, coolDown)
	const g, c = yaps.LimitRead, yaps.ClassAnonymous

	res := take(t, l, g, c, "k")
	require.True(t, res.Allowed)
	require.EqualValues(t, 10, res.Limit)
	require.EqualValues(t, 9, res.Remaining)

	p.hung.Store(true)
	_, took, err := takeTimed(l, "k")
	require.Error(t, err, "the Take that meets the hung Redis reports it")
	require.ErrorContains(t, err, "store skipped for 500ms")
	t.Logf("hung Take: %s, %v", took, err)
	require.Less(t, took, slow)

	for range 3 {
		res, took, err = takeTimed(l, "k")
		require.NoError(t, err, "cooling down: Redis is skipped")
		require.Equal(t, unlimited, res)
		require.Less(t, took, slow)
	}

	time.Sleep(coolDown + 50*time.Millisecond)
	_, took, err = takeTimed(l, "k")
	require.Error(t, err, "the probe after the cool-down meets the hung Redis")
	t.Logf("probe: %s, %v", took, err)
	require.Less(t, took, slow)
	res, _, err = takeTimed(l, "k")
	require.NoError(t, err, "cooling down again")
	require.Equal(t, unlimited, res)

	p.hung.Store(false)
	time.Sleep(coolDown + 50*time.Millisecond)
	res = take(t, l, g, c, "k")
	require.True(t, res.Allowed, "Redis answers again: counting resumes")
	require.EqualValues(t, 10, res.Limit)
	require.EqualValues(t, 8, res.Remaining, "requests during the outage were not counted")
	res = take(t, l, g, c, "k")
	require.EqualValues(t, 7, res.Remaining)
}

// Requests in flight when Redis hangs all end within the bound, and only
// one of them reports the failure. Needs YAPS_TEST_REDIS.
func TestRedisHungReportsOnce(t *testing.T) {
	t.Parallel()
	l, p := hungLimiter(t, 0) // default cool-down, 5s: no probe in this test
	require.True(t, take(t, l, yaps.LimitRead, yaps.ClassAnonymous, "k").Allowed)

	p.hung.Store(true)
	const n = 20
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			res, _, err := takeTimed(l, "k"+string(rune('a'+i)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if res != unlimited {
				errs = append(errs, errors.New("counted by a hung Redis"))
			}
		})
	}
	wg.Wait()
	require.Less(t, time.Since(start), slow)
	require.Len(t, errs, 1, "one error for the whole outage, got %v", errs)
	require.ErrorContains(t, errs[0], "store skipped for 5s")
}

// limiterGoroutines counts goroutines running code of this package or of
// ulule/limiter (the memory store's cleaner).
func limiterGoroutines() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/ulule/limiter/") || strings.Contains(g, "github.com/yaps-dev/yaps/ratelimit.") {
			count++
		}
	}
	return count
}

// Close stops the memory store's cleaner; a Limiter never closed gets it
// stopped once collected. Not parallel: it counts goroutines, and parallel
// tests wait until the sequential ones are done.
func TestCloseStopsMemoryCleaner(t *testing.T) {
	base := limiterGoroutines()
	ls := make([]*ratelimit.Limiter, 5)
	for i := range ls {
		l, err := ratelimit.New(ratelimit.Config{})
		require.NoError(t, err)
		ls[i] = l
	}
	require.Equal(t, base+len(ls), limiterGoroutines(), "one cleaner per Limiter")
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	require.Equal(t, base, limiterGoroutines(), "Close stops the cleaners")
	require.NoError(t, ls[0].Close(), "Close twice is harmless")

	// Never closed: stopped when the Limiter is garbage collected.
	for range 3 {
		_, err := ratelimit.New(ratelimit.Config{})
		require.NoError(t, err)
	}
	require.Equal(t, base+3, limiterGoroutines())
	require.Eventually(t, func() bool {
		runtime.GC()
		return limiterGoroutines() == base
	}, 5*time.Second, 20*time.Millisecond)
}
