package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/sync/ysync"
	"github.com/yaps-dev/yaps/yaps"
)

// oaDoc is the served OpenAPI document, decoded.
type oaDoc map[string]any

// openAPI fetches {prefix}/openapi.json from e.
func openAPI(t *testing.T, e *env) oaDoc {
	t.Helper()
	return fetchDoc(t, e, "openapi.json")
}

// op returns the operation at method and path (a path template).
func (d oaDoc) op(t *testing.T, method, path string) map[string]any {
	t.Helper()
	p, _ := d["paths"].(map[string]any)[path].(map[string]any)
	require.NotNil(t, p, "no path %s", path)
	o, _ := p[strings.ToLower(method)].(map[string]any)
	require.NotNil(t, o, "no operation %s %s", method, path)
	return o
}

// statuses returns the documented response statuses of an operation.
func (d oaDoc) statuses(t *testing.T, method, path string) []int {
	t.Helper()
	var out []int
	for code := range d.op(t, method, path)["responses"].(map[string]any) {
		n, err := strconv.Atoi(code)
		require.NoError(t, err, "response %q", code)
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// requestSchema returns the JSON request body schema of an operation.
func (d oaDoc) requestSchema(t *testing.T, method, path string) map[string]any {
	t.Helper()
	rb, _ := d.op(t, method, path)["requestBody"].(map[string]any)
	require.NotNil(t, rb, "%s %s has no requestBody", method, path)
	s, _ := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	require.NotNil(t, s)
	return s
}

// responseSchema returns the JSON schema of an operation's answer.
func (d oaDoc) responseSchema(t *testing.T, method, path string, status int) map[string]any {
	t.Helper()
	r, _ := d.op(t, method, path)["responses"].(map[string]any)[strconv.Itoa(status)].(map[string]any)
	require.NotNil(t, r, "%s %s does not document %d", method, path, status)
	s, _ := r["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	require.NotNil(t, s)
	return s
}

// resolve follows $ref to a component schema.
func (d oaDoc) resolve(s map[string]any) map[string]any {
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s, _ = d["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
		if s == nil {
			return map[string]any{"not": map[string]any{}} // unresolvable: nothing validates
		}
	}
}

// validate checks v against s with the JSON Schema 2020-12 keywords the
// document uses for structure: $ref, type, enum, properties, required,
// additionalProperties: false, items, oneOf, anyOf, allOf and not. Formats
// and length limits are not checked.
func (d oaDoc) validate(s map[string]any, v any, at string) error {
	s = d.resolve(s)
	if _, ok := s["not"]; ok && len(s) == 1 {
		return fmt.Errorf("%s: unresolvable schema", at)
	}
	if t, ok := s["type"]; ok {
		var types []string
		switch t := t.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				types = append(types, x.(string))
			}
		}
		if !slices.ContainsFunc(types, func(ty string) bool { return jsonType(v, ty) }) {
			return fmt.Errorf("%s: %v is not of type %v", at, v, types)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		if !slices.ContainsFunc(enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
			return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range asSlice(s["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				return fmt.Errorf("%s: required member %q is missing", at, r)
			}
		}
		for k, mv := range obj {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: member %q is not allowed", at, k)
				}
				continue
			}
			if err := d.validate(ps, mv, at+"."+k); err != nil {
				return err
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range arr {
				if err := d.validate(items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	if l := asSlice(s["oneOf"]); l != nil {
		n, errs := 0, []string{}
		for _, sub := range l {
			if err := d.validate(sub.(map[string]any), v, at); err != nil {
				errs = append(errs, err.Error())
			} else {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: %d oneOf branches match (%s)", at, n, strings.Join(errs, "; "))
		}
	}
	if l := asSlice(s["anyOf"]); l != nil {
		if !slices.ContainsFunc(l, func(sub any) bool { return d.validate(sub.(map[string]any), v, at) == nil }) {
			return fmt.Errorf("%s: no anyOf branch matches", at)
		}
	}
	for _, sub := range asSlice(s["allOf"]) {
		if err := d.validate(sub.(map[string]any), v, at); err != nil {
			return err
		}
	}
	if not, ok := s["not"].(map[string]any); ok && d.validate(not, v, at) == nil {
		return fmt.Errorf("%s: matches a not schema", at)
	}
	return nil
}

func asSlice(v any) []any { l, _ := v.([]any); return l }

func jsonType(v any, ty string) bool {
	switch ty {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	return v
}

// TestOpenAPINullableEnums: in JSON Schema 2020-12 enum is
// checked on its own, so a nullable enum must list null; the answers and
// the clearing PATCH with priority null validate against the document.
func TestOpenAPINullableEnums(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)

	// Every nullable enum of the document lists null.
	walkObjects(map[string]any(d), "#", func(v map[string]any, at string) {
		if types, ok := v["type"].([]any); ok && slices.Contains(types, any("null")) {
			if enum, ok := v["enum"].([]any); ok {
				require.Contains(t, enum, nil, "%s: nullable enum without null", at)
			}
		}
	})

	ref, owner := e.newList(nil)
	y := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("milk")}), http.StatusCreated)
	require.Contains(t, y.JSON, "priority")
	require.Nil(t, y.JSON["priority"])
	path := "/lists/" + ref + "/yaps/" + y.str("id")
	withPriority := expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"priority": "high"}}), http.StatusOK)
	require.Equal(t, "high", withPriority.str("priority"))

	for _, tc := range []struct {
		name   string
		method string
		op     string // operation path
		status int
		body   []byte
	}{
		{"created task", "POST", "/lists/{ref}/yaps", http.StatusCreated, y.Body},
		{"read task", "GET", "/lists/{ref}/yaps/{yapId}", http.StatusOK, expect(t, e.get(path, owner), http.StatusOK).Body},
		{"page", "GET", "/lists/{ref}/yaps", http.StatusOK, expect(t, e.get("/lists/"+ref+"/yaps", owner), http.StatusOK).Body},
		{"cleared by PATCH", "PATCH", "/lists/{ref}/yaps/{yapId}", http.StatusOK,
			expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: `{"priority":null}`}), http.StatusOK).Body},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, d.validate(d.responseSchema(t, tc.method, tc.op, tc.status), decodeJSON(t, tc.body), "body"))
		})
	}

	// The clearing PATCH body is valid for the request schema; a value
	// outside the enum is not.
	rs := d.requestSchema(t, "PATCH", "/lists/{ref}/yaps/{yapId}")
	require.NoError(t, d.validate(rs, map[string]any{"priority": nil}, "body"))
	require.NoError(t, d.validate(rs, map[string]any{"priority": "low"}, "body"))
	require.Error(t, d.validate(rs, map[string]any{"priority": "asap"}, "body"))
}

