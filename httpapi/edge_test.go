package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

func limiter(t *testing.T, limits ratelimit.Limits) yaps.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Config{Limits: limits})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b, envOptions{limiter: limiter(t, ratelimit.Limits{
				yaps.LimitCreateList: {yaps.ClassAnonymous: {{Limit: 3, Period: time.Hour}}},
				yaps.LimitRead:       {yaps.ClassAnonymous: {{Limit: 3, Period: time.Minute}}},
				yaps.LimitMutation:   {yaps.ClassAnonymous: {{Limit: 1, Period: time.Minute}}},
			})})
			// POST /accounts shares the create_list budget.
			key := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
			r := expect(t, e.do(req{Method: "POST", Path: "/lists"}), http.StatusCreated)
			require.Equal(t, "3", r.Header.Get("X-RateLimit-Limit"))
			require.Equal(t, "1", r.Header.Get("X-RateLimit-Remaining"))
			reset, err := strconv.Atoi(r.Header.Get("X-RateLimit-Reset"))
			require.NoError(t, err)
			require.Greater(t, reset, 0)
			require.LessOrEqual(t, reset, 3601)
			ref, owner := r.str("ref"), r.str("ownerCode")
			expect(t, e.do(req{Method: "POST", Path: "/lists"}), http.StatusCreated)
			r = e.do(req{Method: "POST", Path: "/lists"})
			expectProblem(t, r, http.StatusTooManyRequests, "rate_limited")
			require.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
			ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
			require.NoError(t, err)
			require.Greater(t, ra, 60)
			require.EqualValues(t, ra, r.obj("error")["retryAfter"])
			// An account credential is the authenticated class (defaults).
			r = expect(t, e.do(req{Method: "POST", Path: "/lists", Header: map[string]string{"X-Account-Key": key}}), http.StatusCreated)
			require.Equal(t, "100", r.Header.Get("X-RateLimit-Limit"))

			// Reads: 3 per minute, counted even for unknown refs and bad codes.
			expect(t, e.get("/lists/"+ref, owner), http.StatusOK)
			expectProblem(t, e.get("/lists/nope", owner), 404, "not_found")
			expectProblem(t, e.get("/lists/"+ref, "yap_bad"), 401, "unauthorized")
			expectProblem(t, e.get("/lists/"+ref, owner), 429, "rate_limited")

			// Mutations: 1 per minute.
			r = expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("x")}), http.StatusCreated)
			require.Equal(t, "1", r.Header.Get("X-RateLimit-Limit"))
			expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("y")}), 429, "rate_limited")
		})
	}
}

// TestRolledUpListBudget: on a list rolled up into an account, requests by
// codes count against the account per client address: a viewer elsewhere
// whose writes are all refused cannot use up the owner's budget (audit 8),
// and more codes give no more budget.
func TestRolledUpListBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{cfg: httpapi.Config{TrustedProxies: []string{"127.0.0.0/8", "::1"}}, limiter: limiter(t, ratelimit.Limits{
		yaps.LimitMutation: {yaps.ClassAuthenticated: {{Limit: 2, Period: time.Minute}}},
	})})
	key := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
	ref, owner := e.newList(map[string]any{"title": "rolled"})
	_, viewer := e.issue(ref, owner, yaps.RoleViewer)
	_, viewer2 := e.issue(ref, owner, yaps.RoleViewer)
	expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/rollup", Code: owner, Header: map[string]string{"X-Account-Key": key}}), http.StatusOK)

	post := func(code, ip string) *resp {
		return e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: code, Body: task("x"), Header: map[string]string{"X-Forwarded-For": ip}})
	}
	expectProblem(t, post(viewer, "203.0.113.9"), 403, "forbidden")
	expectProblem(t, post(viewer, "203.0.113.9"), 403, "forbidden")
	expectProblem(t, post(viewer, "203.0.113.9"), 429, "rate_limited")
	expectProblem(t, post(viewer2, "203.0.113.9"), 429, "rate_limited")
	r := expect(t, post(owner, "198.51.100.1"), http.StatusCreated)
	require.Equal(t, "2", r.Header.Get("X-RateLimit-Limit"))
	require.Equal(t, "1", r.Header.Get("X-RateLimit-Remaining"))
}

