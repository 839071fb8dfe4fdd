package yaps_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// Once a process has written a list, its next writes are prepared before
// the transaction, and give the same results as the ordinary path.
func TestWriteAheadSteadyState(t *testing.T) {
	t.Parallel()
	onEachStore(t, writeAheadSteadyState)
}

func writeAheadSteadyState(t *testing.T, e *env, kind string) {
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("a"), "", nil)
	require.NoError(t, err)
	before := yaps.WriteAheads(e.svc)
	for i, c := range []string{"ab", "abc", "abcd"} {
		got, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set(c)}, "")
		require.NoError(t, err)
		require.Equal(t, c, got.Content)
		require.Equal(t, before+int64(i+1), yaps.WriteAheads(e.svc))
	}
	// On Postgres the store applied them as prepared writes.
	wantPrepared := int64(0)
	if kind == "postgres" {
		wantPrepared = 3
	}
	require.Equal(t, wantPrepared, yaps.PreparedWrites(e.svc))
	// What was written ahead is what the store holds.
	stored, err := e.store.Yap(e.ctx, a.List.Ref, y.ID)
	require.NoError(t, err)
	require.Equal(t, "abcd", stored.Content)
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.EqualValues(t, 2+3, l.DocVersion)
	entries, err := e.svc.Audit(e.ctx, a, "", 100)
	require.NoError(t, err)
	require.NotZero(t, entries.Entries[len(entries.Entries)-1].Seq)

	// A failing write (stale If-Match) is answered by the ordinary path
	// and changes nothing.
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("x")}, `"stale"`)
	requireCode(t, yaps.EPRECONDITION, err)
	got, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("abcde")}, "")
	require.NoError(t, err)
	require.Equal(t, "abcde", got.Content)
}

// Another process's write makes the prepared row stale: the write is
// redone the ordinary way, on the document caught up, and nothing is lost.
func TestWriteAheadStaleRow(t *testing.T) {
	t.Parallel()
	onEachStore(t, writeAheadStaleRow)
}

func writeAheadStaleRow(t *testing.T, e *env, kind string) {
	s2 := e.secondProcess()
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("one"), "", nil)
	require.NoError(t, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("one two")}, "")
	require.NoError(t, err)

	// s2 writes the list: e.svc's cached row is now stale.
	_, _, err = s2.CreateYap(e.ctx, a, yaps.KindTask, task("from s2"), "", nil)
	require.NoError(t, err)
	ahead := yaps.WriteAheads(e.svc)
	got, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("one two three")}, "")
	require.NoError(t, err)
	require.Equal(t, "one two three", got.Content)
	require.Equal(t, ahead, yaps.WriteAheads(e.svc), "the stale preparation must not count")

	page, err := e.svc.ListYaps(e.ctx, a, "", 10, false)
	require.NoError(t, err)
	require.Len(t, page.Yaps, 2)
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.EqualValues(t, 2+1+1+1, l.DocVersion)
	// Both processes' documents agree with what the store rebuilds.
	sv1, err := e.svc.StateVector(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.NoError(t, s2.Refresh(e.ctx, a.List.Ref))
	sv2, err := s2.StateVector(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.Equal(t, sv1, sv2)
}

// A code revoked, or a list archived, by another process is refused even
// when this process prepared the write with what it knew.
func TestWriteAheadRechecksInTransaction(t *testing.T) {
	t.Parallel()
	onEachStore(t, writeAheadRechecksInTransaction)
}

func writeAheadRechecksInTransaction(t *testing.T, e *env, kind string) {
	s2 := e.secondProcess()
	owner := e.list()
	ed := e.actor(owner, yaps.RoleEditor)
	y, _, err := e.svc.CreateYap(e.ctx, ed, yaps.KindTask, task("a"), "", nil)
	require.NoError(t, err)

	require.NoError(t, s2.RevokePermission(e.ctx, owner, ed.Permission.ID)) // no list row change
	_, err = e.svc.UpdateYap(e.ctx, ed, y.ID, yaps.YapFields{Content: yaps.Set("b")}, "")
	requireCode(t, yaps.EUNAUTHORIZED, err)
	stored, err := e.store.Yap(e.ctx, owner.List.Ref, y.ID)
	require.NoError(t, err)
	require.Equal(t, "a", stored.Content)

	_, err = s2.UpdateList(e.ctx, owner, yaps.ListPatch{ArchivedAt: yaps.Set(e.clock.Now().Add(time.Second))}, "")
	require.NoError(t, err)
	_, err = e.svc.UpdateYap(e.ctx, owner, y.ID, yaps.YapFields{Content: yaps.Set("c")}, "")
	requireCode(t, yaps.EFORBIDDEN, err)
	stored, err = e.store.Yap(e.ctx, owner.List.Ref, y.ID)
	require.NoError(t, err)
	require.Equal(t, "a", stored.Content)
}

// onEachStore runs fn on a new env on each of storeKinds, in parallel.
func onEachStore(t *testing.T, fn func(t *testing.T, e *env, kind string)) {
	t.Helper()
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnvOn(t, k.open(t)), k.name)
		})
	}
}
