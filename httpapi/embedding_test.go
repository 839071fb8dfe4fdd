package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// hostAccounts is a custom account resolver, as a host supplies one.
func hostAccounts(r *http.Request) (*yaps.Account, error) {
	if u := r.Header.Get("X-User"); u != "" {
		return &yaps.Account{ID: "user:" + u}, nil
	}
	return nil, nil
}

// fetchDoc fetches a document served under e's prefix.
func fetchDoc(t *testing.T, e *env, name string) oaDoc {
	t.Helper()
	res, err := e.srv.Client().Get(e.srv.URL + e.prefix + "/" + name)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var d oaDoc
	require.NoError(t, json.NewDecoder(res.Body).Decode(&d))
	return d
}

func (d oaDoc) schemes() map[string]any {
	m, _ := d["components"].(map[string]any)["securitySchemes"].(map[string]any)
	return m
}

func (d oaDoc) schemas() map[string]any {
	m, _ := d["components"].(map[string]any)["schemas"].(map[string]any)
	return m
}

// paramNames lists the names of an operation's parameters.
func paramNames(o map[string]any) []string {
	var out []string
	for _, p := range asSlice(o["parameters"]) {
		out = append(out, p.(map[string]any)["name"].(string))
	}
	return out
}

// checkRefsAndSecurity: every $ref of d resolves to a component schema, and
// every security requirement names a declared scheme.
func checkRefsAndSecurity(t *testing.T, d oaDoc) {
	t.Helper()
	walkObjects(map[string]any(d), "#", func(v map[string]any, at string) {
		if ref, ok := v["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/components/schemas/")
			require.True(t, found, "%s: $ref %s", at, ref)
			require.Contains(t, d.schemas(), name, "%s: dangling $ref %s", at, ref)
		}
	})
	for path, pi := range d["paths"].(map[string]any) {
		for method, o := range pi.(map[string]any) {
			for _, req := range asSlice(o.(map[string]any)["security"]) {
				for name := range req.(map[string]any) {
					require.Contains(t, d.schemes(), name, "%s %s: undeclared security scheme", method, path)
				}
			}
		}
	}
}

// TestOpenAPIAccountSchemes (audit 7 M3): the built-in yak_ account keys are
// documented only when the built-in accounts are in use; a host's resolver
// is documented by Config.AccountScheme, or not at all.
func TestOpenAPIAccountSchemes(t *testing.T) {
	t.Parallel()
	cookie := &huma.SecurityScheme{Type: "apiKey", In: "cookie", Name: "session", Description: "The host's session"}
	// The list code and the account key in every pair that can travel
	// together (both as Authorization cannot).
	builtinRollup := []any{
		map[string]any{"permCode": []any{}, "accountKeyHeader": []any{}},
		map[string]any{"permCodeQuery": []any{}, "accountKeyHeader": []any{}},
		map[string]any{"permCodeQuery": []any{}, "accountKey": []any{}},
	}
	for _, tc := range []struct {
		name        string
		cfg         httpapi.Config
		schemes     []string // account schemes declared
		listsSec    any      // security of GET /lists
		rollupSec   any
		rollupParam bool // X-Account-Key documented on rollup
	}{
		{
			name:     "built-in",
			schemes:  []string{"accountKey", "accountKeyHeader"},
			listsSec: []any{map[string]any{"accountKey": []any{}}}, rollupSec: builtinRollup,
			rollupParam: true,
		},
		{
			name:      "custom resolver",
			cfg:       httpapi.Config{Accounts: hostAccounts},
			listsSec:  nil,
			rollupSec: []any{map[string]any{"permCode": []any{}}, map[string]any{"permCodeQuery": []any{}}},
		},
		{
			name:     "custom resolver and scheme",
			cfg:      httpapi.Config{Accounts: hostAccounts, AccountScheme: cookie},
			schemes:  []string{"account"},
			listsSec: []any{map[string]any{"account": []any{}}}, rollupSec: []any{map[string]any{"permCode": []any{}, "account": []any{}}, map[string]any{"permCodeQuery": []any{}, "account": []any{}}},
		},
		{
			name:     "scheme ignored with the built-in accounts",
			cfg:      httpapi.Config{AccountScheme: cookie},
			schemes:  []string{"accountKey", "accountKeyHeader"},
			listsSec: []any{map[string]any{"accountKey": []any{}}}, rollupSec: builtinRollup,
			rollupParam: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, backends()[0], envOptions{cfg: tc.cfg})
			d := openAPI(t, e)
			var declared []string
			for name := range d.schemes() {
				if !strings.HasPrefix(name, "permCode") {
					declared = append(declared, name)
				}
			}
			slices.Sort(declared)
			require.Equal(t, tc.schemes, declared)
			require.Equal(t, tc.listsSec, d.op(t, "GET", "/lists")["security"])
			rollup := d.op(t, "POST", "/lists/{ref}/rollup")
			require.Equal(t, tc.rollupSec, rollup["security"])
			require.Equal(t, tc.rollupParam, slices.Contains(paramNames(rollup), "X-Account-Key"))
			if tc.cfg.Accounts != nil {
				raw, err := json.Marshal(d)
				require.NoError(t, err)
				require.NotContains(t, string(raw), "X-Account-Key")
				require.NotContains(t, string(raw), "yak_")
			}
			if tc.cfg.AccountScheme != nil && tc.cfg.Accounts != nil {
				require.Equal(t, map[string]any{"type": "apiKey", "in": "cookie", "name": "session", "description": "The host's session"}, d.schemes()["account"])
			}
			checkRefsAndSecurity(t, d)
		})
	}
}