// TestTrustedProxies: the client IP (and so the anonymous rate-limit key)
// comes from X-Forwarded-For only when the peer is a trusted proxy.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	b := backends()[0]
	lim := ratelimit.Limits{yaps.LimitCreateList: {yaps.ClassAnonymous: {{Limit: 1, Period: time.Hour}}}}
	trusted := newEnv(t, b, envOptions{limiter: limiter(t, lim), cfg: httpapi.Config{TrustedProxies: []string{"127.0.0.0/8", "::1"}}})
	xff := func(ip string) map[string]string { return map[string]string{"X-Forwarded-For": ip} }
	expect(t, trusted.do(req{Method: "POST", Path: "/lists", Header: xff("203.0.113.1")}), http.StatusCreated)
	expect(t, trusted.do(req{Method: "POST", Path: "/lists", Header: xff("203.0.113.2")}), http.StatusCreated)
	expectProblem(t, trusted.do(req{Method: "POST", Path: "/lists", Header: xff("198.51.100.9, 203.0.113.1")}), 429, "rate_limited")

	untrusted := newEnv(t, b, envOptions{limiter: limiter(t, lim)})
	expect(t, untrusted.do(req{Method: "POST", Path: "/lists", Header: xff("203.0.113.1")}), http.StatusCreated)
	expectProblem(t, untrusted.do(req{Method: "POST", Path: "/lists", Header: xff("203.0.113.2")}), 429, "rate_limited")
}

func TestBodyLimits(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		huge := `{"title": "` + strings.Repeat("x", 2<<20) + `"}`
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists", Body: huge}), 413, "payload_too_large")
		hugeYap := `{"kind": "note", "body": "` + strings.Repeat("x", 2<<20) + `"}`
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: hugeYap}), 413, "payload_too_large")
		// No Content-Length (chunked): still cut off.
		hr, err := http.NewRequest("POST", e.srv.URL+e.prefix+"/lists/"+ref+"/yaps", io.MultiReader(strings.NewReader(hugeYap)))
		require.NoError(t, err)
		hr.Header.Set("Authorization", "Bearer "+owner)
		hr.ContentLength = -1
		res, err := e.srv.Client().Do(hr)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, 413, res.StatusCode)
		// Under the limit but over the field limits: 400.
		big := `{"kind": "note", "body": "` + strings.Repeat("x", 100_001) + `"}`
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: big}), 400, "bad_request")
	})
}

func TestSmallBodyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{cfg: httpapi.Config{MaxBodyBytes: 64}})
	expect(t, e.do(req{Method: "POST", Path: "/lists", Body: `{"title": "short"}`}), http.StatusCreated)
	expectProblem(t, e.do(req{Method: "POST", Path: "/lists", Body: `{"title": "` + strings.Repeat("x", 100) + `"}`}), 413, "payload_too_large")
}

type extraInput struct {
	Body struct {
		N int    `json:"n" minimum:"1"`
		S string `json:"s" maxLength:"3"`
	}
}

type extraOutput struct {
	Body struct {
		OK bool `json:"ok"`
	}
}

// TestHumaErrorsPerAPI: Huma's own validation errors come out of our API as
// 400 Problems, while a second, unrelated Huma API on the same mux keeps
// Huma's defaults (422, its ErrorModel without the error member).
func TestHumaErrorsPerAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	handler := func(ctx context.Context, in *extraInput) (*extraOutput, error) {
		out := &extraOutput{}
		out.Body.OK = true
		return out, nil
	}
	huma.Register(e.api, huma.Operation{OperationID: "extra", Method: "POST", Path: "/extra"}, handler)
	other := humago.NewWithPrefix(e.mux, "/other", huma.DefaultConfig("Other", "1.0.0"))
	huma.Register(other, huma.Operation{OperationID: "extra", Method: "POST", Path: "/extra"}, handler)

	post := func(url, body string) *resp {
		res, err := e.srv.Client().Post(e.srv.URL+url, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		r := &resp{Status: res.StatusCode, Header: res.Header, Body: b}
		_ = json.Unmarshal(b, &r.JSON)
		return r
	}
	for _, body := range []string{`{"n": 0, "s": "x"}`, `{"n": 1, "s": "toolong"}`, `{"n": "one"}`, `{`, `[]`} {
		r := post("/api/v1/extra", body)
		expectProblem(t, r, 400, "bad_request")
		require.NotContains(t, r.JSON, "errors")

		r = post("/other/extra", body)
		require.Contains(t, []int{400, 422}, r.Status, "%s", r.Body)
		require.NotContains(t, r.JSON, "error", "%s", r.Body)
		require.Contains(t, r.JSON, "title")
		if r.Status == 422 {
			require.Contains(t, r.JSON, "errors")
		}
	}
	require.Equal(t, 422, post("/other/extra", `{"n": 0}`).Status)
	expect(t, post("/api/v1/extra", `{"n": 1, "s": "ok"}`), 200)
	expect(t, post("/other/extra", `{"n": 1, "s": "ok"}`), 200)
	// The package-level constructor is Huma's own.
	_, isModel := huma.NewError(400, "x").(*huma.ErrorModel)
	require.True(t, isModel)
}

