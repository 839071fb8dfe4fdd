package ysync

import (
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// peer is a Go Yjs document synced over a raw protocol client.
type peer struct {
	t   *testing.T
	c   *client
	doc *yjs.Doc
	out [][]byte // local updates not yet sent
}

func newPeer(t *testing.T, c *client) *peer {
	p := &peer{t: t, c: c, doc: yjs.NewDoc()}
	p.doc.OnUpdate(func(u []byte, origin any) {
		if origin != p {
			p.out = append(p.out, u)
		}
	})
	c.write(AppendSyncStep1(nil, p.doc.EncodeStateVector()))
	p.until(func() bool { return p.doc.GetMap("list").Has("title") })
	return p
}

// edit changes the local document and sends the update.
func (p *peer) edit(fn func(d *yjs.Doc)) {
	p.doc.Transact(func(*yjs.Transaction) { fn(p.doc) }, nil)
	for _, u := range p.out {
		p.c.write(AppendUpdate(nil, u))
	}
	p.out = nil
}

// until applies incoming sync messages until cond holds.
func (p *peer) until(cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		require.True(p.t, time.Now().Before(deadline), "condition not reached")
		m := p.c.next()
		if m.Type == MsgSync && m.SyncType != SyncStep1 {
			require.NoError(p.t, p.doc.ApplyUpdate(m.Payload, p))
		}
	}
}

// setYapField sets a plain member of yap id and sends the update.
func (p *peer) setYapField(id, key string, value any) {
	p.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get(id)
		v.(*yjs.Map).Set(key, value)
	})
}

func yapField(d *yjs.Doc, id, key string) any {
	v, ok := d.GetMap("yaps").Get(id)
	if !ok {
		return nil
	}
	f, _ := v.(*yjs.Map).Get(key)
	if t, ok := f.(*yjs.Text); ok {
		return t.String()
	}
	return f
}

func TestWithService(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{})
	ref, owner := st.newList()
	viewer, viewerPerm := st.issue(ref, owner, "viewer")
	editor, _ := st.issue(ref, owner, "editor")

	for _, tc := range []struct {
		ref, code string
		status    int
	}{{"nope", owner, 404}, {ref, "yap_bogus", 401}, {ref, "", 401}} {
		_, resp, err := websocket.DefaultDialer.Dial(st.wsURL(tc.ref, tc.code), nil)
		require.Error(t, err)
		require.Equal(t, tc.status, resp.StatusCode)
		problemOf(t, resp)
		resp.Body.Close()
	}

	o := newPeer(t, st.dial(ref, owner))
	e := newPeer(t, st.dial(ref, editor))

	// An HTTP write reaches every socket at once.
	y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
	id := y["id"].(string)
	o.until(func() bool { return yapField(o.doc, id, "content") == "milk" })
	e.until(func() bool { return yapField(e.doc, id, "content") == "milk" })

	// A sync write is visible over HTTP; the server fills in its members.
	e.edit(func(d *yjs.Doc) {
		m := yjs.NewMap()
		m.Set("kind", "task")
		m.Set("content", yjs.NewText("eggs"))
		m.Set("status", "open")
		d.GetMap("yaps").Set("sync-1", m)
	})
	// Updates are durable before they are relayed: once the echo (and the
	// server's fill-in) is back, HTTP serves the yap.
	o.until(func() bool { return yapField(o.doc, "sync-1", "createdAt") != nil })
	e.until(func() bool { return yapField(e.doc, "sync-1", "createdAt") != nil })
	require.Equal(t, "eggs", st.yaps(ref, owner)["sync-1"]["content"])

	// Concurrent text edits merge per character.
	o.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get(id)
		f, _ := v.(*yjs.Map).Get("content")
		f.(*yjs.Text).Insert(0, "oat ", nil)
	})
	e.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get(id)
		f, _ := v.(*yjs.Map).Get("content")
		f.(*yjs.Text).Insert(4, "!", nil)
	})
	o.until(func() bool { return yapField(o.doc, id, "content") == "oat milk!" })
	e.until(func() bool { return yapField(e.doc, id, "content") == "oat milk!" })
	require.Equal(t, "oat milk!", st.yaps(ref, owner)[id]["content"])

	// An invalid write is compensated, and every peer gets the fix.
	e.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get(id)
		v.(*yjs.Map).Set("status", "bogus")
	})
	o.until(func() bool { return yapField(o.doc, id, "status") == "open" })
	e.until(func() bool { return yapField(e.doc, id, "status") == "open" })
	require.Equal(t, "open", st.yaps(ref, owner)[id]["status"])

	// A viewer reads but never writes.
	v := newPeer(t, st.dial(ref, viewer))
	require.Equal(t, "oat milk!", yapField(v.doc, id, "content"))
	v.setYapField(id, "status", "done")
	require.Equal(t, "permission denied", v.c.nextOf(MsgAuth).Reason)
	require.Equal(t, "open", st.yaps(ref, owner)[id]["status"])

	// Revoking the viewer's code closes its socket and refuses it after.
	st.do("DELETE", "/lists/"+ref+"/permissions/"+viewerPerm, owner, nil, 204)
	require.Equal(t, CloseRevoked, v.c.closed())
	_, resp, err := websocket.DefaultDialer.Dial(st.wsURL(ref, viewer), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp.Body.Close()

	// Archiving makes the editor read-only.
	st.do("DELETE", "/lists/"+ref, owner, nil, 204)
	st.waitReadOnly(ref, 5*time.Second)
	e.setYapField(id, "status", "done")
	require.Equal(t, "permission denied", e.c.nextOf(MsgAuth).Reason)
	require.Equal(t, "open", st.yaps(ref, owner)[id]["status"])
}

