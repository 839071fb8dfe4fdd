package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// testWritePrepared checks yaps.PreparedWriter, for stores that implement
// it and take prepared writes (the others decline every write).
func testWritePrepared(t *testing.T, s yaps.Store) {
	pw, ok := s.(yaps.PreparedWriter)
	if !ok {
		return
	}
	f := newList(t, s, base)
	ref := f.list.Ref
	start, err := s.List(ctx, ref)
	require.NoError(t, err)

	doomed := fullTask(ref, "doomed", at(1))
	update(t, s, ref, func(tx yaps.Tx) error { return tx.PutYap(doomed) })
	row, err := s.List(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, start.DocVersion, row.DocVersion, "a projection write leaves the log alone")

	// One write: three updates (two in a row, which bunstore stores as one
	// row), a yap put, a yap deleted, a missing yap deleted (not an
	// error), two audit entries and a new title.
	task := fullTask(ref, "task", at(2))
	a1 := &yaps.AuditEntry{ListRef: ref, At: at(3), PermissionID: f.owner.ID, Role: yaps.RoleOwner, Action: "yap.create", YapID: "task"}
	a2 := &yaps.AuditEntry{ListRef: ref, At: at(3), PermissionID: f.owner.ID, Role: yaps.RoleOwner, Action: "list.update", Detail: "title"}
	next := row.Clone()
	next.Title, next.UpdatedAt, next.DocVersion = "Renamed", at(3), row.DocVersion+3
	p := &yaps.PreparedWrite{Expect: row, PermissionID: f.owner.ID, List: next, Ops: []yaps.PreparedOp{
		{Update: []byte("p1")}, {Update: []byte("p1b")}, {PutYap: task}, {Audit: a1}, {DeleteYapID: doomed.ID}, {DeleteYapID: "never"},
		{Update: []byte("p2")}, {Audit: a2},
	}}
	applied, err := pw.WritePrepared(ctx, p)
	if errors.Is(err, yaps.ErrPreparedUnsupported) {
		// Declining must be all-or-nothing too: nothing was written.
		got, err := s.List(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, row, got)
		return
	}
	require.NoError(t, err)
	require.True(t, applied)
	got, err := s.List(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, "Renamed", got.Title)
	require.Equal(t, utc(at(3)), got.UpdatedAt)
	require.Equal(t, row.DocVersion+3, got.DocVersion)
	log, err := s.Doc(ctx, ref, row.DocVersion)
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("p1"), []byte("p1b"), []byte("p2")}, log.Updates)
	y, err := s.Yap(ctx, ref, "task")
	require.NoError(t, err)
	require.Equal(t, normalizeYap(task), y)
	_, err = s.Yap(ctx, ref, doomed.ID)
	requireCode(t, yaps.ENOTFOUND, err)
	require.NotZero(t, a1.Seq)
	require.Greater(t, a2.Seq, a1.Seq)
	entries, err := s.Audit(ctx, ref, 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, []int64{a1.Seq, a2.Seq}, []int64{entries[0].Seq, entries[1].Seq})

	// notApplied runs a write that must fail its guard and write nothing.
	notApplied := func(t *testing.T, expect *yaps.List, permID string) {
		t.Helper()
		before, err := s.List(ctx, ref)
		require.NoError(t, err)
		next := expect.Clone()
		next.Title, next.DocVersion = "never", expect.DocVersion+1
		audit := &yaps.AuditEntry{ListRef: ref, At: at(9), PermissionID: permID, Role: yaps.RoleOwner, Action: "yap.create", YapID: "ghost"}
		applied, err := pw.WritePrepared(ctx, &yaps.PreparedWrite{Expect: expect, PermissionID: permID, List: next, Ops: []yaps.PreparedOp{
			{Update: []byte("ghost")}, {PutYap: fullTask(ref, "ghost", at(9))}, {DeleteYapID: "task"}, {Audit: audit},
		}})
		require.NoError(t, err)
		require.False(t, applied)
		after, err := s.List(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, before, after)
		_, err = s.Yap(ctx, ref, "ghost")
		requireCode(t, yaps.ENOTFOUND, err)
		_, err = s.Yap(ctx, ref, "task")
		require.NoError(t, err)
		log, err := s.Doc(ctx, ref, before.DocVersion)
		require.NoError(t, err)
		require.Empty(t, log.Updates)
		entries, err := s.Audit(ctx, ref, 0, 10)
		require.NoError(t, err)
		require.Len(t, entries, 2)
		require.Zero(t, audit.Seq)
	}
	cur, err := s.List(ctx, ref)
	require.NoError(t, err)

	t.Run("StaleDocVersion", func(t *testing.T) { notApplied(t, row, f.owner.ID) })
	t.Run("StaleFields", func(t *testing.T) {
		for _, change := range []func(l *yaps.List){
			func(l *yaps.List) { l.Title = "other" },
			func(l *yaps.List) { l.Kind = yaps.KindNote },
			func(l *yaps.List) { l.CreatedAt = l.CreatedAt.Add(time.Millisecond) },
			func(l *yaps.List) { l.UpdatedAt = l.UpdatedAt.Add(time.Millisecond) },
			func(l *yaps.List) { l.ArchivedAt = ptr(at(5)) },
			func(l *yaps.List) { l.RolledUpAt = ptr(at(5)) },
			func(l *yaps.List) { l.AccountID = "acct" },
		} {
			x := cur.Clone()
			change(x)
			notApplied(t, x, f.owner.ID)
		}
	})
	t.Run("UnknownPermission", func(t *testing.T) { notApplied(t, cur, "nobody") })
	t.Run("RevokedPermission", func(t *testing.T) {
		ed := &yaps.Permission{ID: id("p"), ListRef: ref, Role: yaps.RoleEditor, CreatedAt: at(4), CodeHash: hash(id("c"))}
		update(t, s, ref, func(tx yaps.Tx) error { return tx.CreatePermission(ed) })
		update(t, s, ref, func(tx yaps.Tx) error { return tx.RevokePermission(ed.ID, at(5)) })
		notApplied(t, cur, ed.ID)
	})
	t.Run("OtherListsPermission", func(t *testing.T) {
		g := newList(t, s, base)
		notApplied(t, cur, g.owner.ID)
	})
	// A list that does not exist: nothing is written for it (on Postgres
	// the row guards, not foreign keys, see to that).
	t.Run("UnknownList", func(t *testing.T) {
		ghost := cur.Clone()
		ghost.Ref = id("ghost")
		next := ghost.Clone()
		next.DocVersion++
		audit := &yaps.AuditEntry{ListRef: ghost.Ref, At: at(9), PermissionID: "", Role: yaps.RoleOwner, Action: "yap.create", YapID: "ghost"}
		applied, err := pw.WritePrepared(ctx, &yaps.PreparedWrite{Expect: ghost, List: next, Ops: []yaps.PreparedOp{
			{Update: []byte("ghost")}, {PutYap: fullTask(ghost.Ref, "ghost", at(9))}, {Audit: audit},
		}})
		require.NoError(t, err)
		require.False(t, applied)
		_, err = s.Yap(ctx, ghost.Ref, "ghost")
		requireCode(t, yaps.ENOTFOUND, err)
		_, err = s.Doc(ctx, ghost.Ref, 0)
		requireCode(t, yaps.ENOTFOUND, err)
		entries, err := s.Audit(ctx, ghost.Ref, 0, 10)
		require.NoError(t, err)
		require.Empty(t, entries)
		require.Zero(t, audit.Seq)
	})
	t.Run("Malformed", func(t *testing.T) {
		next := cur.Clone()
		_, err := pw.WritePrepared(ctx, &yaps.PreparedWrite{Expect: cur, List: next, Ops: []yaps.PreparedOp{{Audit: &yaps.AuditEntry{}}}})
		requireCode(t, yaps.EINTERNAL, err) // no update: the guard could not tell
		next.DocVersion += 2
		_, err = pw.WritePrepared(ctx, &yaps.PreparedWrite{Expect: cur, List: next, Ops: []yaps.PreparedOp{{Update: []byte("x")}}})
		requireCode(t, yaps.EINTERNAL, err) // DocVersion and updates disagree
	})

	// A system write (no permission) applies.
	next = cur.Clone()
	next.DocVersion++
	applied, err = pw.WritePrepared(ctx, &yaps.PreparedWrite{Expect: cur, List: next, Ops: []yaps.PreparedOp{{Update: []byte("sys")}}})
	require.NoError(t, err)
	require.True(t, applied)
	log, err = s.Doc(ctx, ref, cur.DocVersion)
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("sys")}, log.Updates)
}