func TestPanicsAre500(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	e := newEnv(t, backends()[0], envOptions{cfg: httpapi.Config{Logger: logger}})
	huma.Register(e.api, huma.Operation{OperationID: "boom", Method: "GET", Path: "/boom"},
		func(ctx context.Context, _ *struct{}) (*struct{}, error) { panic("secret internals") })
	res, err := e.srv.Client().Get(e.srv.URL + "/api/v1/boom?k=yap_secret")
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := &resp{Status: res.StatusCode, Header: res.Header, Body: b}
	require.NoError(t, json.Unmarshal(b, &r.JSON))
	require.Equal(t, 500, r.Status)
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	require.Equal(t, "internal_error", r.obj("error")["code"])
	require.NotContains(t, string(b), "secret")
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, logs.String(), "secret internals")
	require.NotContains(t, logs.String(), "yap_secret")
	require.Contains(t, logs.String(), "k=REDACTED")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestNoCodesInLogs: request logs carry no code, whether in k or a header.
func TestNoCodesInLogs(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnv(t, backends()[0], envOptions{cfg: httpapi.Config{Logger: logger}})
	ref, owner := e.newList(nil)
	expect(t, e.get("/lists/"+ref+"?k="+owner, ""), http.StatusOK)
	expect(t, e.get("/lists/"+ref, owner), http.StatusOK)
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, logs.String(), "/lists/"+ref)
	require.NotContains(t, logs.String(), owner)
	require.NotContains(t, logs.String(), owner[4:])
}