// TestOpenAPI30Valid (audit 7 L1): the 3.0 document carries no 3.1-only
// keyword (the binary snapshot's contentMediaType made it invalid) and
// still describes the snapshot as binary; the 3.1 document describes it by
// its media type.
func TestOpenAPI30Valid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d30 := fetchDoc(t, e, "openapi-3.0.json")
	require.Equal(t, "3.0.3", d30["openapi"])
	only31 := []string{"contentMediaType", "contentEncoding", "const", "prefixItems", "unevaluatedProperties", "$defs", "dependentRequired", "$schema"}
	walkObjects(map[string]any(d30), "#", func(v map[string]any, at string) {
		for k, x := range v {
			require.NotContains(t, only31, k, "%s: OpenAPI 3.1 keyword in the 3.0 document", at)
			if k == "type" && !strings.HasSuffix(at, "/properties") {
				_, isString := x.(string)
				require.True(t, isString, "%s: type %v is not a string", at, x)
			}
		}
	})
	snap := func(d oaDoc) map[string]any {
		r := d.op(t, "GET", "/lists/{ref}/snapshot")["responses"].(map[string]any)["200"].(map[string]any)
		mt, ok := r["content"].(map[string]any)["application/octet-stream"].(map[string]any)
		require.True(t, ok, "no application/octet-stream answer")
		return mt
	}
	require.Equal(t, map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}, snap(d30))
	require.Equal(t, map[string]any{}, snap(openAPI(t, e)))
}

// TestOpenAPISecurityAndComponents (audit 7 L2): every operation declares
// its security (public ones an empty requirement, sync the list code), and
// Huma's unused ErrorModel and ErrorDetail are not in the document.
func TestOpenAPISecurityAndComponents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)
	public := []any{map[string]any{}}
	// POST /lists: no credential, or an account key (the list is then the
	// account's from the start).
	require.Equal(t, []any{map[string]any{}, map[string]any{"accountKey": []any{}}, map[string]any{"accountKeyHeader": []any{}}},
		d.op(t, "POST", "/lists")["security"])
	require.Equal(t, public, d.op(t, "POST", "/accounts")["security"])
	require.Equal(t, d.op(t, "GET", "/lists/{ref}")["security"], d.op(t, "GET", "/lists/{ref}/sync")["security"])
	require.Equal(t, []any{map[string]any{"permCode": []any{}}, map[string]any{"permCodeQuery": []any{}}}, d.op(t, "GET", "/lists/{ref}/sync")["security"])
	for path, pi := range d["paths"].(map[string]any) {
		for method, o := range pi.(map[string]any) {
			require.Contains(t, o, "security", "%s %s declares no security", method, path)
		}
	}
	require.NotContains(t, d.schemas(), "ErrorModel")
	require.NotContains(t, d.schemas(), "ErrorDetail")
	checkRefsAndSecurity(t, d)
}

// TestMountNilService (audit 7 L3): a nil service is refused when mounting,
// not with a nil-pointer panic on every request.
func TestMountNilService(t *testing.T) {
	t.Parallel()
	require.PanicsWithValue(t, "httpapi: nil *yaps.Service", func() { httpapi.Mount(http.NewServeMux(), nil, httpapi.Config{}) })
	api := humago.New(http.NewServeMux(), httpapi.HumaConfig(httpapi.Config{}))
	require.PanicsWithValue(t, "httpapi: nil *yaps.Service", func() { httpapi.Register(api, nil, httpapi.Config{}) })
}

