package storetest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// testPermissionActive checks yaps.PermissionActiveTx, the service's
// re-check of the writer's permission in every write, for stores whose Tx
// implements it (all of this project's do). It must agree with Tx.Permission, within a transaction and
// across them, including after a revocation that was rolled back (a store
// that remembers permissions between transactions must forget what a
// rolled-back one did).
func testPermissionActive(t *testing.T, s yaps.Store) {
	update(t, s, newList(t, s, base).list.Ref, func(tx yaps.Tx) error {
		if _, ok := tx.(yaps.PermissionActiveTx); !ok {
			t.Skip("the store's Tx does not implement yaps.PermissionActiveTx")
		}
		return nil
	})
	f := newList(t, s, base)
	other := newList(t, s, base)
	ref := f.list.Ref
	editor := &yaps.Permission{ID: id("p"), ListRef: ref, Role: yaps.RoleEditor, CreatedAt: at(1), CodeHash: hash(id("c"))}
	check := func(fn func(pa yaps.PermissionActiveTx, tx yaps.Tx)) {
		t.Helper()
		update(t, s, ref, func(tx yaps.Tx) error {
			pa, ok := tx.(yaps.PermissionActiveTx)
			if !ok {
				t.Fatal("the store's Tx no longer implements yaps.PermissionActiveTx")
			}
			fn(pa, tx)
			return nil
		})
	}
	want := func(pa yaps.PermissionActiveTx, pid string, found, active bool, msg string) {
		t.Helper()
		f, a, err := pa.PermissionActive(pid)
		require.NoError(t, err, msg)
		require.Equal(t, [2]bool{found, active}, [2]bool{f, a}, "%s: (found, active)", msg)
	}

	check(func(pa yaps.PermissionActiveTx, tx yaps.Tx) {
		want(pa, f.owner.ID, true, true, "the owner")
		want(pa, "p-unknown", false, false, "an unknown id")
		want(pa, other.owner.ID, false, false, "another list's permission")
		require.NoError(t, tx.CreatePermission(editor))
		want(pa, editor.ID, true, true, "created in this tx")
	})
	check(func(pa yaps.PermissionActiveTx, tx yaps.Tx) {
		want(pa, editor.ID, true, true, "created in an earlier tx")
	})

	// A revocation that is rolled back leaves the permission active.
	boom := errors.New("boom")
	err := s.Update(ctx, ref, func(tx yaps.Tx) error {
		pa, ok := tx.(yaps.PermissionActiveTx)
		if !ok {
			return boom
		}
		want(pa, editor.ID, true, true, "before the revocation")
		require.NoError(t, tx.RevokePermission(editor.ID, at(5)))
		want(pa, editor.ID, true, false, "revoked in this tx")
		return boom
	})
	require.ErrorIs(t, err, boom)
	check(func(pa yaps.PermissionActiveTx, tx yaps.Tx) {
		want(pa, editor.ID, true, true, "after a rolled-back revocation")
		require.NoError(t, tx.RevokePermission(editor.ID, at(6)))
	})
	check(func(pa yaps.PermissionActiveTx, tx yaps.Tx) {
		want(pa, editor.ID, true, false, "revoked in an earlier tx")
		p, err := tx.Permission(editor.ID)
		require.NoError(t, err)
		require.False(t, p.Active(), "Tx.Permission agrees")
	})

	// A permission created in a rolled-back transaction does not exist.
	ghost := &yaps.Permission{ID: id("p"), ListRef: ref, Role: yaps.RoleViewer, CreatedAt: at(7), CodeHash: hash(id("c"))}
	err = s.Update(ctx, ref, func(tx yaps.Tx) error {
		require.NoError(t, tx.CreatePermission(ghost))
		if pa, ok := tx.(yaps.PermissionActiveTx); ok {
			want(pa, ghost.ID, true, true, "created in this tx")
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	check(func(pa yaps.PermissionActiveTx, tx yaps.Tx) {
		want(pa, ghost.ID, false, false, "created in a rolled-back tx")
	})
}
