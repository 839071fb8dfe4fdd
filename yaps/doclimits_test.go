package yaps_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// emptyMaps returns an update that inserts n empty Y.Maps into an unknown
// root array, made on a copy of a's list document.
func emptyMaps(t *testing.T, e *env, a *yaps.Actor, n int) []byte {
	t.Helper()
	d := docOf(t, e, a)
	return edits(t, d, func(d *yjs.Doc) {
		vals := make([]any, n)
		for i := range vals {
			vals[i] = yjs.NewMap()
		}
		d.GetArray("junk").Insert(0, vals...)
	})[0]
}

func TestDocItemLimitRefusesSyncGrowth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *yaps.Config) { c.MaxDocItems = 200 })
	a := e.list()
	ref := a.List.Ref
	evs := docEvents(t, e, ref)
	seq := docVersion(t, e, ref)
	before := docOf(t, e, a)

	requireCode(t, yaps.ETOOLARGE, e.svc.ApplyUpdate(e.ctx, a, emptyMaps(t, e, a, 300), nil))
	require.Equal(t, seq, docVersion(t, e, ref), "nothing stored")
	require.Empty(t, evs(), "nothing emitted")
	after := docOf(t, e, a)
	require.Equal(t, before.ToJSON(), after.ToJSON(), "the document does not keep the refused update")
	require.Equal(t, before.StateVector(), after.StateVector())

	// In a batch only the update over the limit is refused.
	small := emptyMaps(t, e, a, 5)
	big := emptyMaps(t, e, a, 300)
	errs := e.svc.ApplyUpdates(e.ctx, ref, []yaps.ClientUpdate{{Actor: a, Update: small}, {Actor: a, Update: big}})
	require.NoError(t, errs[0])
	requireCode(t, yaps.ETOOLARGE, errs[1])
	require.Equal(t, seq+1, docVersion(t, e, ref))
	require.Len(t, docOf(t, e, a).GetArray("junk").ToSlice(), 5)

	// Small writes still fit.
	_, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("still fine"), "", nil)
	require.NoError(t, err)
}

func TestDocByteLimitRefusesHTTPCreate(t *testing.T) {
	t.Parallel()
	const limit = 4000
	e := newEnv(t, func(c *yaps.Config) { c.MaxDocBytes = limit })
	a := e.list()
	ref := a.List.Ref
	content := fmt.Sprintf("%0200d", 0)
	created := 0
	var err error
	for i := 0; i < 100; i++ {
		if _, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(content), "", nil); err != nil {
			break
		}
		created++
	}
	requireCode(t, yaps.ETOOLARGE, err)
	require.Greater(t, created, 5)
	seq := docVersion(t, e, ref)
	snap, _, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	require.LessOrEqual(t, len(snap), limit)

	_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(content), "", nil)
	requireCode(t, yaps.ETOOLARGE, err)
	require.Equal(t, seq, docVersion(t, e, ref), "nothing stored")
	page, err := e.svc.ListYaps(e.ctx, a, "", 200, false)
	require.NoError(t, err)
	require.Len(t, page.Yaps, created, "nothing projected")
	snap2, _, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	require.Equal(t, snap, snap2, "the document does not keep the refused write")

	// Deleting still works at the limit, and a sync update that only
	// deletes too.
	require.NoError(t, e.svc.DeleteYap(e.ctx, a, page.Yaps[0].ID, ""))
	d := docOf(t, e, a)
	del := edits(t, d, func(d *yjs.Doc) { d.GetMap("yaps").Delete(page.Yaps[1].ID) })[0]
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, del, nil))
	_, err = e.svc.GetYap(e.ctx, a, page.Yaps[1].ID)
	requireCode(t, yaps.ENOTFOUND, err)
}

// A list stored before the limits existed (or grown past lower ones) still
// loads and reads; it refuses growth but its yaps can be deleted and it can
// be archived.
func TestDocOverLimitStaysUsable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *yaps.Config) { c.MaxDocItems, c.MaxDocBytes = -1, -1 })
	a := e.list()
	var ids []string
	for i := 0; i < 20; i++ {
		y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(fmt.Sprintf("task %d", i)), "", nil)
		require.NoError(t, err)
		ids = append(ids, y.ID)
	}
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, emptyMaps(t, e, a, 500), nil))

	for _, lim := range []func(*yaps.Config){
		func(c *yaps.Config) { c.MaxDocItems = 100 },
		func(c *yaps.Config) { c.MaxDocBytes = 500 },
	} {
		s2 := e.secondProcess(lim)
		page, err := s2.ListYaps(e.ctx, a, "", 200, false)
		require.NoError(t, err)
		require.Len(t, page.Yaps, len(ids))
		_, _, err = s2.Snapshot(e.ctx, a, nil)
		require.NoError(t, err)
		_, _, err = s2.CreateYap(e.ctx, a, yaps.KindTask, task("more"), "", nil)
		requireCode(t, yaps.ETOOLARGE, err)
		_, err = s2.UpdateYap(e.ctx, a, ids[0], yaps.YapFields{Content: yaps.Set("longer content")}, "")
		requireCode(t, yaps.ETOOLARGE, err)
		require.NoError(t, s2.DeleteYap(e.ctx, a, ids[0], ""))
		ids = ids[1:]
		// A sync edit that only deletes (here from the middle of a text,
		// which splits it) is accepted, with the server's updatedAt stamp.
		e.clock.Advance(time.Minute)
		last := ids[len(ids)-1]
		d0 := docOf(t, e, a)
		cut := edits(t, d0, func(d *yjs.Doc) { text(t, ymap(t, d, last), "content").Delete(2, 1) })[0]
		require.NoError(t, s2.ApplyUpdate(e.ctx, a, cut, nil))
		y, err := s2.GetYap(e.ctx, a, last)
		require.NoError(t, err)
		require.Equal(t, e.clock.Now(), y.UpdatedAt, "stamped")
		// Removing the junk over sync shrinks it.
		d := docOf(t, e, a)
		if n := d.GetArray("junk").Len(); n > 0 {
			del := edits(t, d, func(d *yjs.Doc) { d.GetArray("junk").Delete(0, n) })[0]
			require.NoError(t, s2.ApplyUpdate(e.ctx, a, del, nil))
		}
	}
	s3 := e.secondProcess(func(c *yaps.Config) { c.MaxDocItems = 100 })
	require.NoError(t, s3.ArchiveList(e.ctx, a, ""))
}

