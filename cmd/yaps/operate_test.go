package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/internal/testlog"
	"github.com/yaps-dev/yaps/ratelimit"
)

// startSlowCreate opens a POST /lists whose body is still being sent, so
// the server has a request running; finish sends the rest and returns the
// answer's status.
func startSlowCreate(t *testing.T, addr string) (finish func() int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	body := `{"title":"slow"}`
	_, err = io.WriteString(conn, "POST /api/v1/lists HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body[:5])
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // let the server start the request
	return func() int {
		_, err := io.WriteString(conn, body[5:])
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
}

// TestServeShutdownSignals: the first SIGTERM lets a running request finish
// and then exits 0; a second signal ends the process at once.
func TestServeShutdownSignals(t *testing.T) {
	t.Parallel()
	t.Run("first signal is graceful", func(t *testing.T) {
		t.Parallel()
		_, done, finish := termDuringRequest(t)
		require.Equal(t, http.StatusCreated, finish())
		select {
		case err := <-done:
			require.NoError(t, err, "exit status after a graceful shutdown")
		case <-time.After(10 * time.Second):
			t.Fatal("no exit after the running request finished")
		}
	})
	t.Run("second signal ends it", func(t *testing.T) {
		t.Parallel()
		cmd, done, _ := termDuringRequest(t)
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		select {
		case err := <-done:
			require.Error(t, err, "killed by the second signal, not a clean exit")
		case <-time.After(shutdownGrace / 2):
			t.Fatal("the second signal did not end the process")
		}
	})
}

// termDuringRequest starts a server, opens a slow request (see
// startSlowCreate), sends SIGTERM and checks the server is still waiting
// for the request. done receives the process's exit.
func termDuringRequest(t *testing.T) (cmd *exec.Cmd, done <-chan error, finish func() int) {
	t.Helper()
	cmd, addr := startChildCmd(t, "sqlite:"+filepath.Join(t.TempDir(), "y.db"))
	finish = startSlowCreate(t, addr)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-exited:
		t.Fatalf("exited (%v) while a request was running", err)
	default:
	}
	return cmd, exited, finish
}

// TestServeLogLevel: --log-level debug logs one line per request with the
// k parameter redacted; the default (info) logs none.
func TestServeLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		env     string
		logsReq bool
	}{
		{logsReq: false},
		{args: []string{"--log-level", "debug"}, logsReq: true},
		{env: "DEBUG", logsReq: true},
		{args: []string{"--log-level", "warn"}, env: "debug", logsReq: false},
	} {
		var logs testlog.Buffer
		m := NewMain(&logs)
		args := append([]string{"--addr", "127.0.0.1:0", "--db", "sqlite::memory:"}, tc.args...)
		require.NoError(t, m.ParseFlags(args, func(k string) string {
			if k == "YAPS_LOG_LEVEL" {
				return tc.env
			}
			return ""
		}))
		require.NoError(t, m.Run(t.Context()))
		secret := "yap_" + strings.Repeat("A", 43)
		for _, path := range []string{"/api/v1/lists/nope", "/api/v1/lists/nope/sync", "/elsewhere"} {
			res, err := http.Get("http://" + m.Addr() + path + "?k=" + secret)
			require.NoError(t, err)
			res.Body.Close()
		}
		require.NoError(t, m.Close())
		out := logs.String()
		require.NotContains(t, out, secret)
		// One line per request: the API's own, or the binary's for the rest.
		require.Equal(t, tc.logsReq, strings.Contains(out, `url="/api/v1/lists/nope?k=REDACTED" status=404`), "%+v: %s", tc, out)
		require.Equal(t, tc.logsReq, strings.Contains(out, `path=/api/v1/lists/nope/sync query="k=REDACTED" status=404`), "%+v: %s", tc, out)
		require.Equal(t, tc.logsReq, strings.Contains(out, `path=/elsewhere query="k=REDACTED" status=404`), "%+v: %s", tc, out)
		require.Equal(t, tc.logsReq, strings.Count(out, "\n") == 3, "%+v: %s", tc, out)
	}
}

// TestServeLogSyncUpgrade: at --log-level debug, an accepted sync
// connection is logged with the 101 of its upgrade, not 200.
func TestServeLogSyncUpgrade(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	m := NewMain(&logs)
	require.NoError(t, m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--db", "sqlite::memory:", "--log-level", "debug"}, func(string) string { return "" }))
	require.NoError(t, m.Run(t.Context()))
	t.Cleanup(func() { _ = m.Close() })
	base := "http://" + m.Addr() + "/api/v1"
	var created struct{ Ref, OwnerCode string }
	doJSON(t, "POST", base+"/lists", "", "", http.StatusCreated, &created)

	conn, res, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/api/v1/lists/"+created.Ref+"/sync?k="+created.OwnerCode, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	require.NoError(t, conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second)))
	conn.Close()

	// The line is written when the connection ends.
	want := "path=/api/v1/lists/" + created.Ref + `/sync query="k=REDACTED" status=101`
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), want) }, 10*time.Second, 10*time.Millisecond,
		"want %s in\n%s", want, &logs)
	require.NotContains(t, logs.String(), created.OwnerCode)
}

// TestServeRedisPrefix: --redis-prefix reaches the limiter's key prefix.
func TestServeRedisPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ratelimit.DefaultKeyPrefix},
		{[]string{"--redis-prefix", "blue:rl"}, "blue:rl"},
	} {
		m := NewMain(io.Discard)
		require.NoError(t, m.ParseFlags(tc.args, func(string) string { return "" }))
		lim, err := m.limiter()
		require.NoError(t, err)
		require.Equal(t, tc.want, lim.(*ratelimit.Limiter).Config().KeyPrefix)
		require.NoError(t, m.Close())
	}
}

// TestServeSyncConnsPerIP: --sync-conns-per-ip (per list) and
// --sync-conns-per-ip-total (across lists) reach the sync endpoint; past
// either a socket from the same address is refused with 429.
func TestServeSyncConnsPerIP(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{
		{"--sync-conns-per-ip", "2"},
		{"--sync-conns-per-ip", "10", "--sync-conns-per-ip-total", "2"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			t.Parallel()
			m := startMain(t, append([]string{"--addr", "127.0.0.1:0", "--db", "sqlite::memory:"}, flags...)...)
			var created struct{ Ref, OwnerCode string }
			doJSON(t, "POST", "http://"+m.Addr()+"/api/v1/lists", "", "", http.StatusCreated, &created)
			url := "ws://" + m.Addr() + "/api/v1/lists/" + created.Ref + "/sync?k=" + created.OwnerCode
			for range 2 {
				conn, _, err := websocket.DefaultDialer.Dial(url, nil)
				require.NoError(t, err)
				t.Cleanup(func() { conn.Close() })
			}
			_, res, err := websocket.DefaultDialer.Dial(url, nil)
			require.Error(t, err)
			require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
			require.Equal(t, "5", res.Header.Get("Retry-After"))
		})
	}
}