// TestOpenAPIDocumentedStatuses: every operation documents
// exactly the statuses its handler can answer.
func TestOpenAPIDocumentedStatuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)
	for _, tc := range []struct {
		method, path string
		want         []int
	}{
		{"POST", "/lists", []int{201, 400, 401, 408, 413, 429, 500}},
		{"GET", "/lists", []int{200, 400, 401, 429, 500}},
		{"POST", "/accounts", []int{201, 400, 408, 413, 429, 500}},
		{"GET", "/lists/{ref}", []int{200, 400, 401, 404, 429, 500}},
		{"PATCH", "/lists/{ref}", []int{200, 400, 401, 403, 404, 408, 412, 413, 429, 500}},
		{"DELETE", "/lists/{ref}", []int{204, 400, 401, 403, 404, 412, 429, 500}},
		{"GET", "/lists/{ref}/yaps", []int{200, 400, 401, 404, 429, 500}},
		{"POST", "/lists/{ref}/yaps", []int{201, 400, 401, 403, 404, 408, 413, 429, 500}},
		{"GET", "/lists/{ref}/yaps/{yapId}", []int{200, 400, 401, 404, 429, 500}},
		{"PATCH", "/lists/{ref}/yaps/{yapId}", []int{200, 400, 401, 403, 404, 408, 412, 413, 429, 500}},
		{"DELETE", "/lists/{ref}/yaps/{yapId}", []int{204, 400, 401, 403, 404, 412, 429, 500}},
		{"GET", "/lists/{ref}/permissions", []int{200, 400, 401, 403, 404, 429, 500}},
		{"POST", "/lists/{ref}/permissions", []int{201, 400, 401, 403, 404, 408, 413, 429, 500}},
		{"DELETE", "/lists/{ref}/permissions/{permissionId}", []int{204, 400, 401, 403, 404, 429, 500}},
		{"POST", "/lists/{ref}/permissions/rotate-owner", []int{200, 400, 401, 403, 404, 408, 413, 429, 500}},
		{"POST", "/lists/{ref}/rollup", []int{200, 400, 401, 403, 404, 408, 413, 429, 500}},
		{"GET", "/lists/{ref}/snapshot", []int{200, 304, 400, 401, 404, 429, 500}},
		{"GET", "/lists/{ref}/audit", []int{200, 400, 401, 403, 404, 429, 500}},
		{"GET", "/lists/{ref}/sync", []int{101, 400, 401, 403, 404, 429, 500, 503}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, d.statuses(t, tc.method, tc.path))
		})
	}
}

