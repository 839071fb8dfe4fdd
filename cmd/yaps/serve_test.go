package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/internal/testlog"
	"github.com/yaps-dev/yaps/store/storetest"
)

// childEnv makes the test binary act as the yaps binary, so the crash test
// can SIGKILL a real server process without a separate go build.
const childEnv = "YAPS_TEST_SERVE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := shutdownSignals()
		defer stop()
		if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "yaps:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// databases returns the DSNs the end-to-end tests run on: a SQLite file, and
// a fresh Postgres schema when YAPS_TEST_POSTGRES is set.
func databases(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "yaps.db") },
		"postgres": func(t *testing.T) string { return storetest.PostgresDSN(t) },
	}
}

func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := dsn(t)
			m := startMain(t, "--addr", "127.0.0.1:0", "--db", db, "--rate-limit", "off")
			base := "http://" + m.Addr()

			res, err := http.Get(base + "/healthz")
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)

			var created struct {
				Ref, OwnerCode, SliceURL, APIBase string
			}
			doJSON(t, "POST", base+"/api/v1/lists", "", `{"title":"Trip"}`, http.StatusCreated, &created)
			require.Equal(t, base+"/api/v1/lists/"+created.Ref, created.APIBase)
			require.Contains(t, created.SliceURL, "k="+created.OwnerCode)

			var yap struct{ ID string }
			doJSON(t, "POST", created.APIBase+"/yaps", created.OwnerCode,
				`{"kind":"task","content":"book hotel","status":"open"}`, http.StatusCreated, &yap)
			require.NoError(t, m.Close())

			// The data outlives the process: a new server on the same
			// database serves the yap.
			m2 := startMain(t, "--addr", "127.0.0.1:0", "--db", db, "--rate-limit", "off")
			var got struct{ Content string }
			doJSON(t, "GET", "http://"+m2.Addr()+"/api/v1/lists/"+created.Ref+"/yaps/"+yap.ID, created.OwnerCode, "", http.StatusOK, &got)
			require.Equal(t, "book hotel", got.Content)
		})
	}
}

