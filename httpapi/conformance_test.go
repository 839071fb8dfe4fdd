package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// TestMalformedQuery: Go's query parser drops a pair whose %-escape does not
// decode; the API answers 400 instead of serving as if it was absent.
func TestMalformedQuery(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		for _, q := range []string{"/yaps?cursor=%zz", "/yaps?limit=1&cursor=%", "/yaps?limit=%zz", "/snapshot?sv=%zz", "/audit?cursor=%zz"} {
			expectProblem(t, e.get("/lists/"+ref+q, owner), http.StatusBadRequest, "bad_request")
		}
		// Well-formed escapes still work.
		expect(t, e.get("/lists/"+ref+"/yaps?limit=%31", owner), http.StatusOK)
	})
}

// TestMalformedQueryEveryOperation: an operation that reads no query
// parameter answers a query that does not decode with 400 too, after the
// credential checks (RULINGS R3), and does nothing.
func TestMalformedQueryEveryOperation(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) { malformedQueryEveryOperation(t, e) })
}

func malformedQueryEveryOperation(t *testing.T, e *env) {
	ref, owner := e.newList(map[string]any{"title": "q"})
	yapID := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("keep")}), http.StatusCreated).str("id")
	permID, _ := e.issue(ref, owner, yaps.RoleViewer)
	acct := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
	const bad = "?x=%zz"
	for _, c := range []req{
		{Method: "POST", Path: "/lists" + bad, Body: map[string]any{"title": "no"}},
		{Method: "POST", Path: "/accounts" + bad},
		{Method: "GET", Path: "/lists" + bad, Code: acct},
		{Method: "GET", Path: "/lists/" + ref + bad, Code: owner},
		{Method: "PATCH", Path: "/lists/" + ref + bad, Code: owner, Body: map[string]any{"title": "changed"}},
		{Method: "DELETE", Path: "/lists/" + ref + bad, Code: owner},
		{Method: "POST", Path: "/lists/" + ref + "/yaps" + bad, Code: owner, Body: task("no")},
		{Method: "GET", Path: "/lists/" + ref + "/yaps/" + yapID + bad, Code: owner},
		{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + yapID + bad, Code: owner, Body: map[string]any{"content": "changed"}},
		{Method: "DELETE", Path: "/lists/" + ref + "/yaps/" + yapID + bad, Code: owner},
		{Method: "GET", Path: "/lists/" + ref + "/permissions" + bad, Code: owner},
		{Method: "POST", Path: "/lists/" + ref + "/permissions" + bad, Code: owner, Body: map[string]any{"role": "viewer"}},
		{Method: "DELETE", Path: "/lists/" + ref + "/permissions/" + permID + bad, Code: owner},
		{Method: "POST", Path: "/lists/" + ref + "/permissions/rotate-owner" + bad, Code: owner},
		{Method: "POST", Path: "/lists/" + ref + "/rollup" + bad, Code: owner, Header: map[string]string{"X-Account-Key": acct}},
	} {
		// The name without the list's generated ref and ids.
		name := c.Method + " " + strings.NewReplacer(ref, "{ref}", yapID, "{yapId}", permID, "{permissionId}", bad, "").Replace(c.Path)
		t.Run(name, func(t *testing.T) {
			expectProblem(t, e.do(c), http.StatusBadRequest, "bad_request")
			if c.Code != "" && c.Path != "/lists"+bad {
				// The credential is checked first.
				c.Code = "yap_" + strings.Repeat("A", 43)
				r := e.do(c)
				require.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.Status, "body: %s", r.Body)
			}
		})
	}
	// Nothing was done.
	l := expect(t, e.get("/lists/"+ref, owner), http.StatusOK)
	require.Equal(t, "q", l.obj("list")["title"])
	require.Nil(t, l.obj("list")["archivedAt"])
	require.EqualValues(t, 2, l.obj("list")["docVersion"]) // the create and the one yap
	page := expect(t, e.get("/lists/"+ref+"/yaps", owner), http.StatusOK)
	items := page.JSON["yaps"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "keep", items[0].(map[string]any)["content"])
	perms := expect(t, e.get("/lists/"+ref+"/permissions", owner), http.StatusOK)
	require.Len(t, perms.JSON["permissions"].([]any), 2) // the owner and the viewer
}

