package yaps_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// edits makes each edit on a client doc in its own transaction and returns
// the updates, in order.
func edits(t *testing.T, d *yjs.Doc, fns ...func(d *yjs.Doc)) [][]byte {
	t.Helper()
	var out [][]byte
	for _, fn := range fns {
		var u []byte
		unsub := d.OnUpdate(func(b []byte, _ any) { u = b })
		d.Transact(func(*yjs.Transaction) { fn(d) }, nil)
		unsub()
		require.NotNil(t, u, "the edit changed nothing")
		out = append(out, u)
	}
	return out
}

// storedSince returns the list's logged updates after seq.
func storedSince(t *testing.T, e *env, ref string, seq int64) [][]byte {
	t.Helper()
	dl, err := e.store.Doc(e.ctx, ref, seq)
	require.NoError(t, err)
	return dl.Updates
}

// helloWorld returns u1 (a sync client creates a task "hello") and u2 (it
// appends " WORLD"), made on a copy of a's list document.
func helloWorld(t *testing.T, e *env, a *yaps.Actor) (u1, u2 []byte) {
	t.Helper()
	d := docOf(t, e, a)
	var c *yjs.Text
	ups := edits(t, d, func(d *yjs.Doc) {
		m := yjs.NewMap()
		m.Set("kind", "task")
		m.Set("status", "open")
		m.Set("content", yjs.NewText("hello"))
		d.GetMap("yaps").Set("t1", m)
	}, func(d *yjs.Doc) {
		c = text(t, ymap(t, d, "t1"), "content")
		c.Insert(c.Len(), " WORLD", nil)
	})
	return ups[0], ups[1]
}

// A client update that arrives before one it depends on is stored and
// relayed as sent, so a restart (or a peer) rebuilds the same document.
func TestOutOfOrderUpdatesAreStored(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		name := map[bool]string{false: "one by one", true: "one batch"}[batch]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a := e.list()
			ref := a.List.Ref
			u1, u2 := helloWorld(t, e, a)
			evs := docEvents(t, e, ref)
			seq := docVersion(t, e, ref)
			if batch {
				errs := e.svc.ApplyUpdates(e.ctx, ref, []yaps.ClientUpdate{{Actor: a, Update: u2}, {Actor: a, Update: u1}})
				require.Equal(t, []error{nil, nil}, errs)
			} else {
				require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
				require.Len(t, storedSince(t, e, ref, seq), 1, "the pending update is stored at once")
				// A duplicate of the pending update stores nothing more.
				require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
				require.Len(t, storedSince(t, e, ref, seq), 1)
				require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u1, nil))
			}
			stored := storedSince(t, e, ref, seq)
			require.GreaterOrEqual(t, len(stored), 2)
			require.Equal(t, u2, stored[0], "u2 stored as sent")
			require.Equal(t, u1, stored[1], "u1 stored as sent")
			var emitted [][]byte
			for _, ev := range evs() {
				emitted = append(emitted, ev.Update)
			}
			require.GreaterOrEqual(t, len(emitted), 2)
			require.Equal(t, u2, emitted[0])
			require.Equal(t, u1, emitted[1])

			y, err := e.svc.GetYap(e.ctx, a, "t1")
			require.NoError(t, err)
			require.Equal(t, "hello WORLD", y.Content)

			// A fresh process on the same store loads the same document.
			live := docOf(t, e, a)
			s2 := e.secondProcess()
			snap2, _, err := s2.Snapshot(e.ctx, a, nil)
			require.NoError(t, err)
			d2 := yjs.NewDoc()
			require.NoError(t, d2.ApplyUpdate(snap2, nil))
			require.Equal(t, live.ToJSON(), d2.ToJSON())
			require.Equal(t, live.StateVector(), d2.StateVector())
			y2, err := s2.GetYap(e.ctx, a, "t1")
			require.NoError(t, err)
			require.Equal(t, "hello WORLD", y2.Content)
			require.Equal(t, "hello WORLD", text(t, ymap(t, d2, "t1"), "content").String())

			// A peer that got the relayed updates in their order agrees.
			p := yjs.NewDoc()
			for _, u := range emitted {
				require.NoError(t, p.ApplyUpdate(u, nil))
			}
			require.Equal(t, "hello WORLD", text(t, ymap(t, p, "t1"), "content").String())

			// A true duplicate still stores and emits nothing.
			n, before := docVersion(t, e, ref), len(evs())
			require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u1, nil))
			require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
			require.Equal(t, n, docVersion(t, e, ref))
			require.Len(t, evs(), before)
		})
	}
}

// A compaction between the pending update and the one it waits for keeps
// the pending update in the compacted state.
func TestPendingUpdateSurvivesCompaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	u1, u2 := helloWorld(t, e, a)
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
	require.NoError(t, e.svc.CompactNow(e.ctx, a.List.Ref))
	s2 := e.secondProcess()
	require.NoError(t, s2.ApplyUpdate(e.ctx, a, u1, nil))
	y, err := s2.GetYap(e.ctx, a, "t1")
	require.NoError(t, err)
	require.Equal(t, "hello WORLD", y.Content)
	s3 := e.secondProcess()
	snap, _, err := s3.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(snap, nil))
	require.Equal(t, "hello WORLD", text(t, ymap(t, d, "t1"), "content").String())
}

// A deletion of something the server does not know yet (it goes to the
// pending delete set) is stored too, and applied when its target arrives.
func TestPendingDeletionIsStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	ref := a.List.Ref
	d := docOf(t, e, a)
	ups := edits(t, d, func(d *yjs.Doc) {
		m := yjs.NewMap()
		m.Set("kind", "task")
		m.Set("status", "open")
		m.Set("content", yjs.NewText("soon gone"))
		d.GetMap("yaps").Set("t1", m)
	}, func(d *yjs.Doc) {
		text(t, ymap(t, d, "t1"), "content").Delete(0, 5)
	})
	u1, del := ups[0], ups[1]
	seq := docVersion(t, e, ref)
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, del, nil))
	stored := storedSince(t, e, ref, seq)
	require.Len(t, stored, 1, "the pending deletion is stored")
	require.Equal(t, del, stored[0])
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u1, nil))
	y, err := e.svc.GetYap(e.ctx, a, "t1")
	require.NoError(t, err)
	require.Equal(t, "gone", y.Content)

	s2 := e.secondProcess()
	y2, err := s2.GetYap(e.ctx, a, "t1")
	require.NoError(t, err)
	require.Equal(t, "gone", y2.Content)
	snap, _, err := s2.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	d2 := yjs.NewDoc()
	require.NoError(t, d2.ApplyUpdate(snap, nil))
	require.Equal(t, "gone", text(t, ymap(t, d2, "t1"), "content").String())
}