func TestServeRateLimitDefaults(t *testing.T) {
	t.Parallel()
	m := startMain(t, "--addr", "127.0.0.1:0", "--db", "sqlite::memory:")
	res, err := http.Post("http://"+m.Addr()+"/api/v1/lists", "application/json", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Equal(t, "20", res.Header.Get("X-RateLimit-Limit"), "anonymous list creation is 20 per hour by default")
}

func TestServeAllowedOrigins(t *testing.T) {
	t.Parallel()
	m := startMain(t, "--addr", "127.0.0.1:0", "--db", "sqlite::memory:", "--allowed-origins", "https://app.example")
	preflight := func(origin string) *http.Response {
		req, err := http.NewRequest("OPTIONS", "http://"+m.Addr()+"/api/v1/lists", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res
	}
	ok := preflight("https://app.example")
	require.Equal(t, http.StatusNoContent, ok.StatusCode)
	require.Equal(t, "https://app.example", ok.Header.Get("Access-Control-Allow-Origin"))
	other := preflight("https://evil.example")
	require.Empty(t, other.Header.Get("Access-Control-Allow-Origin"))
}

func TestServeParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    settings
		wantErr string
	}{
		{name: "defaults", want: settings{ListenAddr: "127.0.0.1:4736", DB: "sqlite:yaps.db", Prefix: "/api/v1", RateLimit: "default", LogLevel: "info"}},
		{
			name: "environment",
			env: map[string]string{"YAPS_ADDR": ":9000", "YAPS_DB": "sqlite::memory:", "YAPS_PREFIX": "/v1", "YAPS_RATE_LIMIT": "off", "YAPS_REDIS": "redis://r",
				"YAPS_REDIS_PREFIX": "blue:rl", "YAPS_PUBLIC_URL": "https://y.example", "YAPS_LOG_LEVEL": "debug"},
			want: settings{ListenAddr: ":9000", DB: "sqlite::memory:", Prefix: "/v1", RateLimit: "off", Redis: "redis://r", RedisKeys: "blue:rl", PublicURL: "https://y.example", LogLevel: "debug"},
		},
		{
			name: "flags win over environment",
			env:  map[string]string{"YAPS_ADDR": ":9000", "YAPS_DB": "sqlite:a.db", "YAPS_REDIS_PREFIX": "blue:rl"},
			args: []string{"--addr", ":9001", "--db", "postgres://x/y", "--redis-prefix", "green:rl", "--log-level", "warn"},
			want: settings{ListenAddr: ":9001", DB: "postgres://x/y", Prefix: "/api/v1", RateLimit: "default", RedisKeys: "green:rl", LogLevel: "warn"},
		},
		{
			name: "sync sockets per address",
			env:  map[string]string{"YAPS_SYNC_CONNS_PER_IP": "500"},
			want: settings{ListenAddr: "127.0.0.1:4736", DB: "sqlite:yaps.db", Prefix: "/api/v1", RateLimit: "default", LogLevel: "info", SyncConnsPerIP: 500},
		},
		{
			name: "sync sockets per address, flag wins",
			env:  map[string]string{"YAPS_SYNC_CONNS_PER_IP": "500"},
			args: []string{"--sync-conns-per-ip", "7"},
			want: settings{ListenAddr: "127.0.0.1:4736", DB: "sqlite:yaps.db", Prefix: "/api/v1", RateLimit: "default", LogLevel: "info", SyncConnsPerIP: 7},
		},
		{name: "sync sockets per address not a number", env: map[string]string{"YAPS_SYNC_CONNS_PER_IP": "many"}, wantErr: "YAPS_SYNC_CONNS_PER_IP"},
		{name: "negative sync sockets per address", args: []string{"--sync-conns-per-ip", "-1"}, wantErr: "--sync-conns-per-ip"},
		{name: "prefix needs a leading slash", args: []string{"--prefix", "v1"}, wantErr: "--prefix"},
		{name: "no trailing slash", args: []string{"--prefix", "/v1/"}, wantErr: "--prefix"},
		{name: "no empty segment", args: []string{"--prefix", "/api//v1"}, wantErr: "--prefix"},
		{name: "no dot segment", args: []string{"--prefix", "/api/./v1"}, wantErr: "--prefix"},
		{name: "no dot-dot segment", env: map[string]string{"YAPS_PREFIX": "/api/../v1"}, wantErr: "--prefix"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected arguments"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "not defined"},
		{name: "origin without scheme", args: []string{"--allowed-origins", "https://ok.example,app.example"}, wantErr: "--allowed-origins"},
		{name: "origin with a path", env: map[string]string{"YAPS_ALLOWED_ORIGINS": "https://app.example/x"}, wantErr: "--allowed-origins"},
		{name: "unknown log level", args: []string{"--log-level", "verbose"}, wantErr: "--log-level"},
		{name: "public url not a url", args: []string{"--public-url", "notaurl"}, wantErr: "--public-url"},
		{name: "ftp public url", args: []string{"--public-url", "ftp://x.example"}, wantErr: "--public-url"},
		{name: "public url with a query", env: map[string]string{"YAPS_PUBLIC_URL": "https://x.example/?a=1"}, wantErr: "--public-url"},
		{name: "trusted proxy not an address", args: []string{"--trusted-proxies", "10.0.0.0/8,not-a-cidr"}, wantErr: `--trusted-proxies: trusted proxy "not-a-cidr"`},
		{name: "trusted proxy bad prefix", env: map[string]string{"YAPS_TRUSTED_PROXIES": "10.0.0.0/33"}, wantErr: `--trusted-proxies: trusted proxy "10.0.0.0/33"`},
		{name: "trusted proxies", args: []string{"--trusted-proxies", "10.0.0.0/8, ::1"},
			want: settings{ListenAddr: "127.0.0.1:4736", DB: "sqlite:yaps.db", Prefix: "/api/v1", RateLimit: "default", LogLevel: "info"}},
		{name: "public url with a path", args: []string{"--public-url", "https://x.example/lists/"},
			want: settings{ListenAddr: "127.0.0.1:4736", DB: "sqlite:yaps.db", Prefix: "/api/v1", RateLimit: "default", PublicURL: "https://x.example/lists/", LogLevel: "info"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := NewMain(io.Discard)
			err := m.ParseFlags(tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want.ListenAddr, m.ListenAddr)
			require.Equal(t, tt.want.DB, m.DB)
			require.Equal(t, tt.want.Prefix, m.Prefix)
			require.Equal(t, tt.want.RateLimit, m.RateLimit)
			require.Equal(t, tt.want.Redis, m.Redis)
			require.Equal(t, tt.want.PublicURL, m.PublicURL)
			require.Equal(t, tt.want.RedisKeys, m.RedisKeys)
			require.Equal(t, tt.want.LogLevel, m.LogLevel)
			require.Equal(t, tt.want.SyncConnsPerIP, m.SyncConnsPerIP)
		})
	}
}

func TestServeRefusesBadSettings(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"bad database":   {"--addr", "127.0.0.1:0", "--db", "mysql://nope"},
		"bad rate limit": {"--addr", "127.0.0.1:0", "--db", "sqlite::memory:", "--rate-limit", filepath.Join(t.TempDir(), "missing.json")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := NewMain(io.Discard)
			require.NoError(t, m.ParseFlags(args, func(string) string { return "" }))
			err := m.Run(context.Background())
			require.Error(t, err)
			require.NoError(t, m.Close())
		})
	}
}