// The byte limit is checked on the cheap bound (state plus update log)
// first; a log of overwritten history over the limit does not refuse
// writes to a document that is itself under it.
func TestDocByteLimitMeasuresTheDocument(t *testing.T) {
	t.Parallel()
	const limit = 3000
	e := newEnv(t, func(c *yaps.Config) { c.MaxDocBytes = limit })
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("start"), "", nil)
	require.NoError(t, err)
	logged := 0
	for i := 0; logged <= 2*limit; i++ {
		content := strings.Repeat(string(rune('a'+i%26)), 100)
		_, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set(content)}, "")
		require.NoError(t, err)
		logged = 0
		for _, u := range storedSince(t, e, a.List.Ref, 0) {
			logged += len(u)
		}
	}
	snap, _, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	require.Less(t, len(snap), limit/2)
	_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("fits"), "", nil)
	require.NoError(t, err)
}

// Updates that would wait for a missing one (pending) are refused, so data
// that never integrates cannot fill a document to its limit (audit 8, F2).
func TestPendingUpdatesCannotFillDocument(t *testing.T) {
	t.Parallel()
	const limit = 4000
	e := newEnv(t, func(c *yaps.Config) { c.MaxDocBytes = limit })
	a := e.list()
	d := docOf(t, e, a)
	fns := []func(*yjs.Doc){func(d *yjs.Doc) { d.GetText("junk").Insert(0, "x", nil) }}
	for i := 0; i < 10; i++ {
		fns = append(fns, func(d *yjs.Doc) { d.GetText("junk").Insert(0, strings.Repeat("y", 1000), nil) })
	}
	ups := edits(t, d, fns...)
	for _, u := range ups[1:] { // never the first: all of them would stay pending
		requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, a, u, nil))
	}
	_, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("fits"), "", nil)
	require.NoError(t, err, "the owner can still write")
}

// Archiving by PATCH, like DELETE, is accepted on a list over its
// document limits; a PATCH that also changes the title is not (core
// review: PATCH archivedAt was refused with 413).
func TestPatchArchiveOverLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *yaps.Config) { c.MaxDocItems, c.MaxDocBytes = -1, -1 })
	a := e.list()
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, emptyMaps(t, e, a, 500), nil))
	s2 := e.secondProcess(func(c *yaps.Config) { c.MaxDocItems = 100 })
	_, err := s2.UpdateList(e.ctx, a, yaps.ListPatch{ArchivedAt: yaps.Set(e.clock.Now()), Title: yaps.Set("renamed")}, "")
	require.True(t, yaps.IsCode(err, yaps.ETOOLARGE), "%v", err)
	l, err := s2.UpdateList(e.ctx, a, yaps.ListPatch{ArchivedAt: yaps.Set(e.clock.Now())}, "")
	require.NoError(t, err)
	require.NotNil(t, l.ArchivedAt)
}

// A list at its item limit refuses new yaps before editing its document,
// so a client that keeps trying costs no reload of the document per try;
// the refusal is the one checkLimits gives after an edit.
func TestDocItemLimitRefusesWithoutReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *yaps.Config) { c.MaxDocItems = 120 })
	a := e.list()
	ref := a.List.Ref
	var err error
	created := 0
	for range 100 {
		if _, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("fill"), "", nil); err != nil {
			break
		}
		created++
	}
	requireCode(t, yaps.ETOOLARGE, err)
	require.Greater(t, created, 3)

	// Just under the limit (the refused create did not fit): the same
	// create, again and again.
	seq := docVersion(t, e, ref)
	before := docOf(t, e, a).ToJSON()
	loads := yaps.DocLoads(e.svc)
	for range 5 {
		_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("fill"), "", nil)
		requireCode(t, yaps.ETOOLARGE, err)
	}
	require.Equal(t, seq, docVersion(t, e, ref), "nothing stored")
	require.Equal(t, before, docOf(t, e, a).ToJSON(), "the document does not keep the refused writes")
	require.LessOrEqual(t, yaps.DocLoads(e.svc)-loads, int64(1), "each refused create reloaded the document")
}
