package yaps_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// An agent's scope names yap kinds: an update of an agent that changes a
// root type outside the schema (R9 keeps and relays those for owners and
// editors) is refused whole, even with yaps:write, and leaves nothing.
func TestAgentCannotWriteUnknownRoots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	editor := e.actor(owner, yaps.RoleEditor)
	// An editor's client keeps its own data beside the schema: a root text
	// and a root map holding a nested map.
	seed := edits(t, docOf(t, e, owner), func(d *yjs.Doc) {
		d.GetText("notes").Insert(0, "editor's", nil)
		nested := yjs.NewMap()
		nested.Set("x", 1.0)
		d.GetMap("ext").Set("cfg", nested)
	})
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, editor, seed[0], nil))

	cases := map[string]func(d *yjs.Doc){
		"root text":                  func(d *yjs.Doc) { d.GetText("notes").Insert(0, "agent ", nil) },
		"new root":                   func(d *yjs.Doc) { d.GetArray("mine").Push([]any{"a"}) },
		"deletion in a root":         func(d *yjs.Doc) { d.GetText("notes").Delete(0, 3) },
		"map nested in a root":       func(d *yjs.Doc) { v, _ := d.GetMap("ext").Get("cfg"); v.(*yjs.Map).Set("x", 2.0) },
		"a valid task beside a root": func(d *yjs.Doc) { createT1("ok")(d); d.GetText("notes").Insert(0, "!", nil) },
	}
	for _, scope := range []yaps.Scope{yaps.ScopeTasksWrite, yaps.ScopeYapsWrite} {
		agent := e.actor(owner, yaps.RoleAgent, scope)
		for name, fn := range cases {
			before := state(t, e, owner)
			up := edits(t, docOf(t, e, owner), fn)[0]
			requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, agent, up, nil))
			require.Equal(t, before, state(t, e, owner), "%s %s: something was applied", scope, name)
		}
	}
	d := docOf(t, e, owner)
	require.Equal(t, "editor's", d.GetText("notes").String())
	_, ok := d.GetMap("yaps").Get("t1")
	require.False(t, ok, "the task of a refused update was kept")

	// The same task alone is the agent's to write; the editor may still
	// change the roots.
	agent := e.actor(owner, yaps.RoleAgent)
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, agent, edits(t, docOf(t, e, owner), createT1("ok"))[0], nil))
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, editor, edits(t, docOf(t, e, owner), cases["root text"])[0], nil))
	require.Equal(t, "agent editor's", docOf(t, e, owner).GetText("notes").String())
}

// state is the whole list document as one update, deletions included.
func state(t *testing.T, e *env, a *yaps.Actor) []byte {
	t.Helper()
	u, err := docOf(t, e, a).EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	return u
}
