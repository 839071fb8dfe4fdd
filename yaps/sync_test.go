package yaps_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// peer is a sync client: a Yjs doc kept in step with the service's events.
type peer struct {
	t      *testing.T
	e      *env
	a      *yaps.Actor
	doc    *yjs.Doc
	mu     sync.Mutex
	events []yaps.Event
}

func newPeer(t *testing.T, e *env, a *yaps.Actor) *peer {
	t.Helper()
	p := &peer{t: t, e: e, a: a, doc: docOf(t, e, a)}
	unsub := e.svc.Subscribe(func(ev yaps.Event) {
		if ev.Kind == yaps.EventDocUpdate && ev.ListRef == a.List.Ref {
			p.mu.Lock()
			p.events = append(p.events, ev)
			p.mu.Unlock()
		}
	})
	t.Cleanup(unsub)
	return p
}

// send makes an edit on the peer's doc and applies its update at the server.
func (p *peer) send(edit func(d *yjs.Doc)) error {
	p.t.Helper()
	u := clientUpdate(p.t, p.a, p.doc, p, edit)
	return p.e.svc.ApplyUpdate(p.e.ctx, u.Actor, u.Update, u.Origin)
}

// sync applies every event received so far (the server's relay).
func (p *peer) sync() []yaps.Event {
	p.mu.Lock()
	evs := p.events
	p.events = nil
	p.mu.Unlock()
	for _, ev := range evs {
		require.NoError(p.t, p.doc.ApplyUpdate(ev.Update, "server"))
	}
	return evs
}

func ymap(t *testing.T, d *yjs.Doc, id string) *yjs.Map {
	t.Helper()
	v, ok := d.GetMap("yaps").Get(id)
	require.True(t, ok, "yap %s not in doc", id)
	m, ok := v.(*yjs.Map)
	require.True(t, ok)
	return m
}

func text(t *testing.T, m *yjs.Map, key string) *yjs.Text {
	t.Helper()
	v, ok := m.Get(key)
	require.True(t, ok, key)
	tx, ok := v.(*yjs.Text)
	require.True(t, ok, "%s is %T", key, v)
	return tx
}

func TestDocumentLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, yaps.YapFields{Content: yaps.Set("Milk"),
		Status: yaps.Set(yaps.StatusOpen), Tags: yaps.Set([]string{"food"})}, "", nil)
	require.NoError(t, err)
	d := docOf(t, e, a)
	lm := d.GetMap("list")
	title, _ := lm.Get("title")
	kind, _ := lm.Get("kind")
	require.Equal(t, "Groceries", title)
	require.Equal(t, "task", kind)
	require.False(t, lm.Has("archivedAt"))
	m := ymap(t, d, y.ID)
	require.Equal(t, "Milk", text(t, m, "content").String())
	st, _ := m.Get("status")
	require.Equal(t, "open", st)
	id, _ := m.Get("id")
	require.Equal(t, y.ID, id)
	ca, _ := m.Get("createdAt")
	require.Equal(t, yaps.FormatTime(y.CreatedAt), ca)
	tags, _ := m.Get("tags")
	require.IsType(t, &yjs.Array{}, tags)
	require.Equal(t, []any{"food"}, tags.(*yjs.Array).ToSlice())
	require.False(t, m.Has("deletedAt"))
	require.False(t, m.Has("priority"))
}

func TestPatchIsMinimalTextEdit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("Buy milk"), "", nil)
	require.NoError(t, err)
	p := newPeer(t, e, a)
	// The peer types offline while an HTTP PATCH edits the same text.
	var offline []byte
	unsub := p.doc.OnUpdate(func(b []byte, _ any) { offline = b })
	text(t, ymap(t, p.doc, y.ID), "content").Insert(8, " today", nil)
	unsub()
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("Buy oat milk")}, "")
	require.NoError(t, err)
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, offline, p))
	got, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, "Buy oat milk today", got.Content) // merged per character, not replaced
	p.sync()
	require.Equal(t, "Buy oat milk today", text(t, ymap(t, p.doc, y.ID), "content").String())

	// Surrogate pairs survive a minimal edit.
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("Buy 😀 milk today")}, "")
	require.NoError(t, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("Buy 😁 milk today")}, "")
	require.NoError(t, err)
	p.sync()
	require.Equal(t, "Buy 😁 milk today", text(t, ymap(t, p.doc, y.ID), "content").String())
}

func TestSyncValidUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("Milk"), "", nil)
	require.NoError(t, err)
	p := newPeer(t, e, a)
	require.NoError(t, p.send(func(d *yjs.Doc) {
		text(t, ymap(t, d, y.ID), "content").Insert(4, " and bread", nil)
		ymap(t, d, y.ID).Set("status", "done")
	}))
	evs := p.sync()
	require.Len(t, evs, 1)
	require.Same(t, p, evs[0].Origin)
	got, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, "Milk and bread", got.Content)
	require.Equal(t, yaps.StatusDone, got.Status)

	// A new yap from the client; the server fills in missing server members.
	require.NoError(t, p.send(func(d *yjs.Doc) {
		m := yjs.NewMap()
		m.Set("kind", "note")
		m.Set("body", yjs.NewText("from sync"))
		d.GetMap("yaps").Set("client-1", m)
	}))
	evs = p.sync()
	require.Len(t, evs, 2)
	n, err := e.svc.GetYap(e.ctx, a, "client-1")
	require.NoError(t, err)
	require.Equal(t, "from sync", n.Body)
	require.False(t, n.CreatedAt.IsZero())
	id, _ := ymap(t, p.doc, "client-1").Get("id")
	require.Equal(t, "client-1", id)

	// A duplicate update stores nothing.
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	full, _, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, full, p))
	l2, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.Equal(t, l.DocVersion, l2.DocVersion)

	// Unknown root types are kept and relayed.
	require.NoError(t, p.send(func(d *yjs.Doc) { d.GetMap("custom").Set("x", 1.0) }))
	v, ok := docOf(t, e, a).GetMap("custom").Get("x")
	require.True(t, ok)
	require.EqualValues(t, 1, v)

	// An owner may remove a yap outright.
	require.NoError(t, p.send(func(d *yjs.Doc) { d.GetMap("yaps").Delete("client-1") }))
	_, err = e.store.Yap(e.ctx, a.List.Ref, "client-1")
	requireCode(t, yaps.ENOTFOUND, err)

	// Malformed updates are rejected.
	requireCode(t, yaps.EINVALID, e.svc.ApplyUpdate(e.ctx, a, []byte{1, 2, 3, 4, 5}, p))
	// HTTP still works after a rejected update.
	_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("after"), "", nil)
	require.NoError(t, err)
}

