package yaps_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// An agent's scope names yap kinds, so it may not change root types outside
// the schema (R9 keeps and relays those for owners and editors), even with
// yaps:write. What it inserts there is compensated: the update is applied,
// then deleted again by a server update every peer gets, so the agent's
// own Y.Doc stays in step and its later edits are accepted. An update that
// deletes or overwrites what was there cannot be compensated and is
// refused whole, leaving nothing.
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

	// foreign is what a fresh client sees outside the yaps: unchanged by
	// any agent.
	foreign := func(d *yjs.Doc) []any {
		cfg, _ := d.GetMap("ext").Get("cfg")
		x, _ := cfg.(*yjs.Map).Get("x")
		return []any{d.GetText("notes").String(), d.GetArray("mine").Len(), d.GetMap("ext").Len(), fmt.Sprint(x)}
	}
	want := []any{"editor's", 0, 1, "1"}

	refused := map[string]func(d *yjs.Doc){
		"deletion in a root":   func(d *yjs.Doc) { d.GetText("notes").Delete(0, 3) },
		"map nested in a root": func(d *yjs.Doc) { v, _ := d.GetMap("ext").Get("cfg"); v.(*yjs.Map).Set("x", 2.0) },
		"a root key replaced":  func(d *yjs.Doc) { d.GetMap("ext").Set("cfg", "gone") },
		"insert and deletion":  func(d *yjs.Doc) { d.GetText("notes").Insert(0, "a", nil); d.GetMap("ext").Delete("cfg") },
	}
	compensated := map[string]func(d *yjs.Doc){
		"root text":   func(d *yjs.Doc) { d.GetText("notes").Insert(0, "agent ", nil) },
		"new root":    func(d *yjs.Doc) { d.GetArray("mine").Push("a", []any{1.0}, yjs.NewMap()) },
		"own typo":    func(d *yjs.Doc) { d.GetText("notes").Insert(8, " typo", nil); d.GetText("notes").Delete(9, 2) },
		"new key":     func(d *yjs.Doc) { m := yjs.NewMap(); m.Set("deep", yjs.NewText("t")); d.GetMap("ext").Set("plugin", m) },
		"nested text": func(d *yjs.Doc) { v, _ := d.GetMap("ext").Get("cfg"); v.(*yjs.Map).Set("y", yjs.NewText("new")) },
	}
	for _, scope := range []yaps.Scope{yaps.ScopeTasksWrite, yaps.ScopeYapsWrite} {
		agent := e.actor(owner, yaps.RoleAgent, scope)
		for name, fn := range refused {
			before := state(t, e, owner)
			up := edits(t, docOf(t, e, owner), fn)[0]
			requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, agent, up, nil))
			require.Equal(t, before, state(t, e, owner), "%s %s: something was applied", scope, name)
		}
		for name, fn := range compensated {
			p := newPeer(t, e, agent)
			require.NoError(t, p.send(fn), "%s %s", scope, name)
			evs := p.sync()
			require.Len(t, evs, 2, "%s %s: the update and its compensation", scope, name)
			require.Equal(t, want, foreign(docOf(t, e, owner)), "%s %s", scope, name)
			require.Equal(t, want, foreign(p.doc), "%s %s: the agent's doc", scope, name)
			// The agent's doc is in step: its next edit is accepted.
			id := "t-" + string(scope[:1]) + name[:3]
			require.NoError(t, p.send(func(d *yjs.Doc) { createTask(d, id, name) }), "%s %s", scope, name)
			_, ok := docOf(t, e, owner).GetMap("yaps").Get(id)
			require.True(t, ok, "%s %s: the agent's next task was lost", scope, name)
		}
	}

	// A valid task beside a root insertion: the task is kept, the insertion
	// undone, in one update and one compensation.
	agent := e.actor(owner, yaps.RoleAgent)
	p := newPeer(t, e, agent)
	require.NoError(t, p.send(func(d *yjs.Doc) { createT1("ok")(d); d.GetText("notes").Insert(0, "!", nil) }))
	require.Len(t, p.sync(), 2)
	got, err := e.svc.GetYap(e.ctx, owner, "t1")
	require.NoError(t, err)
	require.Equal(t, "ok", got.Content)
	require.Equal(t, want, foreign(docOf(t, e, owner)))

	// The editor may still change the roots.
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, editor, edits(t, docOf(t, e, owner), compensated["root text"])[0], nil))
	require.Equal(t, "agent editor's", docOf(t, e, owner).GetText("notes").String())
}