// TestServeBadFlagsOpenNothing: a bad --public-url or --trusted-proxies is
// refused before the database is opened (no SQLite file is created and
// migrated), with one "yaps:" prefix once main adds its own.
func TestServeBadFlagsOpenNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag, value string
	}{
		{"--public-url", "notaurl"},
		{"--trusted-proxies", "not-a-cidr"},
		{"--trusted-proxies", "10.0.0.0/8,192.168.1.300"},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "new.db")
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", "sqlite:" + path, tc.flag, tc.value}, &stdout, &stderr)
			require.Error(t, err)
			require.ErrorContains(t, err, tc.flag)
			require.NotContains(t, "yaps: "+err.Error(), "yaps: yaps:", "main prints yaps: before the error")
			require.NoFileExists(t, path, "the database was opened before %s was checked", tc.flag)
			require.Empty(t, stdout.String())
		})
	}
}

// TestServeHidesPasswords: errors about a bad --db or --redis URL never
// show its password, even when the URL does not parse (a password with
// "@" defeats the Postgres driver's own redaction).
func TestServeHidesPasswords(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--db", "postgres://user:s3cret@127.0.0.1:notaport/db", "--rate-limit", "off"},
		{"--db", "postgres://user:s3c@ret@127.0.0.1:notaport/db", "--rate-limit", "off"},
		{"--db", "postgresql://user:s3cret@127.0.0.1:notaport/db?password=s3cret", "--rate-limit", "off"},
		{"--db", "mysql://user:s3c@ret@db.example/x", "--rate-limit", "off"},
		{"--db", "sqlite::memory:", "--redis", "redis://user:s3cret@127.0.0.1:notaport/0"},
		{"--db", "sqlite::memory:", "--redis", "redis://user:s3c@ret@[::1/0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), &stdout, &stderr)
			require.Error(t, err)
			require.Regexp(t, "open database|bad Redis URL", err.Error())
			for _, out := range []string{err.Error(), stderr.String(), stdout.String()} {
				require.NotContains(t, out, "s3c")
				require.NotContains(t, out, "ret@")
			}
		})
	}
}

func TestRedactSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"no url here", "no url here"},
		{"connect to postgres 127.0.0.1:1/db: refused", "connect to postgres 127.0.0.1:1/db: refused"},
		{`parse "postgres://u:pw@h:x/db": invalid port`, `parse "postgres://xxxxx@h:x/db": invalid port`},
		{"cannot parse `postgres://u:xxxxx@p@w@h:x/db?sslmode=disable`: bad", "cannot parse `postgres://xxxxx@h:x/db?sslmode=disable`: bad"},
		{"postgres://h/db?user=u&password=pw&x=1 failed", "postgres://h/db?user=u&password=xxxxx&x=1 failed"},
		{"redis://u:pw@a/0 and redis://b/0", "redis://xxxxx@a/0 and redis://b/0"},
	} {
		require.Equal(t, tc.want, redactSecrets(tc.in), tc.in)
	}
}

// TestCreatePostgresDBHidesPassword: the bench's --postgres DSN is not
// echoed with its password when it does not parse.
func TestCreatePostgresDBHidesPassword(t *testing.T) {
	t.Parallel()
	_, err := createPostgresDB(context.Background(), "postgres://user:s3cret@127.0.0.1:notaport/db")
	require.ErrorContains(t, err, "invalid port")
	require.NotContains(t, err.Error(), "s3cret")
}