// mountSync serves the sync endpoint (package ysync) on e's mux, as
// `yaps serve` does beside the API.
func mountSync(t *testing.T, e *env) {
	t.Helper()
	s, err := ysync.New(e.svc, ysync.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	s.Mount(e.mux, e.prefix)
}

// TestOpenAPIStatusesAnswered: the answers the audit saw
// undocumented are documented for their operation.
func TestOpenAPIStatusesAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	mountSync(t, e)
	// A second server whose anonymous read budget is one request a minute,
	// for the sync endpoint's 429.
	limited := newEnv(t, backends()[0], envOptions{limiter: limiter(t, ratelimit.Limits{
		yaps.LimitRead: {yaps.ClassAnonymous: {{Limit: 1, Period: time.Minute}}},
	})})
	mountSync(t, limited)
	d := openAPI(t, e)

	ref, owner := e.newList(nil)
	acct := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
	withAcct := map[string]string{"X-Account-Key": acct}
	big := `{"x":"` + strings.Repeat("a", 2<<20) + `"}`
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	evil := map[string]string{"Origin": "http://evil.example"}
	for k, v := range upgrade {
		evil[k] = v
	}
	snapTag := expect(t, e.get("/lists/"+ref+"/snapshot", owner), http.StatusOK).Header.Get("ETag")
	require.NotEmpty(t, snapTag)

	lref, lowner := limited.newList(nil)
	expectProblem(t, limited.get("/lists/"+lref+"/sync", lowner), http.StatusBadRequest, "bad_request") // spends the budget

	for _, tc := range []struct {
		name   string
		e      *env
		method string
		op     string // operation path
		path   string
		code   string
		body   any
		header map[string]string
		status int
	}{
		{"rollup unknown member", e, "POST", "/lists/{ref}/rollup", "/lists/" + ref + "/rollup", owner, `{"x":1}`, withAcct, 400},
		{"rollup malformed", e, "POST", "/lists/{ref}/rollup", "/lists/" + ref + "/rollup", owner, `{bad`, withAcct, 400},
		{"rollup too large", e, "POST", "/lists/{ref}/rollup", "/lists/" + ref + "/rollup", owner, big, withAcct, 413},
		{"rotate-owner unknown member", e, "POST", "/lists/{ref}/permissions/rotate-owner", "/lists/" + ref + "/permissions/rotate-owner", owner, `{"x":1}`, nil, 400},
		{"rotate-owner array", e, "POST", "/lists/{ref}/permissions/rotate-owner", "/lists/" + ref + "/permissions/rotate-owner", owner, `[1]`, nil, 400},
		{"rotate-owner too large", e, "POST", "/lists/{ref}/permissions/rotate-owner", "/lists/" + ref + "/permissions/rotate-owner", owner, big, nil, 413},
		{"create account unknown member", e, "POST", "/accounts", "/accounts", "", `{"nope":1}`, nil, 400},
		{"create account too large", e, "POST", "/accounts", "/accounts", "", big, nil, 413},
		{"snapshot not modified", e, "GET", "/lists/{ref}/snapshot", "/lists/" + ref + "/snapshot", owner, nil, map[string]string{"If-None-Match": snapTag}, 304},
		{"sync without upgrade", e, "GET", "/lists/{ref}/sync", "/lists/" + ref + "/sync", owner, nil, nil, 400},
		{"sync origin not allowed", e, "GET", "/lists/{ref}/sync", "/lists/" + ref + "/sync?k=" + owner, "", nil, evil, 403},
		{"sync bad code", e, "GET", "/lists/{ref}/sync", "/lists/" + ref + "/sync", "yap_bad", nil, upgrade, 401},
		{"sync unknown list", e, "GET", "/lists/{ref}/sync", "/lists/AAAAAAAAAAAAAAAAAAAAAA/sync", owner, nil, upgrade, 404},
		{"sync rate limited", limited, "GET", "/lists/{ref}/sync", "/lists/" + lref + "/sync", lowner, nil, upgrade, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.e.in(t).do(req{Method: tc.method, Path: tc.path, Code: tc.code, Body: tc.body, Header: tc.header})
			require.Equal(t, tc.status, r.Status, "body: %s", r.Body)
			require.Contains(t, d.statuses(t, tc.method, tc.op), tc.status, "%s %s answers %d undocumented", tc.method, tc.op, tc.status)
		})
	}
}