func TestSyncCompensation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("Milk"), "", nil)
	require.NoError(t, err)
	n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("note")}, "", nil)
	require.NoError(t, err)
	agent := e.actor(owner, yaps.RoleAgent)
	long := make([]byte, 1001)
	for i := range long {
		long[i] = 'x'
	}
	cases := []struct {
		name  string
		actor *yaps.Actor
		edit  func(t *testing.T, d *yjs.Doc)
	}{
		{"multi-line content", owner, func(t *testing.T, d *yjs.Doc) {
			text(t, ymap(t, d, y.ID), "content").Insert(2, "\n", nil)
		}},
		{"content too long", owner, func(t *testing.T, d *yjs.Doc) {
			text(t, ymap(t, d, y.ID), "content").Insert(0, string(long), nil)
		}},
		{"bad status", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Set("status", "later") }},
		{"status wrong type", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Set("status", 3.0) }},
		{"status removed", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Delete("status") }},
		{"kind changed", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Set("kind", "note") }},
		{"createdAt changed", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Set("createdAt", "2000-01-01T00:00:00.000Z") }},
		{"updatedAt moved back", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Set("updatedAt", "1999-01-01T00:00:00.000Z") }},
		{"field of another kind", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Set("body", yjs.NewText("b")) }},
		{"yap replaced by a string", owner, func(t *testing.T, d *yjs.Doc) { d.GetMap("yaps").Set(y.ID, "gone") }},
		{"agent edits a note", agent, func(t *testing.T, d *yjs.Doc) {
			text(t, ymap(t, d, n.ID), "body").Insert(0, "hacked ", nil)
		}},
		{"list title too long", owner, func(t *testing.T, d *yjs.Doc) { d.GetMap("list").Set("title", string(long)) }},
		{"list kind invalid", owner, func(t *testing.T, d *yjs.Doc) { d.GetMap("list").Set("kind", "widgets") }},
		{"list title removed", owner, func(t *testing.T, d *yjs.Doc) { d.GetMap("list").Delete("title") }},
		{"list kind removed", owner, func(t *testing.T, d *yjs.Doc) { d.GetMap("list").Delete("kind") }},
		{"yap id removed", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Delete("id") }},
		{"yap createdAt removed", owner, func(t *testing.T, d *yjs.Doc) { ymap(t, d, y.ID).Delete("createdAt") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Not parallel: the cases share the list and check it is unchanged.
			p := newPeer(t, e, c.actor)
			before, err := e.svc.ListYaps(e.ctx, owner, "", 200, true)
			require.NoError(t, err)
			lb, err := e.store.List(e.ctx, owner.List.Ref)
			require.NoError(t, err)
			require.NoError(t, p.send(func(d *yjs.Doc) { c.edit(t, d) }))
			evs := p.sync()
			require.Len(t, evs, 2, "the update and its compensation")
			require.Nil(t, evs[1].Origin)
			require.Equal(t, evs[0].Seq+1, evs[1].Seq)
			after, err := e.svc.ListYaps(e.ctx, owner, "", 200, true)
			require.NoError(t, err)
			require.Equal(t, before.Yaps, after.Yaps)
			la, err := e.store.List(e.ctx, owner.List.Ref)
			require.NoError(t, err)
			require.Equal(t, lb.Title, la.Title)
			require.Equal(t, lb.Kind, la.Kind)
			require.Equal(t, lb.DocVersion+2, la.DocVersion)
			// The peer, having received the compensation, holds valid data again.
			require.Equal(t, "Milk", text(t, ymap(t, p.doc, y.ID), "content").String())
			require.Equal(t, "note", text(t, ymap(t, p.doc, n.ID), "body").String())
			require.False(t, ymap(t, p.doc, y.ID).Has("body"))
			title, _ := p.doc.GetMap("list").Get("title")
			require.Equal(t, "Groceries", title)
			kind, _ := p.doc.GetMap("list").Get("kind")
			require.Equal(t, "task", kind)
			id, _ := ymap(t, p.doc, y.ID).Get("id")
			require.Equal(t, y.ID, id)
			ca, _ := ymap(t, p.doc, y.ID).Get("createdAt")
			require.Equal(t, yaps.FormatTime(y.CreatedAt), ca)
			// And a fresh client sees the same.
			require.Equal(t, "Milk", text(t, ymap(t, docOf(t, e, owner), y.ID), "content").String())
		})
	}

	t.Run("invalid new yap removed", func(t *testing.T) {
		p := newPeer(t, e, agent)
		require.NoError(t, p.send(func(d *yjs.Doc) {
			m := yjs.NewMap()
			m.Set("kind", "task")
			m.Set("content", yjs.NewText("no status"))
			d.GetMap("yaps").Set("bad-1", m)
			m2 := yjs.NewMap()
			m2.Set("kind", "note")
			m2.Set("body", yjs.NewText("agents may not"))
			d.GetMap("yaps").Set("bad-2", m2)
			m3 := yjs.NewMap()
			m3.Set("kind", "task")
			m3.Set("status", "open")
			m3.Set("content", yjs.NewText("bad id"))
			d.GetMap("yaps").Set("not a valid id!", m3)
		}))
		p.sync()
		for _, id := range []string{"bad-1", "bad-2", "not a valid id!"} {
			_, ok := p.doc.GetMap("yaps").Get(id)
			require.False(t, ok, id)
			_, err := e.store.Yap(e.ctx, owner.List.Ref, id)
			requireCode(t, yaps.ENOTFOUND, err)
		}
	})

	t.Run("read-only actor", func(t *testing.T) {
		viewer := e.actor(owner, yaps.RoleViewer)
		p := newPeer(t, e, viewer)
		lb, err := e.store.List(e.ctx, owner.List.Ref)
		require.NoError(t, err)
		requireCode(t, yaps.EFORBIDDEN, p.send(func(d *yjs.Doc) { ymap(t, d, y.ID).Set("status", "done") }))
		la, err := e.store.List(e.ctx, owner.List.Ref)
		require.NoError(t, err)
		require.Equal(t, lb.DocVersion, la.DocVersion)
		require.Empty(t, p.sync())
	})
}

func TestMultiProcess(t *testing.T) {
	t.Parallel()
	e1 := newEnv(t)
	s2, err := yaps.NewService(yaps.Config{Store: e1.store, Now: e1.clock.Now, PurgeInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	a := e1.list()
	y, _, err := e1.svc.CreateYap(e1.ctx, a, yaps.KindTask, task("one"), "", nil)
	require.NoError(t, err)
	// Process 2 loads the document and edits; process 1 catches up inside its write.
	_, err = s2.UpdateYap(e1.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("one two")}, "")
	require.NoError(t, err)
	_, err = e1.svc.UpdateYap(e1.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("one two three")}, "")
	require.NoError(t, err)
	var got []yaps.Event
	var mu sync.Mutex
	unsub := s2.Subscribe(func(ev yaps.Event) { mu.Lock(); got = append(got, ev); mu.Unlock() })
	defer unsub()
	require.NoError(t, s2.Refresh(e1.ctx, a.List.Ref))
	mu.Lock()
	require.Len(t, got, 1)
	mu.Unlock()
	snap, _, err := s2.Snapshot(e1.ctx, a, nil)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(snap, nil))
	require.Equal(t, "one two three", text(t, ymap(t, d, y.ID), "content").String())
	sv1, err := e1.svc.StateVector(e1.ctx, a.List.Ref)
	require.NoError(t, err)
	sv2, err := s2.StateVector(e1.ctx, a.List.Ref)
	require.NoError(t, err)
	require.Equal(t, sv1, sv2)
	diff, err := s2.EncodeState(e1.ctx, a.List.Ref, sv1)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0}, diff)
}

func TestCompaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *yaps.Config) { c.CompactAfter = 5 })
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindNote, yaps.YapFields{Body: yaps.Set("")}, "", nil)
	require.NoError(t, err)
	body := ""
	for i := range 12 {
		body += string(rune('a' + i))
		_, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Body: yaps.Set(body)}, "")
		require.NoError(t, err)
	}
	// The 6th update makes the log due (more than CompactAfter updates, and
	// no state yet), so a background compaction folds at least the first 6
	// of the 14 into the state. Later ones are small next to the state and
	// may stay logged (see Config.CompactAfter).
	require.Eventually(t, func() bool {
		n, err := e.store.UpdateCount(e.ctx, a.List.Ref)
		return err == nil && n <= 14-6
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, e.svc.CompactNow(e.ctx, a.List.Ref))
	n, err := e.store.UpdateCount(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.Zero(t, n)
	// A second process loads from the compacted state.
	s2, err := yaps.NewService(yaps.Config{Store: e.store, Now: e.clock.Now, PurgeInterval: -1})
	require.NoError(t, err)
	defer s2.Close()
	_, err = s2.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Body: yaps.Set(body + "!")}, "")
	require.NoError(t, err)
	got, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Body: yaps.Set(body + "!?")}, "")
	require.NoError(t, err)
	require.Equal(t, body+"!?", got.Body)
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.EqualValues(t, 2+12+2, l.DocVersion)
}

func TestPollingAcrossProcesses(t *testing.T) {
	t.Parallel()
	e1 := newEnv(t)
	s2, err := yaps.NewService(yaps.Config{Store: e1.store, Now: e1.clock.Now, PurgeInterval: -1, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	a := e1.list()
	got := make(chan yaps.Event, 10)
	unsub := s2.Subscribe(func(ev yaps.Event) {
		if ev.Kind == yaps.EventDocUpdate {
			got <- ev
		}
	})
	defer unsub()
	// A sync room on process 2 reads the state vector: the list is watched.
	_, err = s2.StateVector(e1.ctx, a.List.Ref)
	require.NoError(t, err)
	y, _, err := e1.svc.CreateYap(e1.ctx, a, yaps.KindTask, task("from process 1"), "", nil)
	require.NoError(t, err)
	select {
	case ev := <-got:
		d := yjs.NewDoc()
		snap, _, err := e1.svc.Snapshot(e1.ctx, a, nil)
		require.NoError(t, err)
		require.NoError(t, d.ApplyUpdate(snap, nil))
		c := yjs.NewDoc()
		full, err := s2.EncodeState(e1.ctx, a.List.Ref, nil)
		require.NoError(t, err)
		require.NoError(t, c.ApplyUpdate(full, nil))
		require.Equal(t, d.ToJSON(), c.ToJSON())
		require.EqualValues(t, 2, ev.Seq)
		_ = y
	case <-time.After(time.Second):
		t.Fatal("process 2 did not see the write of process 1 within a second")
	}
}

func TestPollingSeesRevocationsAndArchive(t *testing.T) {
	t.Parallel()
	e1 := newEnv(t)
	s2, err := yaps.NewService(yaps.Config{Store: e1.store, Now: e1.clock.Now, PurgeInterval: -1, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	owner := e1.list()
	ed := e1.actor(owner, yaps.RoleEditor)
	events := make(chan yaps.Event, 20)
	unsub := s2.Subscribe(func(ev yaps.Event) {
		if ev.Kind != yaps.EventDocUpdate {
			events <- ev
		}
	})
	defer unsub()
	unpin := s2.Pin(owner.List.Ref)
	defer unpin()
	// Wait until the poller has seen the permissions once (its baseline):
	// then the revocation of a throwaway code comes through.
	for seen := false; !seen; {
		tmp := e1.actor(owner, yaps.RoleViewer)
		time.Sleep(50 * time.Millisecond) // a poll sees tmp (a slow machine retries)
		require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, tmp.Permission.ID))
		timeout := time.After(500 * time.Millisecond)
	wait:
		for {
			select {
			case ev := <-events:
				if ev.Kind == yaps.EventCodeRevoked && ev.PermissionID == tmp.Permission.ID {
					seen = true
					break wait
				}
			case <-timeout:
				break wait
			}
		}
	}
	require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, ed.Permission.ID))
	require.NoError(t, e1.svc.ArchiveList(e1.ctx, owner, ""))
	seen := map[yaps.EventKind]yaps.Event{}
	deadline := time.After(time.Second)
	for len(seen) < 2 {
		select {
		case ev := <-events:
			seen[ev.Kind] = ev
		case <-deadline:
			t.Fatalf("events seen on process 2: %v", seen)
		}
	}
	require.Equal(t, ed.Permission.ID, seen[yaps.EventCodeRevoked].PermissionID)
	require.Equal(t, owner.List.Ref, seen[yaps.EventListChanged].ListRef)
}