// TestHostOperationsDocumentProblem (audit 7 L12): operations a host adds to
// the API Mount returns answer errors as Problems, and their OpenAPI entries
// say so (no Huma ErrorModel, 400 in place of 422); a separate Huma API of
// the host keeps Huma's ErrorModel.
func TestHostOperationsDocumentProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	handler := func(ctx context.Context, in *extraInput) (*extraOutput, error) {
		if in.Body.S == "nf" {
			return nil, huma.Error404NotFound("no such thing")
		}
		return &extraOutput{}, nil
	}
	huma.Register(e.api, huma.Operation{OperationID: "hostPlain", Method: "POST", Path: "/host-plain"}, handler)
	huma.Register(e.api, huma.Operation{OperationID: "hostErrors", Method: "POST", Path: "/host-errors", Errors: []int{404}}, handler)
	other := humago.NewWithPrefix(e.mux, "/other", huma.DefaultConfig("Other", "1.0.0"))
	huma.Register(other, huma.Operation{OperationID: "hostPlain", Method: "POST", Path: "/host-plain"}, handler)

	d := openAPI(t, e)
	problem := map[string]any{"$ref": "#/components/schemas/Problem"}
	errSchema := func(path, status string) any {
		r := d.op(t, "POST", path)["responses"].(map[string]any)[status].(map[string]any)
		require.Equal(t, []string{"application/problem+json"}, keys(r["content"].(map[string]any)), "%s %s", path, status)
		return r["content"].(map[string]any)["application/problem+json"].(map[string]any)["schema"]
	}
	require.Equal(t, problem, errSchema("/host-plain", "default"))
	require.Equal(t, []int{200, 400, 404, 500}, d.statuses(t, "POST", "/host-errors"))
	for _, status := range []string{"400", "404", "500"} {
		require.Equal(t, problem, errSchema("/host-errors", status))
	}
	require.NotContains(t, d.schemas(), "ErrorModel")
	require.NotContains(t, d.schemas(), "ErrorDetail")
	checkRefsAndSecurity(t, d)

	// What they answer validates against what is documented.
	for _, tc := range []struct{ path, body, status string }{
		{"/host-plain", `{"n": 0}`, "default"},
		{"/host-errors", `{"n": 0}`, "400"},
		{"/host-errors", `{"n": 1, "s": "nf"}`, "404"},
	} {
		res, err := e.srv.Client().Post(e.srv.URL+e.prefix+tc.path, "application/json", strings.NewReader(tc.body))
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
		require.NoError(t, d.validate(errSchema(tc.path, tc.status).(map[string]any), decodeJSON(t, b), "body"), "%s", b)
	}

	// The host's own API is untouched.
	res, err := e.srv.Client().Get(e.srv.URL + "/other/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	var od oaDoc
	require.NoError(t, json.NewDecoder(res.Body).Decode(&od))
	require.Contains(t, od.schemas(), "ErrorModel")
	require.Equal(t, map[string]any{"$ref": "#/components/schemas/ErrorModel"},
		od.op(t, "POST", "/host-plain")["responses"].(map[string]any)["default"].(map[string]any)["content"].(map[string]any)["application/problem+json"].(map[string]any)["schema"])
}

// TestPrefixNormalisedLikeService (audit 7 L10): httpapi.Config takes the
// same prefixes as yaps.Config, normalised alike ("lists" is "/lists").
func TestPrefixNormalisedLikeService(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "lists", "lists/", "/lists/", "/lists", "a/b", "/a/b//", "x", "/", "//", "a b", "/a b", "{x}", "/api//v1", "api/./v1"} {
		yc := yaps.Config{Prefix: in}.WithDefaults()
		hc := httpapi.Config{Prefix: in}.WithDefaults()
		yerr := yaps.CheckPrefix(yc.Prefix)
		herr := hc.Validate()
		require.Equal(t, yerr == nil, herr == nil, "prefix %q: yaps says %v, httpapi says %v", in, yerr, herr)
		if yerr == nil {
			require.Equal(t, yc.Prefix, hc.Prefix, "prefix %q", in)
		}
	}

	// Mounted with a prefix lacking its slash.
	svc, err := yaps.NewService(yaps.Config{Store: memstore.New(), Prefix: "lists", PurgeInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	mux := http.NewServeMux()
	httpapi.Mount(mux, svc, httpapi.Config{Prefix: "lists", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	res, err := http.Post(ts.URL+"/lists/lists", "application/json", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
}