// TestOpenAPIReadOnlyMembers: a client may send back what it
// read; the server ignores the read-only members, and the published
// request schemas accept them, while unknown members stay invalid in both.
func TestOpenAPIReadOnlyMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)
	ref, owner := e.newList(nil)
	readTask := expect(t, e.get("/lists/"+ref+"/yaps/"+e.addYap(ref, owner, task("milk"))["id"].(string), owner), http.StatusOK)
	note := e.addYap(ref, owner, map[string]any{"kind": "note", "body": "b"})
	readNote := expect(t, e.get("/lists/"+ref+"/yaps/"+note["id"].(string), owner), http.StatusOK)
	event := e.addYap(ref, owner, map[string]any{"kind": "event", "title": "t", "startsAt": "2026-01-01T10:00:00Z"})
	readEvent := expect(t, e.get("/lists/"+ref+"/yaps/"+event["id"].(string), owner), http.StatusOK)
	readList, err := json.Marshal(expect(t, e.get("/lists/"+ref, owner), http.StatusOK).obj("list"))
	require.NoError(t, err)
	foreign := `{"kind":"task","content":"d","status":"open","id":"myid","listId":"other","createdAt":"2000-01-01T00:00:00Z","updatedAt":"2000-01-01T00:00:00Z"}`

	for _, tc := range []struct {
		name   string
		method string
		op     string // operation path
		path   string
		body   []byte
		status int
	}{
		{"create from a read task", "POST", "/lists/{ref}/yaps", "/lists/" + ref + "/yaps", readTask.Body, 201},
		{"create from a read note", "POST", "/lists/{ref}/yaps", "/lists/" + ref + "/yaps", readNote.Body, 201},
		{"create from a read event", "POST", "/lists/{ref}/yaps", "/lists/" + ref + "/yaps", readEvent.Body, 201},
		{"create with foreign server members", "POST", "/lists/{ref}/yaps", "/lists/" + ref + "/yaps", []byte(foreign), 201},
		{"patch with the read task", "PATCH", "/lists/{ref}/yaps/{yapId}", "/lists/" + ref + "/yaps/" + readTask.str("id"), readTask.Body, 200},
		{"patch with the read event", "PATCH", "/lists/{ref}/yaps/{yapId}", "/lists/" + ref + "/yaps/" + event["id"].(string), readEvent.Body, 200},
		{"patch list with the read list", "PATCH", "/lists/{ref}", "/lists/" + ref, readList, 200},
		{"patch list with ref and docVersion", "PATCH", "/lists/{ref}", "/lists/" + ref, []byte(`{"ref":"` + ref + `","docVersion":5,"title":"q"}`), 200},
		{"null title on create", "POST", "/lists", "/lists", []byte(`{"title":null}`), 201},
		{"null title on patch", "PATCH", "/lists/{ref}", "/lists/" + ref, []byte(`{"title":null,"name":null}`), 200},
		{"null label", "POST", "/lists/{ref}/permissions", "/lists/" + ref + "/permissions", []byte(`{"role":"viewer","label":null}`), 201},
		{"unknown yap member", "POST", "/lists/{ref}/yaps", "/lists/" + ref + "/yaps", []byte(`{"kind":"task","content":"d","status":"open","x":1}`), 400},
		{"unknown list member", "PATCH", "/lists/{ref}", "/lists/" + ref, []byte(`{"x":1}`), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.in(t).do(req{Method: tc.method, Path: tc.path, Code: owner, Body: tc.body})
			require.Equal(t, tc.status, r.Status, "body: %s", r.Body)
			err := d.validate(d.requestSchema(t, tc.method, tc.op), decodeJSON(t, tc.body), "body")
			if tc.status < 300 {
				require.NoError(t, err, "the server accepts a body its schema rejects")
			} else {
				require.Error(t, err, "the server rejects a body its schema accepts")
			}
		})
	}
	// The server did ignore them.
	y := e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: foreign})
	require.NotEqual(t, "myid", y.str("id"))
	require.Equal(t, ref, y.str("listId"))
}