// TestSyncStampsUpdatedAt: a sync edit that leaves updatedAt alone gets it
// stamped by the server, at most once per 10 s per yap; a client may move
// updatedAt forward itself.
func TestSyncStampsUpdatedAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("a"), "", nil)
	require.NoError(t, err)
	p := newPeer(t, e, owner)
	typeOn := func(s string) []yaps.Event {
		t.Helper()
		require.NoError(t, p.send(func(d *yjs.Doc) {
			tx := text(t, ymap(t, d, y.ID), "content")
			tx.Insert(tx.Len(), s, nil)
		}))
		return p.sync()
	}
	updatedAt := func() time.Time {
		t.Helper()
		got, err := e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		v, _ := ymap(t, p.doc, y.ID).Get("updatedAt")
		require.Equal(t, yaps.FormatTime(got.UpdatedAt), v, "the document and HTTP agree")
		return got.UpdatedAt
	}
	created := updatedAt()

	e.clock.Advance(9 * time.Second)
	require.Len(t, typeOn("b"), 1, "within 10 s: no stamp")
	require.Equal(t, created, updatedAt())

	e.clock.Advance(2 * time.Second)
	require.Len(t, typeOn("c"), 2, "the edit and the server's stamp")
	stamped := updatedAt()
	require.Equal(t, yaps.Truncate(e.clock.Now()), stamped)

	e.clock.Advance(5 * time.Second)
	require.Len(t, typeOn("d"), 1)
	require.Equal(t, stamped, updatedAt())

	// The client sets updatedAt itself: kept, no stamp.
	e.clock.Advance(time.Minute)
	mine := e.clock.Now().Add(-time.Second).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	require.NoError(t, p.send(func(d *yjs.Doc) {
		m := ymap(t, d, y.ID)
		text(t, m, "content").Insert(0, "x", nil)
		m.Set("updatedAt", mine)
	}))
	require.Len(t, p.sync(), 1)
	require.Equal(t, mine, yaps.FormatTime(updatedAt()))

	// Two keystrokes in one write are stamped once.
	e.clock.Advance(time.Minute)
	d := docOf(t, e, owner)
	type1 := clientUpdate(t, owner, d, "k1", func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(0, "1", nil) })
	type2 := clientUpdate(t, owner, d, "k2", func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(0, "2", nil) })
	for _, err := range e.svc.ApplyUpdates(e.ctx, owner.List.Ref, []yaps.ClientUpdate{type1, type2}) {
		require.NoError(t, err)
	}
	require.Len(t, p.sync(), 3, "two updates and one stamp")
	require.Equal(t, yaps.Truncate(e.clock.Now()), updatedAt())
}

