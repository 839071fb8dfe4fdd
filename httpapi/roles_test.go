package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/yaps-dev/yaps/yaps"
)

// fixture is a list with a code of every role and a yap of two kinds.
type fixture struct {
	ref, owner         string
	codes              map[string]string // role name → code
	taskID, noteID     string
	deletedID, spareID string
	accountKey         string
}

func (e *env) fixture() *fixture {
	e.t.Helper()
	f := &fixture{codes: map[string]string{}}
	f.ref, f.owner = e.newList(nil)
	f.codes["owner"] = f.owner
	_, f.codes["editor"] = e.issue(f.ref, f.owner, yaps.RoleEditor)
	_, f.codes["viewer"] = e.issue(f.ref, f.owner, yaps.RoleViewer)
	_, f.codes["agent"] = e.issue(f.ref, f.owner, yaps.RoleAgent)
	_, f.codes["agent+yaps"] = e.issue(f.ref, f.owner, yaps.RoleAgent, "yaps:write")
	f.spareID, _ = e.issue(f.ref, f.owner, yaps.RoleViewer)
	f.taskID = e.addYap(f.ref, f.owner, task("t"))["id"].(string)
	f.noteID = e.addYap(f.ref, f.owner, map[string]any{"kind": "note", "body": "n"})["id"].(string)
	f.deletedID = e.addYap(f.ref, f.owner, task("d"))["id"].(string)
	expect(e.t, e.do(req{Method: "DELETE", Path: "/lists/" + f.ref + "/yaps/" + f.deletedID, Code: f.owner}), http.StatusNoContent)
	f.accountKey = expect(e.t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
	return f
}

// TestRoleMatrix checks every role × operation of RULINGS R5.
func TestRoleMatrix(t *testing.T) {
	t.Parallel()
	type op struct {
		name string
		req  func(f *fixture, code string) req
		ok   int
	}
	lists := func(f *fixture) string { return "/lists/" + f.ref }
	ops := []op{
		{"get list", func(f *fixture, c string) req { return req{Method: "GET", Path: lists(f), Code: c} }, 200},
		{"list yaps", func(f *fixture, c string) req { return req{Method: "GET", Path: lists(f) + "/yaps", Code: c} }, 200},
		{"get yap", func(f *fixture, c string) req {
			return req{Method: "GET", Path: lists(f) + "/yaps/" + f.taskID, Code: c}
		}, 200},
		{"snapshot", func(f *fixture, c string) req { return req{Method: "GET", Path: lists(f) + "/snapshot", Code: c} }, 200},
		{"patch list", func(f *fixture, c string) req {
			return req{Method: "PATCH", Path: lists(f), Code: c, Body: map[string]any{"title": "x"}}
		}, 200},
		{"archive list", func(f *fixture, c string) req { return req{Method: "DELETE", Path: lists(f), Code: c} }, 204},
		{"create task", func(f *fixture, c string) req {
			return req{Method: "POST", Path: lists(f) + "/yaps", Code: c, Body: task("new")}
		}, 201},
		{"create note", func(f *fixture, c string) req {
			return req{Method: "POST", Path: lists(f) + "/yaps", Code: c, Body: map[string]any{"kind": "note", "body": "b"}}
		}, 201},
		{"edit task", func(f *fixture, c string) req {
			return req{Method: "PATCH", Path: lists(f) + "/yaps/" + f.taskID, Code: c, Body: map[string]any{"status": "done"}}
		}, 200},
		{"edit note", func(f *fixture, c string) req {
			return req{Method: "PATCH", Path: lists(f) + "/yaps/" + f.noteID, Code: c, Body: map[string]any{"body": "c"}}
		}, 200},
		{"edit note, bad body", func(f *fixture, c string) req {
			return req{Method: "PATCH", Path: lists(f) + "/yaps/" + f.noteID, Code: c, Body: `{"body":`}
		}, 400},
		{"delete task", func(f *fixture, c string) req {
			return req{Method: "DELETE", Path: lists(f) + "/yaps/" + f.taskID, Code: c}
		}, 204},
		{"restore task", func(f *fixture, c string) req {
			return req{Method: "PATCH", Path: lists(f) + "/yaps/" + f.deletedID, Code: c, Body: `{"deletedAt": null}`}
		}, 200},
		{"list permissions", func(f *fixture, c string) req { return req{Method: "GET", Path: lists(f) + "/permissions", Code: c} }, 200},
		{"issue permission", func(f *fixture, c string) req {
			return req{Method: "POST", Path: lists(f) + "/permissions", Code: c, Body: map[string]any{"role": "viewer"}}
		}, 201},
		{"revoke permission", func(f *fixture, c string) req {
			return req{Method: "DELETE", Path: lists(f) + "/permissions/" + f.spareID, Code: c}
		}, 204},
		{"rotate owner", func(f *fixture, c string) req {
			return req{Method: "POST", Path: lists(f) + "/permissions/rotate-owner", Code: c}
		}, 200},
		{"rollup", func(f *fixture, c string) req {
			return req{Method: "POST", Path: lists(f) + "/rollup", Code: c, Header: map[string]string{"X-Account-Key": f.accountKey}}
		}, 200},
		{"audit", func(f *fixture, c string) req { return req{Method: "GET", Path: lists(f) + "/audit", Code: c} }, 200},
	}
	// allowed[op][role]; absent means 403.
	all := []string{"owner", "editor", "agent", "agent+yaps", "viewer"}
	allowed := map[string][]string{
		"get list": all, "list yaps": all, "get yap": all, "snapshot": all,
		"patch list":          {"owner", "editor"},
		"archive list":        {"owner"},
		"create task":         {"owner", "editor", "agent", "agent+yaps"},
		"create note":         {"owner", "editor", "agent+yaps"},
		"edit task":           {"owner", "editor", "agent", "agent+yaps"},
		"edit note":           {"owner", "editor", "agent+yaps"},
		"edit note, bad body": {"owner", "editor", "agent+yaps"},
		"delete task":         {"owner", "editor", "agent", "agent+yaps"},
		"restore task":        {"owner", "editor", "agent", "agent+yaps"},
		"list permissions":    {"owner"}, "issue permission": {"owner"}, "revoke permission": {"owner"},
		"rotate owner": {"owner"}, "rollup": {"owner"}, "audit": {"owner"},
	}
	eachBackend(t, func(t *testing.T, e *env) {
		for _, o := range ops {
			t.Run(o.name, func(t *testing.T) {
				e := e.in(t)
				for _, role := range all {
					t.Run(role, func(t *testing.T) {
						e := e.in(t)
						f := e.fixture()
						r := e.do(o.req(f, f.codes[role]))
						ok := false
						for _, a := range allowed[o.name] {
							ok = ok || a == role
						}
						if ok {
							expect(t, r, o.ok)
						} else {
							expectProblem(t, r, http.StatusForbidden, "forbidden")
						}
					})
				}
			})
		}
	})
}