// state is the whole list document as one update, deletions included.
func state(t *testing.T, e *env, a *yaps.Actor) []byte {
	t.Helper()
	u, err := docOf(t, e, a).EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	return u
}

// The same holds for a formatted text outside the schema, where applying
// an update runs a second, formatting clean-up transaction after the
// client's own: the agent's insertion there is still compensated and its
// deletion still refused.
func TestAgentCannotWriteFormattedUnknownRoots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	editor := e.actor(owner, yaps.RoleEditor)
	seed := edits(t, docOf(t, e, owner), func(d *yjs.Doc) {
		txt := yjs.NewText("")
		d.GetMap("ext").Set("doc", txt)
		txt.Insert(0, "bold world", map[string]any{"bold": true})
	})
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, editor, seed[0], nil))
	text := func(d *yjs.Doc) *yjs.Text {
		v, _ := d.GetMap("ext").Get("doc")
		return v.(*yjs.Text)
	}
	agent := e.actor(owner, yaps.RoleAgent, yaps.ScopeYapsWrite)

	before := state(t, e, owner)
	up := edits(t, docOf(t, e, owner), func(d *yjs.Doc) { text(d).Delete(0, 2) })[0]
	requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, agent, up, nil))
	require.Equal(t, before, state(t, e, owner), "the deletion was applied")

	p := newPeer(t, e, agent)
	require.NoError(t, p.send(func(d *yjs.Doc) { text(d).Insert(5, "agent ", nil) }))
	require.Len(t, p.sync(), 2, "the update and its compensation")
	require.Equal(t, "bold world", text(docOf(t, e, owner)).String())
	require.Equal(t, "bold world", text(p.doc).String(), "the agent's doc")
}

// What an agent inserts where it may not write is deleted again, whatever
// the text shows of it: formatting and embeds in a note's text (HTTP reads
// the plain string, a rich-text client shows the link), members beside the
// schema in a note or in the list. The update is applied and compensated;
// the note and the list are as they were.
func TestAgentOutOfScopeInsertsUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	note, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("pay the invoice here")}, "", nil)
	require.NoError(t, err)
	agent := e.actor(owner, yaps.RoleAgent) // tasks:write
	d0 := docOf(t, e, owner)
	noteLen, listLen := ymap(t, d0, note.ID).Len(), d0.GetMap("list").Len()
	for name, edit := range map[string]func(d *yjs.Doc){
		"link": func(d *yjs.Doc) {
			text(t, ymap(t, d, note.ID), "body").Format(0, 3, map[string]any{"link": "https://evil.example"})
		},
		"embed": func(d *yjs.Doc) {
			text(t, ymap(t, d, note.ID), "body").InsertEmbed(4, map[string]any{"image": "x.png"}, nil)
		},
		"note member": func(d *yjs.Doc) { ymap(t, d, note.ID).Set("agentNote", "x") },
		"list member": func(d *yjs.Doc) { d.GetMap("list").Set("theme", "agent's") },
	} {
		require.NoError(t, newPeer(t, e, agent).send(func(d *yjs.Doc) { edit(d) }), name)
		d := docOf(t, e, owner)
		require.Equal(t, []yjs.Delta{{Insert: "pay the invoice here"}}, text(t, ymap(t, d, note.ID), "body").ToDelta(), name)
		require.Equal(t, noteLen, ymap(t, d, note.ID).Len(), name)
		require.Equal(t, listLen, d.GetMap("list").Len(), name)
	}
}