// TestSyncNormalizesLayout: a valid write in another shape than R9's (a
// plain string for a Y.Text, a plain array for tags) is kept, and the
// server puts it in R9's layout for every peer.
func TestSyncNormalizesLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("a"), "", nil)
	require.NoError(t, err)
	n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Title: yaps.Set("t"), Body: yaps.Set("b")}, "", nil)
	require.NoError(t, err)
	p := newPeer(t, e, owner)
	// One shape at a time, on yaps that need nothing else.
	for _, c := range []struct {
		name string
		edit func(d *yjs.Doc)
	}{
		{"plain content", func(d *yjs.Doc) { ymap(t, d, y.ID).Set("content", "plain content") }},
		{"plain tags", func(d *yjs.Doc) { ymap(t, d, y.ID).Set("tags", []any{"x", "y"}) }},
		{"plain note title", func(d *yjs.Doc) { ymap(t, d, n.ID).Set("title", "plain title") }},
		{"plain note body", func(d *yjs.Doc) { ymap(t, d, n.ID).Set("body", "plain body") }},
	} {
		require.NoError(t, p.send(c.edit))
		require.Len(t, p.sync(), 2, "%s: the update and the server's normalization", c.name)
	}
	for _, d := range []*yjs.Doc{p.doc, docOf(t, e, owner)} {
		require.Equal(t, "plain content", text(t, ymap(t, d, y.ID), "content").String())
		tags, _ := ymap(t, d, y.ID).Get("tags")
		require.IsType(t, (*yjs.Array)(nil), tags)
		require.Equal(t, []any{"x", "y"}, tags.(*yjs.Array).ToSlice())
		require.Equal(t, "plain title", text(t, ymap(t, d, n.ID), "title").String())
		require.Equal(t, "plain body", text(t, ymap(t, d, n.ID), "body").String())
	}
	got, err := e.svc.GetYap(e.ctx, owner, y.ID)
	require.NoError(t, err)
	require.Equal(t, "plain content", got.Content)
	require.Equal(t, []string{"x", "y"}, got.Tags)

	// A new yap with plain members gets them in R9's shape with its
	// server members.
	require.NoError(t, p.send(func(d *yjs.Doc) {
		m := yjs.NewMap()
		d.GetMap("yaps").Set("plain-event", m)
		m.Set("kind", "event")
		m.Set("title", "party")
		m.Set("startsAt", "2026-05-01T18:00:00.000Z")
	}))
	p.sync()
	require.Equal(t, "party", text(t, ymap(t, p.doc, "plain-event"), "title").String())

	// In R9's layout already: nothing more than the update itself.
	require.NoError(t, p.send(func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(0, ">", nil) }))
	require.Len(t, p.sync(), 1)

	// Typing and a plain member in one update: the yap's map changed too,
	// so its layout is checked (typing alone skips that) and normalized.
	require.NoError(t, p.send(func(d *yjs.Doc) {
		text(t, ymap(t, d, y.ID), "content").Insert(0, "<", nil)
		ymap(t, d, y.ID).Set("tags", []any{"z"})
	}))
	require.Len(t, p.sync(), 2, "the update and the server's normalization")
	tags, _ := ymap(t, p.doc, y.ID).Get("tags")
	require.IsType(t, (*yjs.Array)(nil), tags)
	require.Equal(t, "<>plain content", text(t, ymap(t, p.doc, y.ID), "content").String())
}