// walkObjects calls visit for every JSON object in v, with its JSON
// pointer-like path.
func walkObjects(v any, at string, visit func(obj map[string]any, at string)) {
	switch v := v.(type) {
	case map[string]any:
		visit(v, at)
		for k, x := range v {
			walkObjects(x, at+"/"+k, visit)
		}
	case []any:
		for i, x := range v {
			walkObjects(x, fmt.Sprintf("%s/%d", at, i), visit)
		}
	}
}

// headerNames are the answer headers the document must describe wherever
// an answer carries them.
var headerNames = []string{"ETag", "Retry-After", "Cache-Control", "Idempotent-Replayed",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

// headers returns the documented headers of one answer of an operation.
func (d oaDoc) headers(t *testing.T, method, path string, status int) map[string]any {
	t.Helper()
	r, _ := d.op(t, method, path)["responses"].(map[string]any)[strconv.Itoa(status)].(map[string]any)
	require.NotNil(t, r, "%s %s: %d undocumented", method, path, status)
	h, _ := r["headers"].(map[string]any)
	return h
}

// TestOpenAPIDocumentedHeaders: every header of headerNames that a real
// answer carries is documented for its operation and status, and the
// rate-limit and Cache-Control headers documented are really sent (the
// server runs the default rate limits, so every answer is counted).
func TestOpenAPIDocumentedHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{limiter: limiter(t, ratelimit.DefaultLimits())})
	mountSync(t, e)
	limited := newEnv(t, backends()[0], envOptions{limiter: limiter(t, ratelimit.Limits{
		yaps.LimitRead: {yaps.ClassAnonymous: {{Limit: 1, Period: time.Minute}}},
	})})
	d := openAPI(t, e)

	ref, owner := e.newList(nil)
	other, otherOwner := e.newList(nil)
	_, viewer := e.issue(ref, owner, yaps.RoleViewer)
	permID, _ := e.issue(ref, owner, yaps.RoleEditor)
	yapID := e.addYap(ref, owner, task("a"))["id"].(string)
	acct := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
	snapTag := expect(t, e.get("/lists/"+ref+"/snapshot", owner), http.StatusOK).Header.Get("ETag")
	lref, lowner := limited.newList(nil)
	expect(t, limited.get("/lists/"+lref, lowner), http.StatusOK) // spends the budget
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	idem := map[string]string{"Idempotency-Key": "4f6c1a52-1b7e-4a43-9d43-3a1d0b6a8e11"}
	yapIdem := map[string]string{"Idempotency-Key": "9b0f1e7a-5c2d-4e1b-8f3a-6d7c2b1a0e99"}

	steps := []struct {
		e        *env
		op       string // operation path
		r        req
		status   int
		replayed bool
	}{
		{e, "/lists", req{Method: "POST", Path: "/lists", Header: idem}, 201, false},
		{e, "/lists", req{Method: "POST", Path: "/lists", Header: idem}, 201, true},
		{e, "/lists", req{Method: "POST", Path: "/lists", Body: `{bad`}, 400, false},
		{e, "/accounts", req{Method: "POST", Path: "/accounts"}, 201, false},
		{e, "/lists", req{Method: "GET", Path: "/lists", Code: acct}, 200, false},
		{e, "/lists", req{Method: "GET", Path: "/lists"}, 401, false},
		{e, "/lists/{ref}", req{Method: "GET", Path: "/lists/" + ref, Code: owner}, 200, false},
		{e, "/lists/{ref}", req{Method: "GET", Path: "/lists/" + ref, Code: "yap_bad"}, 401, false},
		{e, "/lists/{ref}", req{Method: "GET", Path: "/lists/AAAAAAAAAAAAAAAAAAAAAA", Code: owner}, 404, false},
		{limited, "/lists/{ref}", req{Method: "GET", Path: "/lists/" + lref, Code: lowner}, 429, false},
		{e, "/lists/{ref}", req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"title": "t"}}, 200, false},
		{e, "/lists/{ref}", req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"title": "u"}, Header: map[string]string{"If-Match": `"stale"`}}, 412, false},
		{e, "/lists/{ref}/yaps", req{Method: "GET", Path: "/lists/" + ref + "/yaps", Code: owner}, 200, false},
		{e, "/lists/{ref}/yaps", req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("b"), Header: yapIdem}, 201, false},
		{e, "/lists/{ref}/yaps", req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("b"), Header: yapIdem}, 201, true},
		{e, "/lists/{ref}/yaps", req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: viewer, Body: task("c")}, 403, false},
		{e, "/lists/{ref}/yaps/{yapId}", req{Method: "GET", Path: "/lists/" + ref + "/yaps/" + yapID, Code: owner}, 200, false},
		{e, "/lists/{ref}/yaps/{yapId}", req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + yapID, Code: owner, Body: map[string]any{"status": "done"}}, 200, false},
		{e, "/lists/{ref}/yaps/{yapId}", req{Method: "DELETE", Path: "/lists/" + ref + "/yaps/" + yapID, Code: owner}, 204, false},
		{e, "/lists/{ref}/permissions", req{Method: "GET", Path: "/lists/" + ref + "/permissions", Code: owner}, 200, false},
		{e, "/lists/{ref}/permissions", req{Method: "POST", Path: "/lists/" + ref + "/permissions", Code: owner, Body: map[string]any{"role": "viewer"}}, 201, false},
		{e, "/lists/{ref}/permissions/{permissionId}", req{Method: "DELETE", Path: "/lists/" + ref + "/permissions/" + permID, Code: owner}, 204, false},
		{e, "/lists/{ref}/snapshot", req{Method: "GET", Path: "/lists/" + ref + "/snapshot", Code: owner}, 200, false},
		{e, "/lists/{ref}/snapshot", req{Method: "GET", Path: "/lists/" + other + "/snapshot", Code: otherOwner, Header: map[string]string{"If-None-Match": snapTag}}, 200, false},
		{e, "/lists/{ref}/snapshot", req{Method: "GET", Path: "/lists/" + ref + "/snapshot", Code: viewer, Header: map[string]string{"If-None-Match": ""}}, 304, false},
		{e, "/lists/{ref}/audit", req{Method: "GET", Path: "/lists/" + ref + "/audit", Code: owner}, 200, false},
		{e, "/lists/{ref}/rollup", req{Method: "POST", Path: "/lists/" + other + "/rollup", Code: otherOwner, Header: map[string]string{"X-Account-Key": acct}}, 200, false},
		{e, "/lists/{ref}/sync", req{Method: "GET", Path: "/lists/" + ref + "/sync", Code: owner}, 400, false},
		{e, "/lists/{ref}/sync", req{Method: "GET", Path: "/lists/" + ref + "/sync", Code: "yap_bad", Header: upgrade}, 401, false},
		{e, "/lists/{ref}/permissions/rotate-owner", req{Method: "POST", Path: "/lists/" + ref + "/permissions/rotate-owner", Code: owner}, 200, false},
		{e, "/lists/{ref}", req{Method: "DELETE", Path: "/lists/" + other, Code: otherOwner}, 204, false},
	}
	for _, s := range steps {
		if s.status == http.StatusNotModified { // the tag of the moment
			s.r.Header["If-None-Match"] = expect(t, e.get("/lists/"+ref+"/snapshot", viewer), 200).Header.Get("ETag")
		}
		r := s.e.do(s.r)
		require.Equal(t, s.status, r.Status, "%s %s: %s", s.r.Method, s.r.Path, r.Body)
		doc := d.headers(t, s.r.Method, s.op, s.status)
		name := fmt.Sprintf("%s %s %d", s.r.Method, s.op, s.status)
		for _, h := range headerNames {
			if r.Header.Get(h) != "" {
				require.Contains(t, doc, h, "%s sends %s undocumented", name, h)
			}
		}
		for h := range doc {
			if strings.HasPrefix(h, "X-RateLimit-") || h == "Cache-Control" {
				require.NotEmpty(t, r.Header.Get(h), "%s documents %s but does not send it", name, h)
			}
		}
		require.Equal(t, s.replayed, r.Header.Get("Idempotent-Replayed") == "true", name)
	}
}
