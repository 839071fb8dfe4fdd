package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

var rfc3339Millis = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestCreateList(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		// No body at all.
		r := expect(t, e.do(req{Method: "POST", Path: "/lists"}), http.StatusCreated)
		for _, k := range []string{"ref", "ownerCode", "list", "sliceUrl", "apiBase"} {
			require.Contains(t, r.JSON, k)
		}
		require.True(t, yaps.WellFormedCode(r.str("ownerCode")))
		require.Contains(t, r.str("sliceUrl"), "k=")
		require.Contains(t, r.str("apiBase"), "/api/v1/lists/"+r.str("ref"))
		l := r.obj("list")
		require.Equal(t, "task", l["kind"])
		require.Equal(t, "", l["title"])
		require.Equal(t, l["title"], l["name"])
		require.Equal(t, r.str("ref"), l["ref"])
		require.Regexp(t, rfc3339Millis, l["createdAt"])
		require.Regexp(t, rfc3339Millis, l["updatedAt"])
		require.Nil(t, l["rolledUpAt"])
		require.Nil(t, l["archivedAt"])
		require.Contains(t, l, "docVersion")
		require.NotEmpty(t, r.Header.Get("ETag"))

		// Empty JSON object, title + plural kind, name alias.
		expect(t, e.do(req{Method: "POST", Path: "/lists", Body: "{}"}), http.StatusCreated)
		r = expect(t, e.do(req{Method: "POST", Path: "/lists", Body: map[string]any{"title": "Groceries", "kind": "notes"}}), http.StatusCreated)
		require.Equal(t, "note", r.obj("list")["kind"])
		require.Equal(t, "Groceries", r.obj("list")["name"])
		r = expect(t, e.do(req{Method: "POST", Path: "/lists", Body: map[string]any{"name": "Trip", "kind": "events"}}), http.StatusCreated)
		require.Equal(t, "Trip", r.obj("list")["title"])
		require.Equal(t, "event", r.obj("list")["kind"])

		// Bad bodies.
		for _, body := range []any{
			`{`, `[]`, `"x"`, `{"title": 5}`, `{"kind": "tasky"}`, `{"kind": null}`, `{"colour": "red"}`,
			`{"title": "a"} {"title": "b"}`, `{"title": "a", "name": "b"}`, map[string]any{"title": string(make([]byte, 201))},
			`{"title": "line\nbreak"}`, "{\"title\": \"nul\\u0000\"}",
		} {
			expectProblem(t, e.do(req{Method: "POST", Path: "/lists", Body: body}), http.StatusBadRequest, "bad_request")
		}
	})
}

func TestGetList(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(map[string]any{"title": "Home"})
		r := expect(t, e.get("/lists/"+ref, owner), http.StatusOK)
		require.Equal(t, "owner", r.str("role"))
		require.Equal(t, "Home", r.obj("list")["title"])
		require.Equal(t, "private, no-cache", r.Header.Get("Cache-Control"))
		require.NotEmpty(t, r.Header.Get("ETag"))
		// The code as ?k=.
		r = expect(t, e.get("/lists/"+ref+"?k="+owner, ""), http.StatusOK)
		require.Equal(t, "owner", r.str("role"))
		_, viewer := e.issue(ref, owner, yaps.RoleViewer)
		r = expect(t, e.get("/lists/"+ref, viewer), http.StatusOK)
		require.Equal(t, "viewer", r.str("role"))
	})
}