// TestSyncServerTimes: times a sync client sets in server members are
// kept within clockSkew (5 min) of the server's clock; further off they
// become the server's now, and the rest of the edit stands.
func TestSyncServerTimes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	p := newPeer(t, e, owner)
	at := func(d time.Duration) string { return yaps.FormatTime(e.clock.Now().Add(d)) }
	now := func() time.Time { return yaps.Truncate(e.clock.Now()) }
	get := func(id string) *yaps.Yap {
		t.Helper()
		y, err := e.store.Yap(e.ctx, owner.List.Ref, id)
		require.NoError(t, err)
		// The document agrees with the projection.
		m := ymap(t, p.doc, id)
		for key, want := range map[string]time.Time{"createdAt": y.CreatedAt, "updatedAt": y.UpdatedAt} {
			got, _ := m.Get(key)
			require.Equal(t, yaps.FormatTime(want), got, key)
		}
		if y.DeletedAt != nil {
			got, _ := m.Get("deletedAt")
			require.Equal(t, yaps.FormatTime(*y.DeletedAt), got)
		}
		return y
	}
	newTask := func(id string, members map[string]string) {
		t.Helper()
		require.NoError(t, p.send(func(d *yjs.Doc) {
			m := yjs.NewMap()
			d.GetMap("yaps").Set(id, m)
			m.Set("kind", "task")
			m.Set("status", "open")
			m.Set("content", yjs.NewText(id))
			for k, v := range members {
				m.Set(k, v)
			}
		}))
		p.sync()
	}

	// New yaps: createdAt and updatedAt within the skew are kept.
	newTask("near", map[string]string{"createdAt": at(-4 * time.Minute), "updatedAt": at(-3 * time.Minute)})
	y := get("near")
	require.Equal(t, now().Add(-4*time.Minute), y.CreatedAt)
	require.Equal(t, now().Add(-3*time.Minute), y.UpdatedAt)
	// Further off, in either direction, they become now.
	for id, created := range map[string]string{"old": "2000-01-01T00:00:00.000Z", "future": at(10 * time.Minute)} {
		newTask(id, map[string]string{"createdAt": created, "updatedAt": created})
		y := get(id)
		require.Equal(t, now(), y.CreatedAt, id)
		require.Equal(t, now(), y.UpdatedAt, id)
	}
	// A createdAt of the zero time is filled in, in the document too.
	newTask("zero", map[string]string{"id": "zero", "createdAt": "0001-01-01T00:00:00.000Z", "updatedAt": at(0)})
	require.Equal(t, now(), get("zero").CreatedAt)
	// An updatedAt before createdAt becomes now.
	newTask("backwards", map[string]string{"createdAt": at(-time.Minute), "updatedAt": at(-2 * time.Minute)})
	require.Equal(t, now(), get("backwards").UpdatedAt)

	// A deletedAt set far off becomes now: deleted, restorable for the
	// whole retention.
	e.clock.Advance(time.Hour)
	for _, c := range []struct {
		name string
		set  string
		want time.Time
	}{
		{"back-dated", "2000-01-01T00:00:00.000Z", now()},
		{"in the future", at(365 * 24 * time.Hour), now()},
		{"within the skew", at(-time.Minute), now().Add(-time.Minute)},
	} {
		require.NoError(t, p.send(func(d *yjs.Doc) { ymap(t, d, "near").Set("deletedAt", c.set) }), c.name)
		p.sync()
		y := get("near")
		require.NotNil(t, y.DeletedAt, c.name)
		require.Equal(t, c.want, *y.DeletedAt, c.name)
		require.NoError(t, p.send(func(d *yjs.Doc) { ymap(t, d, "near").Delete("deletedAt") }), c.name)
		p.sync()
		require.Nil(t, get("near").DeletedAt, c.name)
	}
	require.NoError(t, p.send(func(d *yjs.Doc) { ymap(t, d, "near").Set("deletedAt", "2000-01-01T00:00:00.000Z") }))
	p.sync()
	n, err := e.svc.Purge(e.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a back-dated deletion is not purged at once")

	// An edit with an updatedAt in the far future keeps its edit, and the
	// time becomes now; another client's later edit is not refused.
	e.clock.Advance(time.Minute)
	require.NoError(t, p.send(func(d *yjs.Doc) {
		text(t, ymap(t, d, "old"), "content").Insert(0, "a", nil)
		ymap(t, d, "old").Set("updatedAt", "2999-01-01T00:00:00.000Z")
	}))
	p.sync()
	y = get("old")
	require.Equal(t, "aold", y.Content)
	require.Equal(t, now(), y.UpdatedAt)
	// One whose clock runs behind: the edit stands, updatedAt does not
	// move back.
	e.clock.Advance(time.Minute)
	require.NoError(t, p.send(func(d *yjs.Doc) {
		text(t, ymap(t, d, "old"), "content").Insert(0, "b", nil)
		ymap(t, d, "old").Set("updatedAt", at(-2*time.Minute))
	}))
	p.sync()
	y = get("old")
	require.Equal(t, "baold", y.Content)
	require.Equal(t, now(), y.UpdatedAt)
	// One whose clock runs a day behind, on a yap last changed before that.
	e.clock.Advance(48 * time.Hour)
	require.NoError(t, p.send(func(d *yjs.Doc) {
		text(t, ymap(t, d, "old"), "content").Insert(0, "c", nil)
		ymap(t, d, "old").Set("updatedAt", at(-24*time.Hour))
	}))
	p.sync()
	require.Equal(t, now(), get("old").UpdatedAt)
	// An edit whose only change has its time rewritten is stamped too.
	e.clock.Advance(time.Minute)
	require.NoError(t, p.send(func(d *yjs.Doc) { ymap(t, d, "backwards").Set("deletedAt", "2000-01-01T00:00:00.000Z") }))
	p.sync()
	y = get("backwards")
	require.Equal(t, now(), *y.DeletedAt)
	require.Equal(t, now(), y.UpdatedAt)
}

