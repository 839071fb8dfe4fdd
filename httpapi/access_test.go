package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestPermissions(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		base := "/lists/" + ref + "/permissions"
		r := expect(t, e.do(req{Method: "POST", Path: base, Code: owner, Body: map[string]any{"role": "agent", "label": "bot", "scopes": []string{"yaps:write"}}}), http.StatusCreated)
		require.True(t, yaps.WellFormedCode(r.str("code")))
		p := r.obj("permission")
		require.Equal(t, "agent", p["role"])
		require.Equal(t, "bot", p["label"])
		require.Equal(t, []any{"yaps:write"}, p["scopes"])
		require.Regexp(t, rfc3339Millis, p["createdAt"])
		require.NotContains(t, p, "code")
		agentID, agent := p["id"].(string), r.str("code")

		r = expect(t, e.get(base, owner), http.StatusOK)
		perms := r.JSON["permissions"].([]any)
		require.Len(t, perms, 2)
		require.NotContains(t, string(r.Body), agent)

		// Revoke: the code is rejected at once.
		expect(t, e.get("/lists/"+ref, agent), http.StatusOK)
		expect(t, e.do(req{Method: "DELETE", Path: base + "/" + agentID, Code: owner}), http.StatusNoContent)
		expectProblem(t, e.get("/lists/"+ref, agent), 401, "unauthorized")

		// The last owner code cannot be revoked.
		ownerID := ""
		for _, x := range expect(t, e.get(base, owner), http.StatusOK).JSON["permissions"].([]any) {
			if x.(map[string]any)["role"] == "owner" {
				ownerID = x.(map[string]any)["id"].(string)
			}
		}
		require.NotEmpty(t, ownerID)
		expectProblem(t, e.do(req{Method: "DELETE", Path: base + "/" + ownerID, Code: owner}), 403, "forbidden")

		// Rotate: old owner code 401, new one works.
		r = expect(t, e.do(req{Method: "POST", Path: base + "/rotate-owner", Code: owner}), http.StatusOK)
		newOwner := r.str("ownerCode")
		require.True(t, yaps.WellFormedCode(newOwner))
		expectProblem(t, e.get("/lists/"+ref, owner), 401, "unauthorized")
		require.Equal(t, "owner", expect(t, e.get("/lists/"+ref, newOwner), http.StatusOK).str("role"))

		for name, body := range map[string]any{
			"no role":          map[string]any{"label": "x"},
			"bad role":         map[string]any{"role": "admin"},
			"bad scope":        map[string]any{"role": "agent", "scopes": []string{"all"}},
			"scopes on editor": map[string]any{"role": "editor", "scopes": []string{"yaps:write"}},
			"label too long":   map[string]any{"role": "viewer", "label": strings.Repeat("x", 201)},
			"unknown field":    map[string]any{"role": "viewer", "code": "yap_x"},
			"role wrong type":  map[string]any{"role": 1},
			"malformed":        `{"role":`,
			"empty":            ``,
		} {
			t.Run(name, func(t *testing.T) {
				expectProblem(t, e.in(t).do(req{Method: "POST", Path: base, Code: newOwner, Body: body}), 400, "bad_request")
			})
		}
	})
}

