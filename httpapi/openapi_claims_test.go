package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// Places where the OpenAPI document claimed other than what the server
// does (OpenAPI and accounts review): each case checks the server's answer
// and the document's claim side by side.

// Register on a host's own Huma API documents the credentials the server
// asks for: GET /lists read as public while it answers 401 without an
// account key, and the ?k= form of the code was not documented.
func TestRegisterOnHostAPIDocumentsCredentials(t *testing.T) {
	t.Parallel()
	svc, err := yaps.NewService(yaps.Config{Store: memstore.New(), PurgeInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	mux := http.NewServeMux()
	api := humago.NewWithPrefix(mux, "/api/v1", huma.DefaultConfig("Host", "1.0.0"))
	httpapi.Register(api, svc, httpapi.Config{})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	res, err := srv.Client().Get(srv.URL + "/api/v1/lists")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	res, err = srv.Client().Get(srv.URL + "/api/v1/openapi.json")
	require.NoError(t, err)
	var d oaDoc
	require.NoError(t, json.NewDecoder(res.Body).Decode(&d))
	res.Body.Close()
	checkRefsAndSecurity(t, d)
	require.Equal(t, []any{map[string]any{"accountKey": []any{}}}, d.op(t, "GET", "/lists")["security"])
	require.Equal(t, []any{map[string]any{"permCode": []any{}}, map[string]any{"permCodeQuery": []any{}}},
		d.op(t, "GET", "/lists/{ref}")["security"])
	require.Len(t, d.op(t, "POST", "/lists/{ref}/rollup")["security"], 3)
}

// Rollup works with the code as ?k= beside either form of the account key,
// and the document says so.
func TestRollupSecurityAlternatives(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)
	acct := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
	ref, owner := e.newList(nil)
	expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/rollup?k=" + owner, Header: map[string]string{"X-Account-Key": acct}}), http.StatusOK)
	ref2, owner2 := e.newList(nil)
	expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref2 + "/rollup?k=" + owner2, Code: acct}), http.StatusOK)
	sec := d.op(t, "POST", "/lists/{ref}/rollup")["security"]
	require.Contains(t, sec, map[string]any{"permCodeQuery": []any{}, "accountKeyHeader": []any{}})
	require.Contains(t, sec, map[string]any{"permCodeQuery": []any{}, "accountKey": []any{}})
}

// The yap request schema is as strict as the server: a tag is at most 100
// characters, and deletedAt may only be null.
func TestYapRequestSchemaMatchesServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)
	ref, owner := e.newList(nil)
	for _, path := range []string{"/lists/{ref}/yaps", "/lists/{ref}/yaps/{yapId}"} {
		method := map[bool]string{true: "POST", false: "PATCH"}[!strings.Contains(path, "yapId")]
		props := d.resolve(d.requestSchema(t, method, path))["properties"].(map[string]any)
		require.Equal(t, float64(yaps.MaxTagLen), props["tags"].(map[string]any)["items"].(map[string]any)["maxLength"], path)
		require.Equal(t, []any{nil}, props["deletedAt"].(map[string]any)["enum"], path)
	}
	expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner,
		Body: map[string]any{"content": "a", "status": "open", "tags": []string{strings.Repeat("x", yaps.MaxTagLen+1)}}}), http.StatusBadRequest, "bad_request")
	expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner,
		Body: map[string]any{"content": "a", "status": "open", "tags": []string{strings.Repeat("x", yaps.MaxTagLen)}}}), http.StatusCreated)
	y := e.addYap(ref, owner, task("a"))
	expectProblem(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: owner,
		Body: map[string]any{"deletedAt": "2026-03-01T12:00:00Z"}}), http.StatusBadRequest, "bad_request")
}

// PATCH of a yap takes no body (a no-op), and the document does not call
// its body required.
func TestPatchYapBodyOptional(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)
	ref, owner := e.newList(nil)
	y := e.addYap(ref, owner, task("a"))
	expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: owner}), http.StatusOK)
	require.NotEqual(t, true, d.op(t, "PATCH", "/lists/{ref}/yaps/{yapId}")["requestBody"].(map[string]any)["required"])
}