// An agent's update that deletes anything where the agent may not write
// is refused whole: a yap outside its scope removed or replaced (putting it
// back would lose an edit another client makes to it at the same time),
// any member of such a yap changed or removed, text deleted in it, and the
// same in the list map.
func TestAgentCannotDeleteOutsideItsScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("note")}, "", nil)
	require.NoError(t, err)
	agent := e.actor(owner, yaps.RoleAgent)
	editor := e.actor(owner, yaps.RoleEditor)
	// Members an app keeps beside the schema, on the note and the list.
	require.NoError(t, newPeer(t, e, owner).send(func(d *yjs.Doc) {
		ymap(t, d, n.ID).Set("color", "red")
		d.GetMap("list").Set("theme", "dark")
	}))
	for name, edit := range map[string]func(d *yjs.Doc){
		"remove":  func(d *yjs.Doc) { d.GetMap("yaps").Delete(n.ID) },
		"replace": func(d *yjs.Doc) { d.GetMap("yaps").Set(n.ID, yjs.NewMap()) },
		"replace with a task": func(d *yjs.Doc) {
			m := yjs.NewMap()
			d.GetMap("yaps").Set(n.ID, m)
			m.Set("kind", "task")
			m.Set("status", "open")
			m.Set("content", yjs.NewText("mine"))
		},
		"text deleted":          func(d *yjs.Doc) { text(t, ymap(t, d, n.ID), "body").Delete(1, 2) },
		"member changed":        func(d *yjs.Doc) { ymap(t, d, n.ID).Set("color", "agent's") },
		"member removed":        func(d *yjs.Doc) { ymap(t, d, n.ID).Delete("color") },
		"list renamed":          func(d *yjs.Doc) { d.GetMap("list").Set("title", "mine") },
		"list member removed":   func(d *yjs.Doc) { d.GetMap("list").Delete("theme") },
		"insert, then a delete": func(d *yjs.Doc) { ymap(t, d, n.ID).Set("new", "x"); d.GetMap("list").Delete("theme") },
	} {
		v0, err := e.store.List(e.ctx, owner.List.Ref)
		require.NoError(t, err)
		// The agent and an editor start from the same state.
		ag := clientUpdate(t, agent, docOf(t, e, agent), "agent", edit)
		ed := clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
			text(t, ymap(t, d, n.ID), "body").Insert(0, "x", nil)
		})
		requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, agent, ag.Update, ag.Origin))
		v1, err := e.store.List(e.ctx, owner.List.Ref)
		require.NoError(t, err)
		require.Equal(t, v0.DocVersion, v1.DocVersion, "%s: nothing stored", name)
		require.NoError(t, e.svc.ApplyUpdate(e.ctx, editor, ed.Update, ed.Origin))
		got, err := e.svc.GetYap(e.ctx, owner, n.ID)
		require.NoError(t, err)
		require.Equal(t, yaps.KindNote, got.Kind)
		require.Equal(t, "x", got.Body[:1], "%s: the editor's edit stands", name)
		d := docOf(t, e, owner)
		color, _ := ymap(t, d, n.ID).Get("color")
		theme, _ := d.GetMap("list").Get("theme")
		_, added := ymap(t, d, n.ID).Get("new")
		require.Equal(t, []any{"red", "dark", false}, []any{color, theme, added}, name)
		// In a batch too: the agent's update is refused, the editor's applies.
		ag = clientUpdate(t, agent, docOf(t, e, agent), "agent", edit)
		ed = clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
			text(t, ymap(t, d, n.ID), "body").Insert(0, "y", nil)
		})
		errs := e.svc.ApplyUpdates(e.ctx, owner.List.Ref, []yaps.ClientUpdate{ag, ed})
		requireCode(t, yaps.EFORBIDDEN, errs[0])
		require.NoError(t, errs[1])
		got, err = e.svc.GetYap(e.ctx, owner, n.ID)
		require.NoError(t, err)
		require.Equal(t, "y", got.Body[:1], name)
	}
	// Tasks are in its scope: it may remove one.
	tk, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	require.NoError(t, newPeer(t, e, agent).send(func(d *yjs.Doc) { d.GetMap("yaps").Delete(tk.ID) }))
	_, err = e.store.Yap(e.ctx, owner.List.Ref, tk.ID)
	requireCode(t, yaps.ENOTFOUND, err)
}

// A reader's large step 1 or step 2 is decoded before the document's lock
// is taken, so readers looping such frames cannot hold up the list's
// writers (found in review: 8 viewers sending 1 MiB state vectors made an
// owner's write wait seconds). Shown with the lock held by someone else:
// what does not decode is refused without waiting for it.
func TestSyncReadsDecodeOutsideTheLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	ref := owner.List.Ref
	_, err := e.svc.StateVector(e.ctx, ref) // loaded
	require.NoError(t, err)
	var once sync.Once
	held := yaps.HoldDoc(e.svc, ref)
	release := func() { once.Do(held) }
	defer release()

	bad := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
	for name, call := range map[string]func() error{
		"EncodeState": func() error { _, err := e.svc.EncodeState(e.ctx, ref, bad); return err },
		"Holds":       func() error { _, err := e.svc.Holds(e.ctx, ref, bad); return err },
		"Snapshot":    func() error { _, _, err := e.svc.Snapshot(e.ctx, owner, bad); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			require.True(t, yaps.IsCode(err, yaps.EINVALID), "%s: %v", name, err)
		case <-time.After(5 * time.Second):
			release()
			t.Fatalf("%s waited for the document's lock to refuse what does not decode", name)
		}
	}
}