func TestAccountsAndRollup(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		r := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated)
		key := r.str("accountKey")
		require.True(t, yaps.WellFormedAccountKey(key))
		require.NotEmpty(t, r.obj("account")["id"])
		key2 := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")

		// GET /lists needs an account credential.
		expectProblem(t, e.get("/lists", ""), 401, "unauthorized")
		expectProblem(t, e.get("/lists", "yak_bad"), 401, "unauthorized")
		expectProblem(t, e.get("/lists", yaps.NewAccountKey()), 401, "unauthorized")
		require.Empty(t, expect(t, e.get("/lists", key), http.StatusOK).JSON["lists"])

		ref, owner := e.newList(map[string]any{"title": "mine"})
		_, editor := e.issue(ref, owner, yaps.RoleEditor)
		rollup := "/lists/" + ref + "/rollup"
		expectProblem(t, e.do(req{Method: "POST", Path: rollup, Code: owner}), 401, "unauthorized")
		expectProblem(t, e.do(req{Method: "POST", Path: rollup, Code: owner, Header: map[string]string{"X-Account-Key": "yak_nope"}}), 401, "unauthorized")
		expectProblem(t, e.do(req{Method: "POST", Path: rollup, Code: editor, Header: map[string]string{"X-Account-Key": key}}), 403, "forbidden")
		expectProblem(t, e.do(req{Method: "POST", Path: rollup, Header: map[string]string{"X-Account-Key": key}}), 401, "unauthorized")
		r = expect(t, e.do(req{Method: "POST", Path: rollup, Code: owner, Header: map[string]string{"X-Account-Key": key}}), http.StatusOK)
		require.Equal(t, true, r.JSON["merged"])
		r = expect(t, e.do(req{Method: "POST", Path: rollup + "?k=" + owner, Code: key}), http.StatusOK) // key as bearer, code as k
		require.Equal(t, false, r.JSON["merged"])
		expectProblem(t, e.do(req{Method: "POST", Path: rollup, Code: owner, Header: map[string]string{"X-Account-Key": key2}}), 403, "forbidden")

		l := expect(t, e.get("/lists/"+ref, owner), http.StatusOK).obj("list")
		require.Regexp(t, rfc3339Millis, l["rolledUpAt"])
		lists := expect(t, e.get("/lists", key), http.StatusOK).JSON["lists"].([]any)
		require.Len(t, lists, 1)
		require.Equal(t, ref, lists[0].(map[string]any)["ref"])
		require.Empty(t, expect(t, e.get("/lists", key2), http.StatusOK).JSON["lists"])
		// X-Account-Key works on GET /lists too.
		r = expect(t, e.do(req{Method: "GET", Path: "/lists", Header: map[string]string{"X-Account-Key": key}}), http.StatusOK)
		require.Len(t, r.JSON["lists"], 1)
	})
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		e.addYap(ref, owner, task("milk"))
		path := "/lists/" + ref + "/snapshot"
		r := expect(t, e.get(path, owner), http.StatusOK)
		require.Equal(t, "application/octet-stream", r.Header.Get("Content-Type"))
		require.NotEmpty(t, r.Body)
		tag := r.Header.Get("ETag")
		require.NotEmpty(t, tag)
		full := r.Body

		// Conditional GET.
		r = expect(t, e.do(req{Method: "GET", Path: path, Code: owner, Header: map[string]string{"If-None-Match": tag}}), http.StatusNotModified)
		require.Empty(t, r.Body)

		// A state vector: the empty one (one zero byte) in every alphabet
		// and padding returns everything; the doc's own returns little.
		for _, sv := range []string{"AA==", "AA", base64.URLEncoding.EncodeToString([]byte{0}), "AA%3D%3D"} {
			r = expect(t, e.get(path+"?sv="+sv, owner), http.StatusOK)
			require.Equal(t, len(full), len(r.Body), "sv=%s", sv)
		}
		e.addYap(ref, owner, task("bread"))
		r2 := expect(t, e.get(path, owner), http.StatusOK)
		require.NotEqual(t, tag, r2.Header.Get("ETag"))

		for _, sv := range []string{"!!!", "A", "%00"} {
			expectProblem(t, e.get(path+"?sv="+sv, owner), 400, "bad_request")
		}
	})
}

