package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// RULINGS R3 checks the role and scope, then that the yap exists, and the
// body last. A create by an agent whose scope does not reach the kind (the
// body's, else the list's) was judged by its body first (400), and so was
// a PATCH of an unknown yap, or of a deleted one that is not a restore
// (HTTP review).
func TestScopeAndExistenceBeforeBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	ref, owner := e.newList(nil)                    // a task list
	_, agent := e.issue(ref, owner, yaps.RoleAgent) // tasks:write
	for _, body := range []any{
		map[string]any{"kind": "note", "body": "x"},
		`{"kind":"note","body":5}`,
		`{"kind":"note","body":"x","zzz":1}`,
		`{"kind":"note","body":"x","content":"y"}`,
	} {
		expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: agent, Body: body}), http.StatusForbidden, "forbidden")
	}
	// In scope, the body is judged.
	expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: agent, Body: `{"content":5}`}), http.StatusBadRequest, "bad_request")
	expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: agent, Body: `{"kind":"nope","content":"x"}`}), http.StatusBadRequest, "bad_request")
	nref, nowner := e.newList(map[string]any{"kind": "note"})
	_, nagent := e.issue(nref, nowner, yaps.RoleAgent)
	expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + nref + "/yaps", Code: nagent, Body: `{"body":5}`}), http.StatusForbidden, "forbidden")

	missing := "/lists/" + ref + "/yaps/01a20546-0000-7000-8000-000000000000"
	for _, body := range []any{map[string]any{"content": "x"}, `{"content":5}`, `{"zzz":1}`, `{bad`} {
		expectProblem(t, e.do(req{Method: "PATCH", Path: missing, Code: owner, Body: body}), http.StatusNotFound, "not_found")
	}

	y := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: map[string]any{"content": "x", "status": "open"}}), http.StatusCreated)
	path := "/lists/" + ref + "/yaps/" + y.str("id")
	expect(t, e.do(req{Method: "DELETE", Path: path, Code: owner}), http.StatusNoContent)
	for _, body := range []any{`{"content":5}`, `{"content":"y"}`, `{bad`, `{"deletedAt":"2026-03-01T12:00:00Z"}`} {
		expectProblem(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: body}), http.StatusNotFound, "not_found")
	}
	// A restore is judged by its body.
	expectProblem(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: `{"deletedAt":null,"content":5}`}), http.StatusBadRequest, "bad_request")
	got := expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: `{"deletedAt":null,"content":"z"}`}), http.StatusOK)
	require.Equal(t, "z", got.str("content"))
}

// A retry of a yap create with the same Idempotency-Key and body replays
// the first answer even after the list was archived meanwhile (RULINGS
// R6); it was 403, so a client that lost the 201 concluded the yap was
// never created (HTTP review). A new create, or another body, is still
// refused as archived.
func TestReplayAfterArchive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	ref, owner := e.newList(nil)
	body := `{"kind":"task","content":"buy milk","status":"open"}`
	h := map[string]string{"Idempotency-Key": "5b0d8a3e-7c1f-4a52-9d2e-0f6b1c9a7e44"}
	first := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: body, Header: h}), http.StatusCreated)
	expect(t, e.do(req{Method: "DELETE", Path: "/lists/" + ref, Code: owner}), http.StatusNoContent)
	again := expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: body, Header: h}), http.StatusCreated)
	require.Equal(t, first.str("id"), again.str("id"))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

	expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: `{"content":"other"}`, Header: h}), http.StatusForbidden, "forbidden")
	expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: body}), http.StatusForbidden, "forbidden")
	expectProblem(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: body,
		Header: map[string]string{"Idempotency-Key": "6b0d8a3e-7c1f-4a52-9d2e-0f6b1c9a7e44"}}), http.StatusForbidden, "forbidden")
}