// viewerAndTask makes a list with an open task "oat milk" and a viewer code.
func viewerAndTask(t *testing.T) (st *stack, ref, owner, viewer, id string) {
	t.Helper()
	st = newStack(t, Config{})
	ref, owner = st.newList()
	viewer, _ = st.issue(ref, owner, "viewer")
	y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "oat milk", "status": "open"}, 201)
	return st, ref, owner, viewer, y["id"].(string)
}

// A viewer that reconnects with a synced document answers our step 1 with
// its delete set; that is not a write and gets no denial.
func TestViewerReconnectIsNotAWrite(t *testing.T) {
	t.Parallel()
	st, ref, owner, viewer, id := viewerAndTask(t)
	st.do("PATCH", "/lists/"+ref+"/yaps/"+id, owner, map[string]any{"content": "milk"}, 200) // a deletion

	p := newPeer(t, st.dial(ref, viewer))
	p.until(func() bool { return yapField(p.doc, id, "content") == "milk" })
	full, err := p.doc.EncodeStateAsUpdate(nil)
	require.NoError(t, err)

	again := st.dial(ref, viewer)
	again.write(AppendSyncStep2(nil, full))
	again.quiet()
	// Only the answer to our step 1 is checked (decoding a step 2 costs
	// the server; a reader must not make it do so in a loop): the same
	// step 2 again is a write.
	again.write(AppendSyncStep2(nil, full))
	require.Equal(t, "permission denied", again.nextOf(MsgAuth).Reason)
	// A real edit is still refused.
	p.setYapField(id, "status", "done")
	require.Equal(t, "permission denied", p.c.nextOf(MsgAuth).Reason)
}

// syncedCopy returns a local Y.Doc holding what a client of code got once
// synced with the list (yap id has its content).
func syncedCopy(t *testing.T, st *stack, ref, code, id string) *yjs.Doc {
	t.Helper()
	p := newPeer(t, st.dial(ref, code))
	p.until(func() bool { return yapField(p.doc, id, "content") == "oat milk" })
	full, err := p.doc.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	local := yjs.NewDoc()
	require.NoError(t, local.ApplyUpdate(full, nil))
	return local
}

// A viewer's step 2 whose new structs do not start at clock 0 (its first
// edit never reached the server) is still a write, and is denied.
func TestViewerStep2WithLaterStructsIsAWrite(t *testing.T) {
	t.Parallel()
	st, ref, _, viewer, id := viewerAndTask(t)
	local := syncedCopy(t, st, ref, viewer, id)
	setStatus := func(s string) {
		local.Transact(func(*yjs.Transaction) {
			v, _ := local.GetMap("yaps").Get(id)
			v.(*yjs.Map).Set("status", s)
		}, nil)
	}
	setStatus("done")
	afterFirst := local.EncodeStateVector()
	setStatus("open")
	second, err := local.EncodeStateAsUpdate(afterFirst)
	require.NoError(t, err)

	c := st.dial(ref, viewer)
	c.write(AppendSyncStep2(nil, second))
	require.Equal(t, "permission denied", c.nextOf(MsgAuth).Reason)
}

// A viewer's step 2 that holds only a deletion (no new structs) is a
// write too: denied, and the server keeps the yap.
func TestViewerStep2WithOnlyADeletionIsAWrite(t *testing.T) {
	t.Parallel()
	st, ref, owner, viewer, id := viewerAndTask(t)
	local := syncedCopy(t, st, ref, viewer, id)
	local.GetMap("yaps").Delete(id)
	deletion, err := local.EncodeStateAsUpdate(local.EncodeStateVector())
	require.NoError(t, err)

	c := st.dial(ref, viewer)
	c.write(AppendSyncStep2(nil, deletion))
	require.Equal(t, "permission denied", c.nextOf(MsgAuth).Reason)
	st.do("GET", "/lists/"+ref+"/yaps/"+id, owner, nil, 200)
}

// A burst of updates from one client is stored in fewer writes (merged),
// and every peer ends with every edit.
func TestBurstIsMerged(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{})
	ref, owner := st.newList()
	y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "", "status": "open"}, 201)
	id := y["id"].(string)
	a := newPeer(t, st.dial(ref, owner))
	b := newPeer(t, st.dial(ref, owner))
	a.until(func() bool { return yapField(a.doc, id, "content") == "" })
	before := st.do("GET", "/lists/"+ref, owner, nil, 200)["list"].(map[string]any)["docVersion"].(float64)

	want := ""
	for i := 0; i < 60; i++ {
		s := string(rune('a' + i%26))
		want += s
		a.edit(func(d *yjs.Doc) {
			v, _ := d.GetMap("yaps").Get(id)
			f, _ := v.(*yjs.Map).Get("content")
			f.(*yjs.Text).Insert(f.(*yjs.Text).Len(), s, nil)
		})
	}
	b.until(func() bool { return yapField(b.doc, id, "content") == want })
	a.until(func() bool { return yapField(a.doc, id, "content") == want })
	require.Equal(t, want, st.yaps(ref, owner)[id]["content"])
	after := st.do("GET", "/lists/"+ref, owner, nil, 200)["list"].(map[string]any)["docVersion"].(float64)
	t.Logf("60 updates stored in %v writes", after-before)
	require.LessOrEqual(t, after-before, 60.0)
}