func TestAudit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		_, editor := e.issue(ref, owner, yaps.RoleEditor)
		y := e.addYap(ref, editor, task("milk"))
		expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: editor, Body: map[string]any{"status": "done"}}), http.StatusOK)
		expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: editor}), http.StatusNoContent)

		var entries []any
		cursor := ""
		for i := 0; i < 10; i++ {
			path := "/lists/" + ref + "/audit?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := expect(t, e.get(path, owner), http.StatusOK)
			entries = append(entries, r.JSON["entries"].([]any)...)
			if r.JSON["nextCursor"] == nil {
				break
			}
			cursor = r.str("nextCursor")
		}
		require.GreaterOrEqual(t, len(entries), 4) // permission issue, yap create, update, delete
		var yapActions int
		for _, x := range entries {
			en := x.(map[string]any)
			require.Regexp(t, rfc3339Millis, en["at"])
			require.NotEmpty(t, en["action"])
			require.NotEmpty(t, en["permissionId"])
			if en["yapId"] == y["id"] {
				yapActions++
				require.Equal(t, "editor", en["role"])
			}
		}
		require.Equal(t, 3, yapActions)
		expectProblem(t, e.get("/lists/"+ref+"/audit", editor), 403, "forbidden")
		expectProblem(t, e.get("/lists/"+ref+"/audit?cursor=zzz", owner), 400, "bad_request")
		expectProblem(t, e.get("/lists/"+ref+"/audit?limit=500", owner), 400, "bad_request")
	})
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := map[string]string{"Idempotency-Key": "create-1"}
		body := map[string]any{"title": "once"}
		r1 := expect(t, e.do(req{Method: "POST", Path: "/lists", Body: body, Header: h}), http.StatusCreated)
		r2 := expect(t, e.do(req{Method: "POST", Path: "/lists", Body: body, Header: h}), http.StatusCreated)
		require.Equal(t, string(r1.Body), string(r2.Body))
		require.Equal(t, "true", r2.Header.Get("Idempotent-Replayed"))
		// Same key, other body: 400.
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists", Body: map[string]any{"title": "twice"}, Header: h}), 400, "bad_request")
		// A bad key.
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists", Body: body, Header: map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}}), 400, "bad_request")

		ref, owner := r1.str("ref"), r1.str("ownerCode")
		h = map[string]string{"Idempotency-Key": "yap-1"}
		y1 := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("milk"), Header: h}), http.StatusCreated)
		y2 := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("milk"), Header: h}), http.StatusCreated)
		require.Equal(t, string(y1.Body), string(y2.Body))
		page := expect(t, e.get("/lists/"+ref+"/yaps", owner), http.StatusOK)
		require.Len(t, page.JSON["yaps"], 1)
		// The same key on another list is independent.
		ref2, owner2 := e.newList(nil)
		y3 := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref2 + "/yaps", Code: owner2, Body: task("milk"), Header: h}), http.StatusCreated)
		require.NotEqual(t, y1.JSON["id"], y3.JSON["id"])
	})
}

// An agent's scopes default to tasks:write when absent (or null). An empty
// list asks for no write scope, which no agent code has: 400, rather than
// the default, which would grant more than asked.
func TestAgentScopesDefault(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		base := "/lists/" + ref + "/permissions"
		for name, tc := range map[string]struct {
			body   map[string]any
			scopes []any
			write  int
		}{
			"absent": {map[string]any{"role": "agent"}, []any{"tasks:write"}, http.StatusCreated},
			"null":   {map[string]any{"role": "agent", "scopes": nil}, []any{"tasks:write"}, http.StatusCreated},
		} {
			r := expect(t, e.do(req{Method: "POST", Path: base, Code: owner, Body: tc.body}), http.StatusCreated)
			require.Equal(t, tc.scopes, r.obj("permission")["scopes"], name)
			code := r.str("code")
			require.Equal(t, http.StatusOK, e.get("/lists/"+ref, code).Status, name)
			w := e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: code, Body: task("by " + name)})
			require.Equal(t, tc.write, w.Status, name)
		}
		r := e.do(req{Method: "POST", Path: base, Code: owner, Body: map[string]any{"role": "agent", "scopes": []string{}}})
		expectProblem(t, r, http.StatusBadRequest, "bad_request")
		require.Contains(t, r.JSON["detail"], "scopes must name at least one")
		// Other roles take no scopes; an empty list says as much.
		expect(t, e.do(req{Method: "POST", Path: base, Code: owner, Body: map[string]any{"role": "viewer", "scopes": []string{}}}), http.StatusCreated)
	})
}