func TestOpenAPIAndDocs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	res, err := e.srv.Client().Get(e.srv.URL + "/api/v1/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
			Schemas         map[string]any            `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.1"))
	require.Equal(t, "http", doc.Components.SecuritySchemes["permCode"]["type"])
	require.Equal(t, "bearer", doc.Components.SecuritySchemes["permCode"]["scheme"])
	want := map[string][]string{
		"/lists":                    {"get", "post"},
		"/accounts":                 {"post"},
		"/lists/{ref}":              {"get", "patch", "delete"},
		"/lists/{ref}/yaps":         {"get", "post"},
		"/lists/{ref}/yaps/{yapId}": {"get", "patch", "delete"},
		"/lists/{ref}/permissions":  {"get", "post"},
		"/lists/{ref}/permissions/{permissionId}": {"delete"},
		"/lists/{ref}/permissions/rotate-owner":   {"post"},
		"/lists/{ref}/rollup":                     {"post"},
		"/lists/{ref}/snapshot":                   {"get"},
		"/lists/{ref}/audit":                      {"get"},
	}
	for path, methods := range want {
		require.Contains(t, doc.Paths, path)
		for _, m := range methods {
			op := doc.Paths[path][m]
			require.NotNil(t, op, "%s %s", m, path)
			responses := op["responses"].(map[string]any)
			require.NotContains(t, responses, "422", "%s %s", m, path)
			for code, r := range responses {
				if code[0] == '4' || code[0] == '5' {
					content := r.(map[string]any)["content"].(map[string]any)
					require.Contains(t, content, "application/problem+json", "%s %s %s", m, path, code)
				}
			}
			if strings.HasPrefix(path, "/lists/{ref}") {
				require.Contains(t, op, "security", "%s %s", m, path)
			}
		}
	}
	require.Contains(t, doc.Paths["/lists/{ref}/yaps"]["post"], "requestBody")
	require.Contains(t, doc.Components.Schemas, "Problem")
	require.Contains(t, doc.Components.Schemas, "TaskYap")
	page := doc.Components.Schemas["YapPage"].(map[string]any)
	items := page["properties"].(map[string]any)["yaps"].(map[string]any)["items"].(map[string]any)
	require.Len(t, items["oneOf"], 3)

	res, err = e.srv.Client().Get(e.srv.URL + "/api/v1/docs")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Type"), "text/html")
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	ref, owner := e.newList(nil)
	expectProblem(t, e.get("/nope", ""), 404, "not_found")
	r := e.do(req{Method: "PUT", Path: "/lists/" + ref, Code: owner, Body: "{}"})
	expectProblem(t, r, 405, "method_not_allowed")
	require.Equal(t, "GET, HEAD, PATCH, DELETE", r.Header.Get("Allow"))
	for _, m := range []string{"GET", "HEAD"} { // what Allow names works
		require.Equal(t, 200, e.do(req{Method: m, Path: "/lists/" + ref, Code: owner}).Status, m)
	}
	r = e.do(req{Method: "DELETE", Path: "/lists"})
	expectProblem(t, r, 405, "method_not_allowed")
	require.Equal(t, "GET, HEAD, POST", r.Header.Get("Allow"))
	r = e.do(req{Method: "GET", Path: "/lists/" + ref + "/permissions/p1", Code: owner})
	expectProblem(t, r, 405, "method_not_allowed")
	require.Equal(t, "DELETE", r.Header.Get("Allow"), "no HEAD without GET")
	expectProblem(t, e.get("/lists/"+ref+"/yaps/a/b", owner), 404, "not_found")
}

func TestCustomPrefixAndResolver(t *testing.T) {
	t.Parallel()
	acct := &yaps.Account{ID: "host-user-1"}
	e := newEnv(t, backends()[0], envOptions{cfg: httpapi.Config{
		Prefix: "/v1/",
		Accounts: func(r *http.Request) (*yaps.Account, error) {
			switch r.Header.Get("X-User") {
			case "":
				return nil, nil
			case "alice":
				return acct, nil
			}
			return nil, io.EOF // a plain error: 401
		},
	}})
	require.Equal(t, "/v1", strings.TrimSuffix(e.prefix, "/"))
	e.prefix = "/v1"
	ref, _ := e.newList(nil)
	require.NotEmpty(t, ref)
	// No built-in accounts with a host resolver.
	expectProblem(t, e.do(req{Method: "POST", Path: "/accounts"}), 404, "not_found")
	expectProblem(t, e.do(req{Method: "GET", Path: "/lists", Header: map[string]string{"X-User": "mallory"}}), 401, "unauthorized")
	expectProblem(t, e.get("/lists", ""), 401, "unauthorized")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, httpapi.Config{}.Validate())
	require.NoError(t, httpapi.Config{TrustedProxies: []string{"10.0.0.0/8", "::1", " 192.168.0.1 "}}.Validate())
	require.Error(t, httpapi.Config{TrustedProxies: []string{"10.0.0.0/33"}}.Validate())
	require.Error(t, httpapi.Config{TrustedProxies: []string{"proxy.local"}}.Validate())
	require.NoError(t, httpapi.Config{Prefix: "api"}.Validate()) // "/api", as yaps.Config takes it
	require.Error(t, httpapi.Config{Prefix: "/a b"}.Validate())
	for _, unclean := range []string{"/api//v1", "/api/./v1", "/api/../v1", "/v1/."} {
		require.ErrorContains(t, httpapi.Config{Prefix: unclean}.Validate(), "clean path", unclean)
	}
	require.NoError(t, httpapi.Config{Prefix: "/api/v1/"}.Validate()) // a trailing slash is trimmed
	require.Error(t, httpapi.Config{MaxBodyBytes: -1}.Validate())
	c := httpapi.Config{}.WithDefaults()
	require.Equal(t, "/api/v1", c.Prefix)
	require.Equal(t, int64(1<<20), c.MaxBodyBytes)
	require.NotNil(t, c.Logger)
	svc, err := yaps.NewService(yaps.Config{Store: memstore.New(), PurgeInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	require.Panics(t, func() { httpapi.Mount(http.NewServeMux(), svc, httpapi.Config{Prefix: "/a b"}) })
}