// TestServeUnspecifiedAddrLinks: on every interface (0.0.0.0, :PORT, ::)
// without --public-url, the links in answers name 127.0.0.1:PORT instead of
// the unusable [::]:PORT, and a warning says to set --public-url. With
// --public-url the links use it and nothing is logged.
func TestServeUnspecifiedAddrLinks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, publicURL string
		warn            bool
	}{
		{addr: "0.0.0.0:0", warn: true},
		{addr: ":0", warn: true},
		{addr: "[::]:0", warn: true},
		{addr: "127.0.0.1:0", warn: false},
		{addr: "0.0.0.0:0", publicURL: "https://lists.example", warn: false},
	} {
		name := tc.addr
		if tc.publicURL != "" {
			name += " with --public-url"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs testlog.Buffer
			m := NewMain(&logs)
			args := []string{"--addr", tc.addr, "--db", "sqlite::memory:", "--rate-limit", "off"}
			if tc.publicURL != "" {
				args = append(args, "--public-url", tc.publicURL)
			}
			require.NoError(t, m.ParseFlags(args, func(string) string { return "" }))
			if err := m.Run(context.Background()); err != nil && tc.addr == "[::]:0" {
				_ = m.Close()
				t.Skipf("no IPv6 here: %v", err)
			} else {
				require.NoError(t, err)
			}
			t.Cleanup(func() { _ = m.Close() })
			_, port, err := net.SplitHostPort(m.Addr())
			require.NoError(t, err)

			var created struct{ Ref, OwnerCode, SliceURL, APIBase string }
			doJSON(t, "POST", "http://127.0.0.1:"+port+"/api/v1/lists", "", "", http.StatusCreated, &created)
			origin := tc.publicURL
			if origin == "" {
				origin = "http://127.0.0.1:" + port
			}
			require.Equal(t, origin+"/api/v1/lists/"+created.Ref, created.APIBase)
			require.True(t, strings.HasPrefix(created.SliceURL, origin+"/"), created.SliceURL)
			if tc.publicURL == "" {
				// The links work: apiBase answers.
				doJSON(t, "GET", created.APIBase, created.OwnerCode, "", http.StatusOK, nil)
			}
			out := logs.String()
			require.Equal(t, tc.warn, strings.Contains(out, "level=WARN") && strings.Contains(out, "set --public-url"), out)
		})
	}
}

// TestServeCrashSafety kills the server with SIGKILL while clients write,
// restarts it on the same database and checks that every write that was
// answered 2xx is there, over HTTP and in the list document.
func TestServeCrashSafety(t *testing.T) {
	t.Parallel()
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := dsn(t)
			addr, stop := startChild(t, db)
			base := "http://" + addr + "/api/v1"
			var created struct{ Ref, OwnerCode string }
			doJSON(t, "POST", base+"/lists", "", "", http.StatusCreated, &created)
			listURL := base + "/lists/" + created.Ref

			var (
				mu    sync.Mutex
				acked []string
				wg    sync.WaitGroup
			)
			client := &http.Client{Timeout: 5 * time.Second}
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < 10000; i++ {
						body := fmt.Sprintf(`{"kind":"task","content":"w%d-%d","status":"open"}`, w, i)
						req, _ := http.NewRequest("POST", listURL+"/yaps", strings.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+created.OwnerCode)
						res, err := client.Do(req)
						if err != nil {
							return // the server is gone
						}
						var y struct{ ID string }
						ok := res.StatusCode == http.StatusCreated && json.NewDecoder(res.Body).Decode(&y) == nil
						res.Body.Close()
						if ok {
							mu.Lock()
							acked = append(acked, y.ID)
							mu.Unlock()
						}
					}
				}(w)
			}
			// Kill once a fair number of writes were acknowledged.
			require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 100 }, 30*time.Second, 5*time.Millisecond)
			stop(syscall.SIGKILL)
			wg.Wait()

			addr2, stop2 := startChild(t, db)
			defer stop2(syscall.SIGTERM)
			listURL = "http://" + addr2 + "/api/v1/lists/" + created.Ref
			found := map[string]bool{}
			cursor := ""
			for {
				var page struct {
					Yaps       []struct{ ID string }
					NextCursor *string
				}
				doJSON(t, "GET", listURL+"/yaps?limit=200&cursor="+cursor, created.OwnerCode, "", http.StatusOK, &page)
				for _, y := range page.Yaps {
					found[y.ID] = true
				}
				if page.NextCursor == nil {
					break
				}
				cursor = *page.NextCursor
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range acked {
				require.True(t, found[id], "acknowledged yap %s lost after SIGKILL", id)
			}

			// The list document holds them too: the projection and the
			// document never disagree after a crash.
			req, _ := http.NewRequest("GET", listURL+"/snapshot", nil)
			req.Header.Set("Authorization", "Bearer "+created.OwnerCode)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			snap, err := io.ReadAll(res.Body)
			res.Body.Close()
			require.NoError(t, err)
			for _, id := range acked {
				require.True(t, bytes.Contains(snap, []byte(id)), "acknowledged yap %s missing from the document", id)
			}
			t.Logf("%d acknowledged writes survived SIGKILL", len(acked))
		})
	}
}