// TestIdempotentReplayHeaders: a replay is the first answer, headers
// included: the ETag, and no-store for the answer that carries a code.
func TestIdempotentReplayHeaders(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := map[string]string{"Idempotency-Key": "replay-headers"}
		r1 := expect(t, e.do(req{Method: "POST", Path: "/lists", Body: map[string]any{"title": "r"}, Header: h}), http.StatusCreated)
		r2 := expect(t, e.do(req{Method: "POST", Path: "/lists", Body: map[string]any{"title": "r"}, Header: h}), http.StatusCreated)
		require.Equal(t, "true", r2.Header.Get("Idempotent-Replayed"))
		require.NotEmpty(t, r1.Header.Get("ETag"))
		require.Equal(t, r1.Header.Get("ETag"), r2.Header.Get("ETag"))
		require.Equal(t, "no-store", r1.Header.Get("Cache-Control"))
		require.Equal(t, "no-store", r2.Header.Get("Cache-Control"))

		ref, owner := r1.str("ref"), r1.str("ownerCode")
		y1 := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("milk"), Header: h}), http.StatusCreated)
		y2 := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task("milk"), Header: h}), http.StatusCreated)
		require.Equal(t, "true", y2.Header.Get("Idempotent-Replayed"))
		require.NotEmpty(t, y1.Header.Get("ETag"))
		require.Equal(t, y1.Header.Get("ETag"), y2.Header.Get("ETag"))
		// The replayed tag is the yap's: If-Match with it works.
		path := "/lists/" + ref + "/yaps/" + y1.str("id")
		expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"content": "oat milk"},
			Header: map[string]string{"If-Match": y2.Header.Get("ETag")}}), http.StatusOK)
	})
}

// TestIfMatchOnDelete: DELETE evaluates If-Match like PATCH.
func TestIfMatchOnDelete(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		y := e.addYap(ref, owner, task("milk"))
		path := "/lists/" + ref + "/yaps/" + y["id"].(string)
		tag := expect(t, e.get(path, owner), http.StatusOK).Header.Get("ETag")
		expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"content": "oat milk"}}), http.StatusOK)
		expectProblem(t, e.do(req{Method: "DELETE", Path: path, Code: owner, Header: map[string]string{"If-Match": tag}}),
			http.StatusPreconditionFailed, "precondition_failed")
		expect(t, e.get(path, owner), http.StatusOK) // still there
		fresh := expect(t, e.get(path, owner), http.StatusOK).Header.Get("ETag")
		expect(t, e.do(req{Method: "DELETE", Path: path, Code: owner, Header: map[string]string{"If-Match": fresh}}), http.StatusNoContent)

		listTag := expect(t, e.get("/lists/"+ref, owner), http.StatusOK).Header.Get("ETag")
		expect(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref, Code: owner, Body: map[string]any{"title": "renamed"}}), http.StatusOK)
		expectProblem(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref, Code: owner, Header: map[string]string{"If-Match": listTag}}),
			http.StatusPreconditionFailed, "precondition_failed")
		l := expect(t, e.get("/lists/"+ref, owner), http.StatusOK).obj("list")
		require.Contains(t, l, "archivedAt")
		require.Nil(t, l["archivedAt"])
		expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref, Code: owner, Header: map[string]string{"If-Match": "*"}}), http.StatusNoContent)
		require.NotNil(t, expect(t, e.get("/lists/"+ref, owner), http.StatusOK).obj("list")["archivedAt"])
	})
}

// TestNoOpPatch: a PATCH that changes nothing keeps updatedAt and the ETag,
// so other clients' If-Match stays valid; an empty body is such a PATCH.
func TestNoOpPatch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		y := e.addYap(ref, owner, task("milk"))
		path := "/lists/" + ref + "/yaps/" + y["id"].(string)
		got := expect(t, e.get(path, owner), http.StatusOK)
		tag := got.Header.Get("ETag")
		e.clock.Advance(5e9)
		for _, body := range []any{got.Body, map[string]any{"kind": "task"}, map[string]any{"content": "milk", "status": "open"}, "", "{}"} {
			r := expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: body}), http.StatusOK)
			require.Equal(t, tag, r.Header.Get("ETag"))
			require.Equal(t, y["updatedAt"], r.str("updatedAt"))
		}
		expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"status": "done"},
			Header: map[string]string{"If-Match": tag}}), http.StatusOK)
	})
}

// TestBodiesOfBodilessOperations: rollup and rotate-owner take no body;
// members are 400 like unknown members anywhere, nothing, null and {} pass.
func TestBodiesOfBodilessOperations(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/permissions/rotate-owner", Code: owner, Body: `{"x":1}`}),
			http.StatusBadRequest, "bad_request")
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/permissions/rotate-owner", Code: owner, Body: `[1]`}),
			http.StatusBadRequest, "bad_request")
		expect(t, e.get("/lists/"+ref, owner), http.StatusOK) // the code was not rotated
		r := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/permissions/rotate-owner", Code: owner, Body: `{}`}), http.StatusOK)
		owner = r.str("ownerCode")
		r = expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/permissions/rotate-owner", Code: owner, Body: `null`}), http.StatusOK)
		owner = r.str("ownerCode")

		acct := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
		h := map[string]string{"X-Account-Key": acct}
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/rollup", Code: owner, Body: `{"foo":1}`, Header: h}),
			http.StatusBadRequest, "bad_request")
		expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/rollup", Code: owner, Header: h}), http.StatusOK)

		lists := expect(t, e.do(req{Method: "GET", Path: "/lists", Code: acct}), http.StatusOK)
		require.Equal(t, "private, no-cache", lists.Header.Get("Cache-Control"))
	})
}