// TestStatusOrder checks the statuses of RULINGS R3 and their order:
// unknown ref 404, then the credential 401, then the role 403, then the
// body 400.
func TestStatusOrder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		other, otherOwner := e.newList(nil)
		_ = other
		_, viewer := e.issue(ref, owner, yaps.RoleViewer)
		revokedID, revoked := e.issue(ref, owner, yaps.RoleEditor)
		expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref + "/permissions/" + revokedID, Code: owner}), http.StatusNoContent)
		bad := `{"title": `

		cases := []struct {
			name   string
			r      req
			status int
			code   string
		}{
			{"unknown ref, no code", req{Method: "GET", Path: "/lists/nope"}, 404, "not_found"},
			{"unknown ref, bad body", req{Method: "PATCH", Path: "/lists/nope", Code: owner, Body: bad}, 404, "not_found"},
			{"unknown ref, well-formed code", req{Method: "GET", Path: "/lists/nope", Code: owner}, 404, "not_found"},
			{"no code", req{Method: "GET", Path: "/lists/" + ref}, 401, "unauthorized"},
			{"no code, bad body", req{Method: "PATCH", Path: "/lists/" + ref, Body: bad}, 401, "unauthorized"},
			{"malformed code", req{Method: "GET", Path: "/lists/" + ref, Code: "yap_short"}, 401, "unauthorized"},
			{"malformed code, odd chars", req{Method: "GET", Path: "/lists/" + ref, Code: "yap_" + strings.Repeat("!", 43)}, 401, "unauthorized"},
			{"non-bearer authorization", req{Method: "GET", Path: "/lists/" + ref, Header: map[string]string{"Authorization": "Basic " + owner}}, 401, "unauthorized"},
			{"code of another list", req{Method: "GET", Path: "/lists/" + ref, Code: otherOwner}, 401, "unauthorized"},
			{"revoked code", req{Method: "GET", Path: "/lists/" + ref, Code: revoked}, 401, "unauthorized"},
			{"fresh random code", req{Method: "GET", Path: "/lists/" + ref, Code: yaps.NewCode()}, 401, "unauthorized"},
			{"viewer writes, bad body", req{Method: "PATCH", Path: "/lists/" + ref, Code: viewer, Body: bad}, 403, "forbidden"},
			{"viewer adds yap, bad body", req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: viewer, Body: bad}, 403, "forbidden"},
			{"owner, bad body", req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: bad}, 400, "bad_request"},
			{"owner, bad limit", req{Method: "GET", Path: "/lists/" + ref + "/yaps?limit=0", Code: owner}, 400, "bad_request"},
			{"owner, a member twice", req{Method: "POST", Path: "/lists/" + ref + "/permissions", Code: owner, Body: `{"role":"agent","role":"owner"}`}, 400, "bad_request"},
			{"no code, bad limit", req{Method: "GET", Path: "/lists/" + ref + "/yaps?limit=x"}, 401, "unauthorized"},
			{"unknown yap", req{Method: "GET", Path: "/lists/" + ref + "/yaps/nope", Code: owner}, 404, "not_found"},
			{"unknown permission", req{Method: "DELETE", Path: "/lists/" + ref + "/permissions/nope", Code: owner}, 404, "not_found"},
			{"unknown endpoint", req{Method: "GET", Path: "/nope"}, 404, "not_found"},
			{"huge ref", req{Method: "GET", Path: "/lists/" + strings.Repeat("r", 5000), Code: owner}, 404, "not_found"},
			{"odd ref", req{Method: "GET", Path: "/lists/%E2%98%83%00x", Code: owner}, 404, "not_found"},
			{"odd yap id", req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/%00%FF", Code: owner, Body: `{"status":"done"}`}, 404, "not_found"},
			{"code with spaces", req{Method: "GET", Path: "/lists/" + ref + "?k=yap_%20%20"}, 401, "unauthorized"},
			{"account key as code", req{Method: "GET", Path: "/lists/" + ref, Code: yaps.NewAccountKey()}, 401, "unauthorized"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				expectProblem(t, e.in(t).do(c.r), c.status, c.code)
			})
		}
	})
}