// settings are the parsed fields of Main a flag test compares.
type settings struct {
	ListenAddr, DB, Prefix, RateLimit, Redis, RedisKeys, PublicURL, LogLevel string
	SyncConnsPerIP                                                           int
}

func startMain(t *testing.T, args ...string) *Main {
	t.Helper()
	m := NewMain(io.Discard)
	require.NoError(t, m.ParseFlags(args, func(string) string { return "" }))
	require.NoError(t, m.Run(context.Background()))
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// startChild runs this test binary as `yaps serve` on a free port and waits
// until it answers /healthz. stop sends a signal and waits for the exit.
func startChild(t *testing.T, db string) (addr string, stop func(os.Signal)) {
	t.Helper()
	cmd, addr := startChildCmd(t, db)
	var once sync.Once
	stop = func(sig os.Signal) {
		once.Do(func() {
			_ = cmd.Process.Signal(sig)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() { stop(syscall.SIGKILL) })
	return addr, stop
}

// startChildCmd is startChild for tests that signal and wait themselves;
// the process is killed at cleanup.
func startChildCmd(t *testing.T, db string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--db", db, "--rate-limit", "off")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "child server did not start")
	// "yaps listening on http://ADDR/api/v1"
	fields := strings.Fields(line)
	require.NotEmpty(t, fields)
	addr := strings.TrimPrefix(fields[len(fields)-1], "http://")
	addr = strings.TrimSuffix(addr, "/api/v1")
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	return cmd, addr
}

func doJSON(t *testing.T, method, url, code, body string, wantStatus int, out any) {
	t.Helper()
	req := newReq(t, method, url, body)
	if code != "" {
		req.Header.Set("Authorization", "Bearer "+code)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, wantStatus, res.StatusCode, "%s %s: %s", method, url, raw)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
}

func TestNextGCPercent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cur, conns, want int }{
		{serveGCPercent, 0, serveGCPercent},
		{serveGCPercent, gcManyConns - 1, serveGCPercent},
		{serveGCPercent, gcManyConns, 100},
		{serveGCPercent, 10_000, 100},
		{100, gcManyConns, 100},
		{100, gcFewConns, 100}, // between the two: stays
		{100, gcFewConns - 1, serveGCPercent},
		{100, 0, serveGCPercent},
	} {
		require.Equal(t, tc.want, nextGCPercent(tc.cur, tc.conns, gcManyConns, gcFewConns), "%+v", tc)
	}
}

// gcPercent reads the process's GC target.
func gcPercent(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	require.Equal(t, metrics.KindUint64, s[0].Value.Kind())
	return int(s[0].Value.Uint64())
}

// The binary lowers the GC target to 100 while many sync sockets are open
// and raises it again when they close. Not parallel: the GC target is the
// process's.
func TestServeGCTargetFollowsSyncConns(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(serveGCPercent))
	m := NewMain(io.Discard)
	require.NoError(t, m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--db", "sqlite::memory:", "--rate-limit", "off"}, func(string) string { return "" }))
	m.adaptGC, m.gcMany, m.gcFew, m.gcEvery = true, 3, 2, 20*time.Millisecond
	require.NoError(t, m.Run(context.Background()))
	t.Cleanup(func() { _ = m.Close() })
	var created struct{ Ref, OwnerCode string }
	doJSON(t, "POST", "http://"+m.Addr()+"/api/v1/lists", "", `{"title":"Trip"}`, http.StatusCreated, &created)
	url := "ws://" + m.Addr() + "/api/v1/lists/" + created.Ref + "/sync?k=" + created.OwnerCode

	var conns []*websocket.Conn
	dial := func() {
		conn, _, err := websocket.DefaultDialer.Dial(url, nil)
		require.NoError(t, err)
		conns = append(conns, conn)
	}
	dial()
	dial()
	time.Sleep(10 * m.gcEvery)
	require.Equal(t, serveGCPercent, gcPercent(t), "two connections are not many")
	dial()
	require.Eventually(t, func() bool { return gcPercent(t) == 100 }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, conns[2].Close())
	time.Sleep(10 * m.gcEvery)
	require.Equal(t, 100, gcPercent(t), "two connections are not few")
	require.NoError(t, conns[1].Close())
	require.Eventually(t, func() bool { return gcPercent(t) == serveGCPercent }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, conns[0].Close())
	require.NoError(t, m.Close())
}