// TestTextRules: C1 controls (NEL among them) are control characters like
// C0 ones; RFC 3339's lower-case t and z are date-times, offsets of
// ±24:00 are not; the messages name the problem.
func TestTextRules(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		for _, s := range []string{"a\u0080b", "a\u0085b", "a\u009fb"} {
			expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task(s)}), http.StatusBadRequest, "bad_request")
			expectProblem(t, e.do(req{Method: "POST", Path: "/lists", Body: map[string]any{"title": s}}), http.StatusBadRequest, "bad_request")
		}
		// The neighbours of the C1 block are text.
		e.addYap(ref, owner, task("a\u007eb\u00a0c"))
		y := e.addYap(ref, owner, map[string]any{"kind": "task", "content": "x", "status": "open", "dueAt": "2026-01-01t10:00:00z"})
		require.Equal(t, "2026-01-01T10:00:00.000Z", y["dueAt"])
		// RFC 3339 offsets run to ±23:59 (Go's parser takes ±24:xx too).
		y = e.addYap(ref, owner, map[string]any{"kind": "task", "content": "x", "status": "open", "dueAt": "2026-01-01T00:00:00-23:59"})
		require.Equal(t, "2026-01-01T23:59:00.000Z", y["dueAt"])
		for _, due := range []string{"2026-01-01T00:00:00-24:00", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+24:30"} {
			r := e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner,
				Body: map[string]any{"kind": "task", "content": "x", "status": "open", "dueAt": due}})
			expectProblem(t, r, http.StatusBadRequest, "bad_request")
			require.Contains(t, r.JSON["detail"], "dueAt must be an RFC 3339 date-time", due)
		}
		// A date-time whose UTC form leaves the years 0000-9999 could not be
		// answered in RFC 3339 UTC (R6): refused, by POST and PATCH, and the
		// yap stays as it was. The edges pass.
		for _, c := range []struct{ field, at string }{
			{"dueAt", "9999-12-31T23:59:59-23:59"},
			{"dueAt", "9999-12-31T23:59:59.999-00:01"},
			{"startsAt", "0000-01-01T00:00:00+00:01"},
		} {
			body := map[string]any{"kind": "task", "content": "x", "status": "open", c.field: c.at}
			if c.field == "startsAt" {
				body = map[string]any{"kind": "event", "title": "x", c.field: c.at}
			}
			r := e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: body})
			expectProblem(t, r, http.StatusBadRequest, "bad_request")
			require.Contains(t, r.JSON["detail"], c.field+" must lie between 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z", c.at)
		}
		r := e.do(req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: owner,
			Body: map[string]any{"dueAt": "9999-12-31T23:59:59-01:00"}})
		expectProblem(t, r, http.StatusBadRequest, "bad_request")
		got := e.do(req{Method: "GET", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: owner})
		require.Equal(t, http.StatusOK, got.Status)
		require.Equal(t, "2026-01-01T23:59:00.000Z", got.JSON["dueAt"])
		for _, at := range []string{"9999-12-31T23:59:59.999Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59+23:59"} {
			y := e.addYap(ref, owner, map[string]any{"kind": "task", "content": "x", "status": "open", "dueAt": at})
			got := e.do(req{Method: "GET", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: owner})
			require.Equal(t, y["dueAt"], got.JSON["dueAt"], at)
		}
		// Messages that name the actual problem.
		for _, c := range []struct {
			body map[string]any
			want string
		}{
			{map[string]any{"kind": "note", "body": "a\r\nb"}, "body must not contain CR; line breaks are LF"},
			{map[string]any{"kind": "task", "content": "a\nb", "status": "open"}, "content must be a single line (no CR or LF)"},
			{map[string]any{"kind": "event", "title": "t"}, "startsAt is required for an event"},
			{map[string]any{"kind": "task", "content": "x"}, "status is required for a task"},
		} {
			r := e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: c.body})
			expectProblem(t, r, http.StatusBadRequest, "bad_request")
			require.Equal(t, c.want, r.JSON["detail"])
		}
	})
}
