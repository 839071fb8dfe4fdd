package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/danielgtaylor/huma/v2"
	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/yaps"
)

// fakeClock is the service's clock in tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a whole server: store, service, Huma API on a mux, httptest server.
type env struct {
	t       *testing.T
	svc     *yaps.Service
	clock   *fakeClock
	srv     *httptest.Server
	mux     *http.ServeMux
	api     huma.API
	prefix  string
	backend string
}

type envOptions struct {
	limiter yaps.Limiter
	cfg     httpapi.Config
}

// backend opens a fresh store for one test.
type backend struct {
	name string
	open func(t *testing.T) yaps.Store
}

// eachBackend runs fn once per store backend, each in its own parallel
// subtest with its own server.
func eachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	eachBackendOpts(t, envOptions{}, fn)
}

func eachBackendOpts(t *testing.T, o envOptions, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, b, o))
		})
	}
}

func newEnv(t *testing.T, b backend, o envOptions) *env {
	t.Helper()
	st := b.open(t)
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	prefix := o.cfg.Prefix
	if prefix == "" {
		prefix = httpapi.DefaultPrefix
	}
	lim := o.limiter
	if lim == nil {
		lim = yaps.Unlimited{}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := yaps.NewService(yaps.Config{
		Store: st, Limiter: lim, Now: clock.Now, Prefix: prefix,
		PublicURL: "http://yaps.test", PurgeInterval: -1, Logger: quiet,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	mux := http.NewServeMux()
	cfg := o.cfg
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	api := httpapi.Mount(mux, svc, cfg)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, svc: svc, clock: clock, srv: srv, mux: mux, api: api, prefix: prefix, backend: b.name}
}

// resp is an answer, its body decoded when it is JSON.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

func (r *resp) str(key string) string {
	s, _ := r.JSON[key].(string)
	return s
}

func (r *resp) obj(key string) map[string]any {
	m, _ := r.JSON[key].(map[string]any)
	return m
}

// req is one request. Body: nil (none), string or []byte (raw), else JSON.
type req struct {
	Method string
	Path   string // relative to the prefix, may include a query
	Code   string // sent as Authorization: Bearer
	Body   any
	Header map[string]string
}

func (e *env) do(r req) *resp {
	e.t.Helper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(e.t, err)
		body = bytes.NewReader(j)
	}
	hr, err := http.NewRequestWithContext(context.Background(), r.Method, e.srv.URL+e.prefix+r.Path, body)
	require.NoError(e.t, err)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.Code != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Code)
	}
	for k, v := range r.Header {
		hr.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(hr)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	out := &resp{Status: res.StatusCode, Header: res.Header, Body: b}
	if ct := res.Header.Get("Content-Type"); strings.Contains(ct, "json") && len(b) > 0 {
		_ = json.Unmarshal(b, &out.JSON)
	}
	require.Less(e.t, res.StatusCode, 500, "%s %s answered %d: %s", r.Method, r.Path, res.StatusCode, b)
	return out
}

func (e *env) get(path, code string) *resp { return e.do(req{Method: "GET", Path: path, Code: code}) }

// expect checks the status of an answer.
func expect(t *testing.T, r *resp, status int) *resp {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	return r
}

// expectProblem checks an error answer in both readings: the RFC 9457
// members and error.code (RULINGS R2/R3).
func expectProblem(t *testing.T, r *resp, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	require.NotNil(t, r.JSON, "body: %s", r.Body)
	require.Equal(t, "about:blank", r.JSON["type"])
	require.Equal(t, http.StatusText(status), r.JSON["title"])
	require.EqualValues(t, status, r.JSON["status"])
	require.NotEmpty(t, r.JSON["detail"])
	require.NotEmpty(t, r.JSON["instance"])
	require.NotContains(t, r.JSON["instance"], "?")
	errm := r.obj("error")
	require.NotNil(t, errm, "body: %s", r.Body)
	require.Equal(t, code, errm["code"], "body: %s", r.Body)
	require.Equal(t, r.JSON["detail"], errm["message"])
	if status == http.StatusTooManyRequests {
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		require.Greater(t, errm["retryAfter"], 0.0)
	}
}

// newList creates a list and returns its ref and owner code.
func (e *env) newList(body any) (ref, owner string) {
	e.t.Helper()
	r := expect(e.t, e.do(req{Method: "POST", Path: "/lists", Body: body}), http.StatusCreated)
	return r.str("ref"), r.str("ownerCode")
}

// issue issues a code of role (with optional scopes) on a list.
func (e *env) issue(ref, owner string, role yaps.Role, scopes ...string) (id, code string) {
	e.t.Helper()
	body := map[string]any{"role": string(role), "label": string(role) + " code"}
	if len(scopes) > 0 {
		body["scopes"] = scopes
	}
	r := expect(e.t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/permissions", Code: owner, Body: body}), http.StatusCreated)
	return r.obj("permission")["id"].(string), r.str("code")
}

// addYap creates a yap and returns its JSON.
func (e *env) addYap(ref, code string, body any) map[string]any {
	e.t.Helper()
	r := expect(e.t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: code, Body: body}), http.StatusCreated)
	return r.JSON
}

func task(content string) map[string]any {
	return map[string]any{"kind": "task", "content": content, "status": "open"}
}

// in returns e bound to the subtest t.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}
