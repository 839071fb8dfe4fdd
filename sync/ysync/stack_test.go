package ysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/pgnotify"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// stack is a whole server in-process: SQLite store, service, HTTP API and
// the sync endpoint on one mux, as `yaps serve` wires them.
type stack struct {
	t        *testing.T
	svc      *yaps.Service
	sync     *Server
	ts       *httptest.Server
	stop     func()
	stopOnce sync.Once

	notifier     *pgnotify.Notifier // on Postgres
	listenerLost chan struct{}      // a value each time its LISTEN connection was lost
}

func newStack(t *testing.T, cfg Config, svcMods ...func(*yaps.Config)) *stack {
	t.Helper()
	return startStack(t, cfg, filepath.Join(t.TempDir(), "yaps.db"), "127.0.0.1:0", svcMods...)
}

// startStack serves the SQLite file dbPath on addr; a stack closed with
// shutdown can be started again on the same file and address (a restart).
func startStack(t *testing.T, cfg Config, dbPath, addr string, svcMods ...func(*yaps.Config)) *stack {
	t.Helper()
	return startStackDSN(t, cfg, "sqlite:"+dbPath, addr, svcMods...)
}

// startStackDSN is startStack on any store DSN. On Postgres the process
// gets a LISTEN/NOTIFY notifier, as `yaps serve` does, so several stacks on
// one database behave as several processes. svcMods change the service's
// configuration.
// twoPostgresStacks returns two stacks (service, HTTP API and sync, with
// default settings) on one Postgres database: two server processes.
func twoPostgresStacks(t *testing.T) (a, b *stack) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	return startStackDSN(t, Config{}, dsn, "127.0.0.1:0"), startStackDSN(t, Config{}, dsn, "127.0.0.1:0")
}

func startStackDSN(t *testing.T, cfg Config, dsn, addr string, svcMods ...func(*yaps.Config)) *stack {
	t.Helper()
	ctx := context.Background()
	st, err := bunstore.Open(ctx, dsn)
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var notifier yaps.Notifier
	var closeNotifier func()
	var pn *pgnotify.Notifier
	lost := make(chan struct{}, 16)
	if strings.HasPrefix(dsn, "postgres") {
		logs := slog.New(&signalHandler{msg: "pgnotify: listening connection lost; reconnecting", ch: lost})
		n, err := pgnotify.Open(ctx, pgnotify.Config{DSN: dsn, Logger: logs})
		require.NoError(t, err)
		notifier, closeNotifier, pn = n, func() { _ = n.Close() }, n
	}
	svcCfg := yaps.Config{Store: st, PurgeInterval: -1, Logger: quiet, Notifier: notifier}
	for _, m := range svcMods {
		m(&svcCfg)
	}
	svc, err := yaps.NewService(svcCfg)
	require.NoError(t, err)
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	s, err := New(svc, cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	httpapi.Mount(mux, svc, httpapi.Config{Logger: quiet})
	s.Mount(mux, httpapi.DefaultPrefix)
	ts := httptest.NewUnstartedServer(mux)
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	k := &stack{t: t, svc: svc, sync: s, ts: ts, notifier: pn, listenerLost: lost}
	k.stop = func() {
		_ = s.Close()
		ts.Close()
		_ = svc.Close()
		if closeNotifier != nil {
			closeNotifier()
		}
		_ = st.Close()
	}
	t.Cleanup(func() { k.stopOnce.Do(k.stop) })
	return k
}

// waitReadOnly waits until every connection of ref's room on s is
// read-only (an archive reached them).
func (s *stack) waitReadOnly(ref string, within time.Duration) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		for _, c := range *s.sync.room(ref).snapshot.Load() {
			if !c.readOnly.Load() {
				return false
			}
		}
		return true
	}, within, 10*time.Millisecond)
}

// shutdown stops the server as `yaps serve` does on SIGTERM.
func (s *stack) shutdown() { s.stopOnce.Do(s.stop) }

// do sends a JSON request to the HTTP API and decodes the JSON answer.
func (s *stack) do(method, path, code string, body any, wantStatus int) map[string]any {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(s.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.ts.URL+httpapi.DefaultPrefix+path, rd)
	require.NoError(s.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if code != "" {
		req.Header.Set("Authorization", "Bearer "+code)
	}
	resp, err := s.ts.Client().Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	require.Equal(s.t, wantStatus, resp.StatusCode, "%s %s: %s", method, path, b)
	var out map[string]any
	if len(b) > 0 {
		require.NoError(s.t, json.Unmarshal(b, &out))
	}
	return out
}

// newList creates a list and returns its ref and owner code.
func (s *stack) newList() (ref, owner string) {
	out := s.do("POST", "/lists", "", map[string]any{"title": "Groceries"}, 201)
	return out["ref"].(string), out["ownerCode"].(string)
}

// issue returns a new code of role on ref and its permission id.
func (s *stack) issue(ref, owner, role string, scopes ...string) (code, permID string) {
	body := map[string]any{"role": role, "label": role}
	if len(scopes) > 0 {
		body["scopes"] = scopes
	}
	out := s.do("POST", "/lists/"+ref+"/permissions", owner, body, 201)
	return out["code"].(string), out["permission"].(map[string]any)["id"].(string)
}

// yaps returns the list's yaps as the HTTP API serves them, by id.
func (s *stack) yaps(ref, code string) map[string]map[string]any {
	out := s.do("GET", "/lists/"+ref+"/yaps", code, nil, 200)
	m := map[string]map[string]any{}
	for _, y := range out["yaps"].([]any) {
		y := y.(map[string]any)
		m[y["id"].(string)] = y
	}
	return m
}

func (s *stack) wsURL(ref, code string) string {
	return "ws" + strings.TrimPrefix(s.ts.URL, "http") + httpapi.DefaultPrefix + "/lists/" + ref + "/sync?k=" + code
}

// dial connects a raw protocol client (see client in server_test.go).
func (s *stack) dial(ref, code string) *client {
	s.t.Helper()
	return dialURL(s.t, s.wsURL(ref, code))
}

// snapshot returns GET /snapshot.
func (s *stack) snapshot(ref, code string) []byte {
	s.t.Helper()
	req, err := http.NewRequest("GET", s.ts.URL+httpapi.DefaultPrefix+"/lists/"+ref+"/snapshot", nil)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+code)
	resp, err := s.ts.Client().Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	require.Equal(s.t, 200, resp.StatusCode)
	return b
}

// signalHandler is a slog.Handler that discards records, sending on ch
// (without blocking) for each one whose message is msg.
type signalHandler struct {
	msg string
	ch  chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *signalHandler) WithGroup(string) slog.Handler            { return h }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// A sync request that reaches a closed endpoint (the host closes Yaps
// before its HTTP server has stopped) is told to come back: 503, not a
// fault of the service called with the endpoint's cancelled context.
func TestUpgradeAfterClose(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{})
	ref, owner := st.newList()
	require.NoError(t, st.sync.Close())
	_, resp, err := websocket.DefaultDialer.Dial(st.wsURL(ref, owner), nil)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	defer resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	require.Equal(t, "unavailable", problemOf(t, resp)["error"].(map[string]any)["code"])
}
