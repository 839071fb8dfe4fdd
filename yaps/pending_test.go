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
		out = append(out, clientUpdate(t, nil, d, nil, fn).Update)
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
	ups := edits(t, docOf(t, e, a), createT1("hello"), func(d *yjs.Doc) {
		c := text(t, ymap(t, d, "t1"), "content")
		c.Insert(c.Len(), " WORLD", nil)
	})
	return ups[0], ups[1]
}

// createTask is a sync client's edit that creates an open task.
func createTask(d *yjs.Doc, id, content string) {
	m := yjs.NewMap()
	m.Set("kind", "task")
	m.Set("status", "open")
	m.Set("content", yjs.NewText(content))
	d.GetMap("yaps").Set(id, m)
}

// createT1 is a sync client's edit that creates the task "t1" with content.
func createT1(content string) func(d *yjs.Doc) {
	return func(d *yjs.Doc) { createTask(d, "t1", content) }
}

// A client update that arrives before one it depends on is refused: not
// stored, not relayed, not kept in the document. Sent again once what it
// depends on is there, it is accepted.
func TestOutOfOrderUpdatesAreRefused(t *testing.T) {
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
				require.Len(t, errs, 2)
				requireCode(t, yaps.EFORBIDDEN, errs[0])
				require.NoError(t, errs[1])
			} else {
				requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
				require.Empty(t, storedSince(t, e, ref, seq), "nothing of the refused update is stored")
				require.Empty(t, evs(), "nor relayed")
				pendS, pendD := docOf(t, e, a).Pending()
				require.Empty(t, pendS, "nor kept")
				require.Empty(t, pendD)
				require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u1, nil))
			}
			y, err := e.svc.GetYap(e.ctx, a, "t1")
			require.NoError(t, err)
			require.Equal(t, "hello", y.Content)

			// Sent again after u1, u2 integrates.
			require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
			stored := storedSince(t, e, ref, seq)
			require.Equal(t, u1, stored[0])
			require.Equal(t, u2, stored[len(stored)-1], "u2 stored as sent, after u1 (and the server's fill-in of u1's yap)")
			y, err = e.svc.GetYap(e.ctx, a, "t1")
			require.NoError(t, err)
			require.Equal(t, "hello WORLD", y.Content)
			y2, err := e.secondProcess().GetYap(e.ctx, a, "t1")
			require.NoError(t, err)
			require.Equal(t, "hello WORLD", y2.Content)
		})
	}
}

// Such an update is refused before it touches the document, so the cached
// document stays: a client whose earlier update was refused sends only
// such updates until it resyncs, and none of them reloads the document,
// alone or in a batch, where the other clients' updates still apply.
func TestPendingRefusalKeepsTheCachedDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	ref := a.List.Ref
	u1, u2 := helloWorld(t, e, a)
	other := clientUpdate(t, a, docOf(t, e, a), nil, func(d *yjs.Doc) { createTask(d, "t2", "other") })
	loads := yaps.DocLoads(e.svc)
	seq := docVersion(t, e, ref)
	for range 3 {
		requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
	}
	require.Equal(t, seq, docVersion(t, e, ref), "nothing stored")
	errs := e.svc.ApplyUpdates(e.ctx, ref, []yaps.ClientUpdate{other, {Actor: a, Update: u2}})
	require.Len(t, errs, 2)
	require.NoError(t, errs[0], "the other client's update applies")
	requireCode(t, yaps.EFORBIDDEN, errs[1])
	require.Equal(t, loads, yaps.DocLoads(e.svc), "the document was never reloaded")

	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u1, nil))
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u2, nil))
	for id, want := range map[string]string{"t1": "hello WORLD", "t2": "other"} {
		y, err := e.svc.GetYap(e.ctx, a, id)
		require.NoError(t, err)
		require.Equal(t, want, y.Content)
	}
	require.Equal(t, loads, yaps.DocLoads(e.svc))
}

// A deletion of something the server does not have (Yjs would keep it in
// the pending delete set) is refused the same way.
func TestPendingDeletionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	ref := a.List.Ref
	ups := edits(t, docOf(t, e, a), createT1("soon gone"), func(d *yjs.Doc) {
		text(t, ymap(t, d, "t1"), "content").Delete(0, 5)
	})
	u1, del := ups[0], ups[1]
	seq := docVersion(t, e, ref)
	requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, a, del, nil))
	require.Empty(t, storedSince(t, e, ref, seq))
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u1, nil))
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, del, nil))
	y, err := e.svc.GetYap(e.ctx, a, "t1")
	require.NoError(t, err)
	require.Equal(t, "gone", y.Content)
}

// An agent cannot plant an out-of-scope edit that someone else's write
// would complete (audit 8, F1): its note edit that depends on the owner's
// next edit is refused, and the owner's edit, when it comes, leaves the note
// as the owner wrote it.
func TestAgentCannotPlantPendingEdit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	note, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Title: yaps.Set("n"), Body: yaps.Set("hello")}, "", nil)
	require.NoError(t, err)
	agent := e.actor(owner, yaps.RoleAgent) // tasks:write only

	// The owner's client appends " world" (ownerEdit); the agent, having
	// seen it first, types after it (planted).
	d := docOf(t, e, owner)
	ups := edits(t, d, func(d *yjs.Doc) {
		text(t, ymap(t, d, note.ID), "body").Insert(5, " world", nil)
	}, func(d *yjs.Doc) {
		text(t, ymap(t, d, note.ID), "body").Insert(11, " [INJECTED]", nil)
	})
	ownerEdit, planted := ups[0], ups[1]
	requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, agent, planted, nil))
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, owner, ownerEdit, nil))

	got, err := e.svc.GetYap(e.ctx, owner, note.ID)
	require.NoError(t, err)
	require.Equal(t, "hello world", got.Body)
	got2, err := e.secondProcess().GetYap(e.ctx, owner, note.ID)
	require.NoError(t, err)
	require.Equal(t, "hello world", got2.Body)
}

// TestStoredPendingDataDoesNotBlockWholeUpdates: a list stored before
// pending updates were refused may hold pending data of two clients. An
// update that integrates whole and resolves one of them changes the
// pending set; it is accepted, not taken for an update that went pending.
func TestStoredPendingDataDoesNotBlockWholeUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	ref := a.List.Ref
	dA, dB := docOf(t, e, a), docOf(t, e, a)
	upsA := edits(t, dA, createT1("hello"), func(d *yjs.Doc) { c := text(t, ymap(t, d, "t1"), "content"); c.Insert(c.Len(), " A", nil) })
	upsB := edits(t, dB, func(d *yjs.Doc) { createTask(d, "t2", "bye") }, func(d *yjs.Doc) { c := text(t, ymap(t, d, "t2"), "content"); c.Insert(c.Len(), " B", nil) })
	// As stored then: each client's second update, without its first.
	require.NoError(t, e.store.Update(e.ctx, ref, func(tx yaps.Tx) error {
		l := *tx.List()
		for _, u := range [][]byte{upsA[1], upsB[1]} {
			seq, err := tx.AppendUpdate(u)
			if err != nil {
				return err
			}
			l.DocVersion = seq
		}
		return tx.SaveList(&l)
	}))
	s2 := e.secondProcess() // loads the list from the store
	require.NoError(t, s2.ApplyUpdate(e.ctx, a, upsA[0], nil))
	got, err := s2.EncodeState(e.ctx, ref, nil)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(got, nil))
	require.Equal(t, "hello A", text(t, ymap(t, d, "t1"), "content").String())
}
