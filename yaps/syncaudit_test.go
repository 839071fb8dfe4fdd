package yaps_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// An update that archives the list ends the batch's writes: the updates
// after it in the same batch are refused untouched, as each would be alone
// (R7: an archived list rejects writes).
func TestApplyUpdatesArchivedMidBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, y := milkList(t, e)
	ed1 := e.actor(owner, yaps.RoleEditor)
	ed2 := e.actor(owner, yaps.RoleEditor)
	ref := owner.List.Ref
	ups := []yaps.ClientUpdate{
		clientUpdate(t, ed1, docOf(t, e, ed1), "ed1", func(d *yjs.Doc) {
			d.GetMap("list").Set("archivedAt", yaps.FormatTime(e.clock.Now()))
		}),
		clientUpdate(t, ed2, docOf(t, e, ed2), "ed2", func(d *yjs.Doc) {
			ymap(t, d, y.ID).Set("status", "done")
		}),
	}
	errs := e.svc.ApplyUpdates(e.ctx, ref, ups)
	require.NoError(t, errs[0])
	requireCode(t, yaps.EFORBIDDEN, errs[1])
	l, err := e.store.List(e.ctx, ref)
	require.NoError(t, err)
	require.NotNil(t, l.ArchivedAt)
	got, err := e.svc.GetYap(e.ctx, owner, y.ID)
	require.NoError(t, err)
	require.Equal(t, yaps.StatusOpen, got.Status)
}

// Sync writes are audited with the actions HTTP uses (R5: every mutation
// is recorded, with what it did): a soft delete and a restore are never
// merged into the edits around them, archiving is list.archive, and a
// change outside the yaps and the list's fields is doc.update.
func TestSyncAuditActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, y := milkList(t, e)
	ed := e.actor(owner, yaps.RoleEditor)
	p := newPeer(t, e, ed)
	base := len(auditLog(t, e, owner))
	step := func(edit func(d *yjs.Doc)) {
		t.Helper()
		e.clock.Advance(time.Second) // within AuditCoalesce of each other
		require.NoError(t, p.send(edit))
		p.sync()
	}
	step(func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(4, "!", nil) })
	step(func(d *yjs.Doc) { ymap(t, d, y.ID).Set("deletedAt", yaps.FormatTime(e.clock.Now())) })
	step(func(d *yjs.Doc) { ymap(t, d, y.ID).Delete("deletedAt") })
	step(func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(0, "!", nil) }) // merged with the first edit
	step(func(d *yjs.Doc) { d.GetMap("custom").Set("x", "outside the schema") })
	step(func(d *yjs.Doc) { d.GetText("notes").Insert(0, "merged with the line above", nil) })
	step(func(d *yjs.Doc) { d.GetMap("list").Set("archivedAt", yaps.FormatTime(e.clock.Now())) })

	var got []string
	for _, r := range auditRows(t, e, owner, base) {
		require.Equal(t, ed.Permission.ID, r.perm)
		got = append(got, r.action+" "+r.yap)
	}
	require.Equal(t, []string{
		"yap.update " + y.ID, "yap.delete " + y.ID, "yap.restore " + y.ID,
		"doc.update ", "list.archive ",
	}, got)
}