// TestForbiddenBeforeBody: an archived list (for anything but an
// unarchive) and an agent's scope (by the yap's kind, soft-deleted yaps
// too) answer 403 before the body is checked (RULINGS R3).
func TestForbiddenBeforeBody(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		_, editor := e.issue(ref, owner, yaps.RoleEditor)
		_, agent := e.issue(ref, owner, yaps.RoleAgent) // tasks:write only
		note := e.addYap(ref, owner, map[string]any{"kind": "note", "body": "n"})["id"].(string)
		expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref + "/yaps/" + note, Code: owner}), http.StatusNoContent)
		notePath := "/lists/" + ref + "/yaps/" + note
		archived, archivedOwner := e.newList(nil)
		_, archivedEditor := e.issue(archived, archivedOwner, yaps.RoleEditor)
		expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + archived, Code: archivedOwner}), http.StatusNoContent)
		listPath := "/lists/" + archived

		cases := []struct {
			name   string
			r      req
			status int
		}{
			{"archived: long title", req{Method: "PATCH", Path: listPath, Code: archivedEditor, Body: `{"title":"` + strings.Repeat("a", 201) + `"}`}, 403},
			{"archived: title with LF", req{Method: "PATCH", Path: listPath, Code: archivedEditor, Body: `{"title":"a\nb"}`}, 403},
			{"archived: bad kind", req{Method: "PATCH", Path: listPath, Code: archivedEditor, Body: `{"kind":"bogus"}`}, 403},
			{"archived: unknown member", req{Method: "PATCH", Path: listPath, Code: archivedEditor, Body: `{"foo":1}`}, 403},
			{"archived: broken JSON", req{Method: "PATCH", Path: listPath, Code: archivedEditor, Body: `{"title":`}, 403},
			{"archived: unarchive with a bad title", req{Method: "PATCH", Path: listPath, Code: archivedOwner, Body: `{"archivedAt":null,"title":"a\nb"}`}, 400},
			{"live list: bad kind", req{Method: "PATCH", Path: "/lists/" + ref, Code: editor, Body: `{"kind":"bogus"}`}, 400},
			{"agent, deleted note: restore", req{Method: "PATCH", Path: notePath, Code: agent, Body: `{"deletedAt":null}`}, 403},
			{"agent, deleted note: bad body", req{Method: "PATCH", Path: notePath, Code: agent, Body: `{"deletedAt":null,"body":5}`}, 403},
			{"agent, deleted note: broken JSON", req{Method: "PATCH", Path: notePath, Code: agent, Body: `{`}, 403},
			{"editor, deleted note: bad body", req{Method: "PATCH", Path: notePath, Code: editor, Body: `{"deletedAt":null,"body":5}`}, 400},
			{"agent, unknown yap", req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/nope", Code: agent, Body: `{"status":"done"}`}, 404},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				code := map[int]string{400: "bad_request", 403: "forbidden", 404: "not_found"}[c.status]
				expectProblem(t, e.in(t).do(c.r), c.status, code)
			})
		}
	})
}

func TestPatchList(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(map[string]any{"title": "A"})
		_, editor := e.issue(ref, owner, yaps.RoleEditor)
		r := expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: editor, Body: map[string]any{"title": "B", "kind": "notes"}}), http.StatusOK)
		require.Equal(t, "B", r.str("title"))
		require.Equal(t, "B", r.str("name"))
		require.Equal(t, "note", r.str("kind"))
		tag := r.Header.Get("ETag")
		require.NotEmpty(t, tag)
		r = expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"name": "C"}}), http.StatusOK)
		require.Equal(t, "C", r.str("title"))
		// If-Match with the stale tag: 412.
		expectProblem(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"title": "D"},
			Header: map[string]string{"If-Match": tag}}), http.StatusPreconditionFailed, "precondition_failed")
		r = expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"title": "D"},
			Header: map[string]string{"If-Match": r.Header.Get("ETag")}}), http.StatusOK)
		require.Equal(t, "D", r.str("title"))
		// Sending back what GET answered works (read-only members ignored).
		got := expect(t, e.get("/lists/"+ref, owner), http.StatusOK).obj("list")
		got["title"], got["name"] = "E", "E"
		expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: got}), http.StatusOK)
		expectProblem(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"kind": "list"}}), 400, "bad_request")
		expectProblem(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"archivedAt": "yesterday"}}), 400, "bad_request")
	})
}

func TestArchive(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		_, editor := e.issue(ref, owner, yaps.RoleEditor)
		y := e.addYap(ref, owner, task("before"))
		expectProblem(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref, Code: editor}), 403, "forbidden")
		expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref, Code: owner}), http.StatusNoContent)
		expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref, Code: owner}), http.StatusNoContent) // idempotent
		r := expect(t, e.get("/lists/"+ref, editor), http.StatusOK)
		require.Regexp(t, rfc3339Millis, r.obj("list")["archivedAt"])
		// Reads work, writes are 403.
		expect(t, e.get("/lists/"+ref+"/yaps", editor), http.StatusOK)
		expect(t, e.get("/lists/"+ref+"/snapshot", editor), http.StatusOK)
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("x")}), 403, "forbidden")
		expectProblem(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: editor, Body: map[string]any{"status": "done"}}), 403, "forbidden")
		expectProblem(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: editor}), 403, "forbidden")
		expectProblem(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: editor, Body: map[string]any{"title": "renamed"}}), 403, "forbidden")
		// The editor unarchives.
		r = expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: editor, Body: `{"archivedAt": null}`}), http.StatusOK)
		require.Nil(t, r.JSON["archivedAt"])
		e.addYap(ref, editor, task("after"))
		// Archive by PATCH.
		r = expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: editor, Body: map[string]any{"archivedAt": "2026-03-01T12:00:00Z"}}), http.StatusOK)
		require.NotNil(t, r.JSON["archivedAt"])
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("x")}), 403, "forbidden")
	})
}
