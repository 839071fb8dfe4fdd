package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// Run runs the conformance suite. newStore must return an empty store that
// is closed when t ends; it is called once per subtest (subtests run in
// parallel).
func Run(t *testing.T, newStore func(t *testing.T) yaps.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s yaps.Store)
	}{
		{"CreateAndGetList", testCreateAndGetList},
		{"NotFound", testNotFound},
		{"TimesMillisecondUTC", testTimes},
		{"SaveList", testSaveList},
		{"Permissions", testPermissions},
		{"PermissionActive", testPermissionActive},
		{"YapProjection", testYapProjection},
		{"YapsPaging", testYapsPaging},
		{"DocLog", testDocLog},
		{"Compaction", testCompaction},
		{"UpdatesTogether", testUpdatesTogether},
		{"TxDoc", testTxDoc},
		{"Rollback", testRollback},
		{"FailingWrites", testFailingWrites},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"CompactionDuringWrites", testCompactionDuringWrites},
		{"ListsByAccount", testListsByAccount},
		{"Accounts", testAccounts},
		{"Audit", testAudit},
		{"WritesInOrder", testWritesInOrder},
		{"WritePrepared", testWritePrepared},
		{"Idempotency", testIdempotency},
		{"IdempotencyReplaceExpired", testIdempotencyReplace},
		{"DeleteIdempotencyBefore", testDeleteIdempotencyBefore},
		{"DeletedYapsBefore", testDeletedYapsBefore},
		{"ReturnedValuesAreCopies", testCopies},
		{"CanceledContext", testCanceledContext},
		{"CanceledBeforeCommit", testCanceledBeforeCommit},
		{"ClaimClients", testClaimClients},
		{"ListVersions", testListVersions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

var ctx = context.Background()

// base is a millisecond-precise time outside UTC, so a store that keeps the
// zone or drops milliseconds fails.
var base = time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.FixedZone("CET", 3600))

func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func ptr[T any](v T) *T { return &v }

func utc(t time.Time) time.Time { return t.UTC() }

func id(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func hash(s string) []byte { return yaps.HashSecret(s) }

func requireCode(t *testing.T, code string, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equalf(t, code, yaps.ErrorCode(err), "error %v", err)
}

// fixture is a list created through CreateList with its owner permission.
type fixture struct {
	list  *yaps.List
	owner *yaps.Permission
}

func newList(t *testing.T, s yaps.Store, created time.Time) fixture {
	t.Helper()
	return newListRef(t, s, id("l"), created)
}

// newListRef is newList with a chosen ref.
func newListRef(t *testing.T, s yaps.Store, ref string, created time.Time) fixture {
	t.Helper()
	l := &yaps.List{
		Ref: ref, Title: "Groceries", Kind: yaps.KindTask,
		CreatedAt: created, UpdatedAt: created, DocVersion: 1,
	}
	owner := &yaps.Permission{
		ID: id("p"), ListRef: l.Ref, Role: yaps.RoleOwner, Label: "owner",
		CreatedAt: created, CodeHash: hash(id("code")),
	}
	require.NoError(t, s.CreateList(ctx, l, owner, []byte("u1"), nil))
	return fixture{list: l, owner: owner}
}

func update(t *testing.T, s yaps.Store, ref string, fn func(tx yaps.Tx) error) {
	t.Helper()
	require.NoError(t, s.Update(ctx, ref, fn))
}

func testCreateAndGetList(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	got, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, &yaps.List{
		Ref: f.list.Ref, Title: "Groceries", Kind: yaps.KindTask,
		CreatedAt: utc(base), UpdatedAt: utc(base), DocVersion: 1,
	}, got)

	p, err := s.PermissionByHash(ctx, f.owner.CodeHash)
	require.NoError(t, err)
	want := *f.owner
	want.CreatedAt = utc(base)
	require.Equal(t, &want, p)

	d, err := s.Doc(ctx, f.list.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, &yaps.DocLog{Updates: [][]byte{[]byte("u1")}, LastSeq: 1}, d)

	t.Run("DuplicateRef", func(t *testing.T) {
		owner := &yaps.Permission{ID: id("p"), Role: yaps.RoleOwner, CreatedAt: base, CodeHash: hash(id("c"))}
		err := s.CreateList(ctx, &yaps.List{Ref: f.list.Ref, Kind: yaps.KindNote, CreatedAt: base, UpdatedAt: base},
			owner, []byte("x"), nil)
		requireCode(t, yaps.ECONFLICT, err)
		_, err = s.PermissionByHash(ctx, owner.CodeHash)
		requireCode(t, yaps.ENOTFOUND, err) // the failed create left nothing behind
		got, err := s.List(ctx, f.list.Ref)
		require.NoError(t, err)
		require.Equal(t, yaps.KindTask, got.Kind)
	})
	t.Run("DuplicateCodeHash", func(t *testing.T) {
		ref := id("l")
		owner := &yaps.Permission{ID: id("p"), Role: yaps.RoleOwner, CreatedAt: base, CodeHash: f.owner.CodeHash}
		err := s.CreateList(ctx, &yaps.List{Ref: ref, Kind: yaps.KindNote, CreatedAt: base, UpdatedAt: base},
			owner, []byte("x"), nil)
		requireCode(t, yaps.ECONFLICT, err)
		_, err = s.List(ctx, ref)
		requireCode(t, yaps.ENOTFOUND, err) // all or nothing
	})
}

func testNotFound(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	other := newList(t, s, base)
	missing := id("missing")
	cases := []struct {
		name string
		call func() error
	}{
		{"List", func() error { _, err := s.List(ctx, missing); return err }},
		{"PermissionByHash", func() error { _, err := s.PermissionByHash(ctx, hash(missing)); return err }},
		{"PermissionByNilHash", func() error { _, err := s.PermissionByHash(ctx, nil); return err }},
		{"YapUnknownList", func() error { _, err := s.Yap(ctx, missing, "y"); return err }},
		{"YapUnknownID", func() error { _, err := s.Yap(ctx, f.list.Ref, missing); return err }},
		{"Doc", func() error { _, err := s.Doc(ctx, missing, 0); return err }},
		{"UpdateCount", func() error { _, err := s.UpdateCount(ctx, missing); return err }},
		{"CompactDoc", func() error { return s.CompactDoc(ctx, missing, 1, []byte("s")) }},
		{"Update", func() error { return s.Update(ctx, missing, func(yaps.Tx) error { return nil }) }},
		{"Account", func() error { _, err := s.Account(ctx, missing); return err }},
		{"AccountByHash", func() error { _, err := s.AccountByHash(ctx, hash(missing)); return err }},
		{"AccountByNilHash", func() error { _, err := s.AccountByHash(ctx, nil); return err }},
		{"Idempotency", func() error { _, err := s.Idempotency(ctx, "s", missing); return err }},
		{"TxPermission", func() error {
			return s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error { _, err := tx.Permission(missing); return err })
		}},
		{"TxPermissionOfOtherList", func() error {
			return s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error { _, err := tx.Permission(other.owner.ID); return err })
		}},
		{"TxRevokeUnknown", func() error {
			return s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error { return tx.RevokePermission(missing, base) })
		}},
		{"TxRevokeOtherList", func() error {
			return s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error { return tx.RevokePermission(other.owner.ID, base) })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireCode(t, yaps.ENOTFOUND, tc.call())
		})
	}
	p, err := s.PermissionByHash(ctx, other.owner.CodeHash)
	require.NoError(t, err)
	require.Nil(t, p.RevokedAt, "revoking through another list's tx must not touch it")

	// Collections of an unknown list are empty rather than errors: the
	// service checks the list first.
	ps, err := s.Permissions(ctx, missing)
	require.NoError(t, err)
	require.Empty(t, ps)
	ys, err := s.Yaps(ctx, missing, yaps.YapQuery{Limit: 10, IncludeDeleted: true})
	require.NoError(t, err)
	require.Empty(t, ys)
}

func testCanceledContext(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := s.Update(cctx, f.list.Ref, func(tx yaps.Tx) error {
		_, err := tx.AppendUpdate([]byte("x"))
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	d, err := s.Doc(ctx, f.list.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), d.LastSeq, "a canceled Update writes nothing")
}

// testTxDoc checks yaps.DocTx, for stores whose Tx implements it (all of
// this project's do): inside a transaction Doc is Store.Doc from the start,
// at the version of the row the transaction locked, and a compaction waits
// for the transaction (it could otherwise fold the log the service just
// read into a state behind its back).
func testTxDoc(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	ref := f.list.Ref
	appendN(t, s, ref, 2, 6)
	require.NoError(t, s.CompactDoc(ctx, ref, 3, []byte("state3")))
	want := &yaps.DocLog{State: []byte("state3"), StateSeq: 3, Updates: updates(4, 6), LastSeq: 6}
	compacted := make(chan error, 1)
	update(t, s, ref, func(tx yaps.Tx) error {
		dt, ok := tx.(yaps.DocTx)
		if !ok {
			t.Skip("the store's Tx does not implement yaps.DocTx")
		}
		d, err := dt.Doc()
		require.NoError(t, err)
		require.Equal(t, want, d)
		require.Equal(t, d.LastSeq, tx.List().DocVersion)
		go func() { compacted <- s.CompactDoc(ctx, ref, 6, []byte("state6")) }()
		select {
		case err := <-compacted:
			t.Fatalf("a compaction ran inside the transaction: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		d, err = dt.Doc()
		require.NoError(t, err)
		require.Equal(t, want, d)
		return nil
	})
	require.NoError(t, <-compacted)
	d, err := s.Doc(ctx, ref, 0)
	require.NoError(t, err)
	require.Equal(t, &yaps.DocLog{State: []byte("state6"), StateSeq: 6, LastSeq: 6}, d)
}

// A context cancelled after fn's last statement, before the commit, ends
// the Update either committed (nil) or with the context's error and
// nothing stored: never another error, which the service would report as
// a fault of its own (EINTERNAL, HTTP 500) instead of a client that went
// away. An fn that appends an update is followed by the store's own write
// of the list row; one that only appends an audit entry, by the commit.
func testCanceledBeforeCommit(t *testing.T, s yaps.Store) {
	for _, tc := range []struct {
		name   string
		update bool          // fn appends a document update too
		pause  time.Duration // after the cancel, before fn returns
	}{
		{"update", true, 0},
		{"audit", false, 0},
		// database/sql rolls a transaction back once its context ends.
		{"update after a pause", true, 50 * time.Millisecond},
		{"audit after a pause", false, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 3 {
				f := newList(t, s, base)
				cctx, cancel := context.WithCancel(ctx)
				err := s.Update(cctx, f.list.Ref, func(tx yaps.Tx) error {
					if tc.update {
						if _, err := tx.AppendUpdate([]byte("u2")); err != nil {
							return err
						}
					}
					if err := tx.AppendAudit(&yaps.AuditEntry{At: at(1), Action: "yap.create"}); err != nil {
						return err
					}
					cancel()
					time.Sleep(tc.pause)
					return nil
				})
				cancel()
				d, derr := s.Doc(ctx, f.list.Ref, 0)
				require.NoError(t, derr)
				audit, aerr := s.Audit(ctx, f.list.Ref, 0, 10)
				require.NoError(t, aerr)
				wantSeq := int64(1)
				if err == nil && tc.update {
					wantSeq = 2
				}
				require.Equal(t, wantSeq, d.LastSeq)
				if err == nil {
					require.Len(t, audit, 1, "committed")
					continue
				}
				require.ErrorIs(t, err, context.Canceled, "a cancelled commit is the context's error")
				require.Empty(t, audit, "not committed, nothing stored")
			}
		})
	}
}

func testTimes(t *testing.T, s yaps.Store) {
	// Sub-millisecond input is truncated; zones are normalized to UTC.
	fine := time.Date(2026, 5, 6, 7, 8, 9, 987_654_321, time.FixedZone("X", -7*3600))
	want := time.Date(2026, 5, 6, 14, 8, 9, 987_000_000, time.UTC)
	f := newList(t, s, fine)
	l, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, want, l.CreatedAt)
	require.Equal(t, time.UTC, l.CreatedAt.Location())

	// Times before 1970 and far in the future survive too.
	old := time.Date(1969, 7, 20, 20, 17, 40, 1_000_000, time.UTC)
	future := time.Date(2999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		return tx.PutYap(&yaps.Yap{ID: "y", Kind: yaps.KindEvent, CreatedAt: fine, UpdatedAt: fine,
			Title: ptr("Moon"), StartsAt: &old, EndsAt: &future})
	})
	y, err := s.Yap(ctx, f.list.Ref, "y")
	require.NoError(t, err)
	require.Equal(t, want, y.CreatedAt)
	require.Equal(t, want, y.UpdatedAt)
	require.Equal(t, old, *y.StartsAt)
	require.Equal(t, future, *y.EndsAt)
}

func testSaveList(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		start := tx.List()
		require.Equal(t, "Groceries", start.Title)
		l := *start
		l.Title, l.Kind = "Notes", yaps.KindNote
		l.UpdatedAt = at(5)
		l.ArchivedAt, l.RolledUpAt = ptr(at(6)), ptr(at(7))
		l.AccountID = "acct"
		l.CreatedAt = at(99) // not writable: CreatedAt is fixed at creation
		require.NoError(t, tx.SaveList(&l))
		require.Equal(t, "Groceries", tx.List().Title, "tx.List is the list as of the start")
		return nil
	})
	got, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, &yaps.List{
		Ref: f.list.Ref, Title: "Notes", Kind: yaps.KindNote,
		CreatedAt: utc(base), UpdatedAt: utc(at(5)),
		ArchivedAt: ptr(utc(at(6))), RolledUpAt: ptr(utc(at(7))),
		AccountID: "acct", DocVersion: 1,
	}, got)

	// Clearing the markers writes NULLs back.
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		l := tx.List()
		require.Equal(t, got, l)
		l.ArchivedAt, l.RolledUpAt, l.AccountID = nil, nil, ""
		return tx.SaveList(l)
	})
	got, err = s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Nil(t, got.ArchivedAt)
	require.Nil(t, got.RolledUpAt)
	require.Empty(t, got.AccountID)
}

func testPermissions(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	editor := &yaps.Permission{ID: id("p"), ListRef: f.list.Ref, Role: yaps.RoleEditor, Label: "Ed",
		CreatedAt: at(2), CodeHash: hash(id("c"))}
	agent := &yaps.Permission{ID: id("p"), ListRef: f.list.Ref, Role: yaps.RoleAgent, Label: "bot",
		Scopes: []yaps.Scope{yaps.ScopeTasksWrite, yaps.ScopeYapsWrite}, CreatedAt: at(1), CodeHash: hash(id("c"))}
	owner2 := &yaps.Permission{ID: id("p"), ListRef: f.list.Ref, Role: yaps.RoleOwner,
		CreatedAt: at(3), CodeHash: hash(id("c"))}
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		n, err := tx.ActiveOwners()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		for _, p := range []*yaps.Permission{editor, agent, owner2} {
			require.NoError(t, tx.CreatePermission(p))
		}
		n, err = tx.ActiveOwners()
		require.NoError(t, err)
		require.Equal(t, 2, n, "ActiveOwners sees the tx's own writes")
		got, err := tx.Permission(agent.ID)
		require.NoError(t, err)
		require.Equal(t, agent.Scopes, got.Scopes)
		return nil
	})

	ps, err := s.Permissions(ctx, f.list.Ref)
	require.NoError(t, err)
	ids := func(ps []*yaps.Permission) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	require.Equal(t, []string{f.owner.ID, agent.ID, editor.ID, owner2.ID}, ids(ps), "oldest first")
	wantAgent := *agent
	wantAgent.CreatedAt = utc(agent.CreatedAt)
	require.Equal(t, &wantAgent, ps[1])

	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		require.NoError(t, tx.RevokePermission(owner2.ID, at(10)))
		require.NoError(t, tx.RevokePermission(editor.ID, at(11)))
		n, err := tx.ActiveOwners()
		require.NoError(t, err)
		require.Equal(t, 1, n, "ActiveOwners sees the tx's own revocations")
		p, err := tx.Permission(editor.ID)
		require.NoError(t, err)
		require.Equal(t, ptr(utc(at(11))), p.RevokedAt)
		return nil
	})
	// Revoking again keeps the first revocation time.
	update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.RevokePermission(editor.ID, at(50)) })

	ps, err = s.Permissions(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, []string{f.owner.ID, agent.ID}, ids(ps), "revoked permissions are left out")

	p, err := s.PermissionByHash(ctx, editor.CodeHash)
	require.NoError(t, err, "revoked permissions are still found by hash")
	require.Equal(t, f.list.Ref, p.ListRef)
	require.Equal(t, ptr(utc(at(11))), p.RevokedAt)
	require.False(t, p.Active())

	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		n, err := tx.ActiveOwners()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		p, err := tx.Permission(owner2.ID)
		require.NoError(t, err)
		require.NotNil(t, p.RevokedAt)
		// Duplicate id or code hash is a conflict.
		dup := *editor
		dup.ID = id("p")
		requireCode(t, yaps.ECONFLICT, tx.CreatePermission(&dup))
		return nil
	})
}

func fullTask(listRef, yid string, created time.Time) *yaps.Yap {
	return &yaps.Yap{
		ID: yid, ListRef: listRef, Kind: yaps.KindTask, CreatedAt: created, UpdatedAt: created.Add(time.Second),
		Content: "buy milk #!high", Status: yaps.StatusInProgress, Priority: ptr(yaps.PriorityHigh),
		DueAt: ptr(created.Add(time.Hour)), Tags: []string{"home", "ünïcode"},
	}
}

func normalizeYap(y *yaps.Yap) *yaps.Yap {
	c := *y
	c.CreatedAt, c.UpdatedAt = utc(y.CreatedAt), utc(y.UpdatedAt)
	for _, p := range []**time.Time{&c.DeletedAt, &c.DueAt, &c.StartsAt, &c.EndsAt} {
		if *p != nil {
			*p = ptr(utc(**p))
		}
	}
	return &c
}

func testYapProjection(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	task := fullTask(f.list.Ref, "task1", at(1))
	note := &yaps.Yap{ID: "note1", ListRef: f.list.Ref, Kind: yaps.KindNote, CreatedAt: at(2), UpdatedAt: at(2),
		Title: ptr(""), Body: "line1\nline2 \"quoted\" \x00 nul", Tags: []string{}} // empty, not nil
	event := &yaps.Yap{ID: "event1", ListRef: f.list.Ref, Kind: yaps.KindEvent, CreatedAt: at(3), UpdatedAt: at(3),
		Title: ptr("Standup"), StartsAt: ptr(at(1000)), EndsAt: ptr(at(2000)), Location: ptr("Room 1"),
		DeletedAt: ptr(at(4))}
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		for _, y := range []*yaps.Yap{task, note, event} {
			require.NoError(t, tx.PutYap(y))
		}
		return nil
	})
	for _, y := range []*yaps.Yap{task, note, event} {
		got, err := s.Yap(ctx, f.list.Ref, y.ID)
		require.NoError(t, err)
		require.Equal(t, normalizeYap(y), got, y.ID)
	}

	// Replace: optional fields cleared come back nil.
	task2 := &yaps.Yap{ID: task.ID, ListRef: f.list.Ref, Kind: yaps.KindTask, CreatedAt: at(1), UpdatedAt: at(9),
		Content: "buy oat milk", Status: yaps.StatusDone}
	update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.PutYap(task2) })
	got, err := s.Yap(ctx, f.list.Ref, task.ID)
	require.NoError(t, err)
	require.Equal(t, normalizeYap(task2), got)

	// Delete removes the projection; deleting again is not an error.
	update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.DeleteYap(note.ID) })
	_, err = s.Yap(ctx, f.list.Ref, note.ID)
	requireCode(t, yaps.ENOTFOUND, err)
	update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.DeleteYap(note.ID) })

	// Yap ids are per list: the same id in another list is another yap.
	g := newList(t, s, base)
	_, err = s.Yap(ctx, g.list.Ref, task.ID)
	requireCode(t, yaps.ENOTFOUND, err)
	update(t, s, g.list.Ref, func(tx yaps.Tx) error { return tx.PutYap(fullTask(g.list.Ref, task.ID, at(5))) })
	got, err = s.Yap(ctx, f.list.Ref, task.ID)
	require.NoError(t, err)
	require.Equal(t, "buy oat milk", got.Content)
}

func testYapsPaging(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	// Inserted out of order, with ties on CreatedAt broken by ID.
	specs := []struct {
		id      string
		ms      int
		deleted bool
	}{
		{"e", 30, false}, {"a", 10, false}, {"c", 20, true}, {"b", 20, false},
		{"d", 20, false}, {"Z", 20, false}, {"f", 40, true}, {"g", 50, false}, {"0", 50, false},
	}
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		for _, sp := range specs {
			y := &yaps.Yap{ID: sp.id, Kind: yaps.KindNote, CreatedAt: at(sp.ms), UpdatedAt: at(sp.ms), Body: sp.id}
			if sp.deleted {
				y.DeletedAt = ptr(at(100))
			}
			require.NoError(t, tx.PutYap(y))
		}
		return nil
	})
	other := newList(t, s, base)
	update(t, s, other.list.Ref, func(tx yaps.Tx) error { return tx.PutYap(fullTask(other.list.Ref, "zz", at(0))) })

	// IDs compare bytewise: "Z" < "b" (a locale collation would differ).
	allOrder := []string{"a", "Z", "b", "c", "d", "e", "f", "0", "g"}
	liveOrder := []string{"a", "Z", "b", "d", "e", "0", "g"}
	for _, tc := range []struct {
		name           string
		limit          int
		includeDeleted bool
		want           []string
	}{
		{"Live/1", 1, false, liveOrder},
		{"Live/4", 4, false, liveOrder},
		{"Live/100", 100, false, liveOrder},
		{"All/3", 3, true, allOrder},
		{"All/9", 9, true, allOrder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var after *yaps.YapCursor
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20, "paging does not terminate")
				page, err := s.Yaps(ctx, f.list.Ref, yaps.YapQuery{After: after, Limit: tc.limit, IncludeDeleted: tc.includeDeleted})
				require.NoError(t, err)
				require.LessOrEqual(t, len(page), tc.limit)
				if len(page) == 0 {
					break
				}
				for _, y := range page {
					require.Equal(t, f.list.Ref, y.ListRef)
					require.Equal(t, y.ID, y.Body, "the whole yap is returned")
					got = append(got, y.ID)
				}
				last := page[len(page)-1]
				after = &yaps.YapCursor{CreatedAt: last.CreatedAt, ID: last.ID}
			}
			require.Equal(t, tc.want, got)
		})
	}

	// A cursor between existing positions, in another zone.
	page, err := s.Yaps(ctx, f.list.Ref, yaps.YapQuery{After: &yaps.YapCursor{CreatedAt: at(20), ID: "bb"}, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Equal(t, "d", page[0].ID)
	require.Equal(t, "e", page[1].ID)
	require.Equal(t, utc(at(30)), page[1].CreatedAt)

	page, err = s.Yaps(ctx, f.list.Ref, yaps.YapQuery{After: &yaps.YapCursor{CreatedAt: at(50), ID: "g"}, Limit: 10, IncludeDeleted: true})
	require.NoError(t, err)
	require.Empty(t, page)
}

func appendN(t *testing.T, s yaps.Store, ref string, from, to int) {
	t.Helper()
	update(t, s, ref, func(tx yaps.Tx) error {
		for i := from; i <= to; i++ {
			seq, err := tx.AppendUpdate(fmt.Appendf(nil, "u%d", i))
			require.NoError(t, err)
			require.Equal(t, int64(i), seq)
		}
		return nil
	})
}

func updates(from, to int) [][]byte {
	var out [][]byte
	for i := from; i <= to; i++ {
		out = append(out, fmt.Appendf(nil, "u%d", i))
	}
	return out
}

func testDocLog(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	appendN(t, s, f.list.Ref, 2, 4)
	appendN(t, s, f.list.Ref, 5, 6)
	l, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(6), l.DocVersion, "DocVersion follows the log's last seq")

	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		require.Equal(t, int64(6), tx.List().DocVersion)
		got, err := tx.UpdatesSince(3)
		require.NoError(t, err)
		require.Equal(t, updates(4, 6), got)
		seq, err := tx.AppendUpdate([]byte("u7"))
		require.NoError(t, err)
		require.Equal(t, int64(7), seq)
		got, err = tx.UpdatesSince(5)
		require.NoError(t, err)
		require.Equal(t, updates(6, 7), got, "UpdatesSince sees the tx's own appends")
		got, err = tx.UpdatesSince(7)
		require.NoError(t, err)
		require.Empty(t, got)
		got, err = tx.UpdatesSince(0)
		require.NoError(t, err)
		require.Equal(t, updates(1, 7), got)
		return nil
	})
	for _, tc := range []struct {
		after int64
		want  [][]byte
	}{{0, updates(1, 7)}, {1, updates(2, 7)}, {6, updates(7, 7)}, {7, nil}, {9, nil}} {
		d, err := s.Doc(ctx, f.list.Ref, tc.after)
		require.NoError(t, err)
		require.Equal(t, &yaps.DocLog{Updates: tc.want, LastSeq: 7}, d, "after %d", tc.after)
	}
	n, err := s.UpdateCount(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)

	// SaveList cannot move DocVersion away from the log.
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		l := tx.List()
		if _, err := tx.AppendUpdate([]byte("u8")); err != nil {
			return err
		}
		l.DocVersion = 8
		l.Title = "x"
		return tx.SaveList(l)
	})
	l, err = s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(8), l.DocVersion)

	// A list created without a first update starts with an empty log.
	l2 := &yaps.List{Ref: id("l"), Kind: yaps.KindTask, CreatedAt: base, UpdatedAt: base}
	require.NoError(t, s.CreateList(ctx, l2, nil, nil, nil))
	d, err := s.Doc(ctx, l2.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, &yaps.DocLog{}, d)
	appendN(t, s, l2.Ref, 1, 1)
}

func testCompaction(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	appendN(t, s, f.list.Ref, 2, 6)
	require.NoError(t, s.CompactDoc(ctx, f.list.Ref, 3, []byte("state3")))

	for _, tc := range []struct {
		after int64
		want  *yaps.DocLog
	}{
		{0, &yaps.DocLog{State: []byte("state3"), StateSeq: 3, Updates: updates(4, 6), LastSeq: 6}},
		{2, &yaps.DocLog{State: []byte("state3"), StateSeq: 3, Updates: updates(4, 6), LastSeq: 6}},
		{3, &yaps.DocLog{StateSeq: 3, Updates: updates(4, 6), LastSeq: 6}},
		{5, &yaps.DocLog{StateSeq: 3, Updates: updates(6, 6), LastSeq: 6}},
		{6, &yaps.DocLog{StateSeq: 3, LastSeq: 6}},
	} {
		d, err := s.Doc(ctx, f.list.Ref, tc.after)
		require.NoError(t, err)
		require.Equal(t, tc.want, d, "after %d", tc.after)
	}
	n, err := s.UpdateCount(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)

	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		_, err := tx.UpdatesSince(2)
		requireCode(t, yaps.ENOTFOUND, err)
		got, err := tx.UpdatesSince(3)
		require.NoError(t, err)
		require.Equal(t, updates(4, 6), got)
		seq, err := tx.AppendUpdate([]byte("u7"))
		require.NoError(t, err)
		require.Equal(t, int64(7), seq, "numbering continues after compaction")
		return nil
	})

	// A stale compaction (seq at or below the state's) changes nothing.
	require.NoError(t, s.CompactDoc(ctx, f.list.Ref, 2, []byte("stale")))
	d, err := s.Doc(ctx, f.list.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, &yaps.DocLog{State: []byte("state3"), StateSeq: 3, Updates: updates(4, 7), LastSeq: 7}, d)

	// Compacting past the end of the log is refused.
	requireCode(t, yaps.EINVALID, s.CompactDoc(ctx, f.list.Ref, 8, []byte("future")))

	// Compacting everything leaves only the state.
	require.NoError(t, s.CompactDoc(ctx, f.list.Ref, 7, []byte("state7")))
	d, err = s.Doc(ctx, f.list.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, &yaps.DocLog{State: []byte("state7"), StateSeq: 7, LastSeq: 7}, d)
	n, err = s.UpdateCount(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Zero(t, n)
	l, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(7), l.DocVersion)
}

// testUpdatesTogether appends updates several at a time (AppendUpdates,
// which bunstore keeps as one row) and reads them back from every seq,
// also after a compaction at a seq inside such a group.
func testUpdatesTogether(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)               // u1
	big := bytes.Repeat([]byte{0xff}, 300) // a length over one varint byte
	want := []string{"u1", "u2", "", "u4", "u5", string(big), "u7", "u8"}
	asStrings := func(us [][]byte) []string {
		out := []string{}
		for _, u := range us {
			out = append(out, string(u))
		}
		return out
	}
	after := func(seq int) []string {
		if seq >= len(want) {
			return []string{}
		}
		return want[seq:]
	}
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		for _, step := range []struct {
			add  [][]byte
			last int64
		}{
			{[][]byte{[]byte("u2"), {}, []byte("u4")}, 4},
			{nil, 4},
			{[][]byte{[]byte("u5")}, 5},
			{[][]byte{big, []byte("u7")}, 7},
		} {
			last, err := tx.AppendUpdates(step.add)
			require.NoError(t, err)
			require.Equal(t, step.last, last)
		}
		seq, err := tx.AppendUpdate([]byte("u8"))
		require.NoError(t, err)
		require.Equal(t, int64(8), seq)
		for seq := range 9 {
			got, err := tx.UpdatesSince(int64(seq))
			require.NoError(t, err)
			require.Equal(t, after(seq), asStrings(got), "UpdatesSince(%d) in the writing tx", seq)
		}
		return nil
	})
	l, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(8), l.DocVersion)
	for seq := range 10 {
		d, err := s.Doc(ctx, f.list.Ref, int64(seq))
		require.NoError(t, err)
		require.Equal(t, int64(8), d.LastSeq)
		require.Equal(t, after(seq), asStrings(d.Updates), "Doc after %d", seq)
	}

	// Compacted at 3, inside the group 2-4: 4 is still returned, 2 and 3
	// are not.
	require.NoError(t, s.CompactDoc(ctx, f.list.Ref, 3, []byte("state3")))
	for _, seq := range []int{0, 2, 3, 4, 6} {
		d, err := s.Doc(ctx, f.list.Ref, int64(seq))
		require.NoError(t, err)
		require.Equal(t, int64(3), d.StateSeq)
		require.Equal(t, after(max(seq, 3)), asStrings(d.Updates), "Doc after %d", seq)
		if seq < 3 {
			require.Equal(t, []byte("state3"), d.State)
		} else {
			require.Nil(t, d.State)
		}
	}
	n, err := s.UpdateCount(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	update(t, s, f.list.Ref, func(tx yaps.Tx) error {
		got, err := tx.UpdatesSince(3)
		require.NoError(t, err)
		require.Equal(t, after(3), asStrings(got))
		last, err := tx.AppendUpdates([][]byte{[]byte("u9"), []byte("u10")})
		require.NoError(t, err)
		require.Equal(t, int64(10), last)
		return nil
	})
	d, err := s.Doc(ctx, f.list.Ref, 8)
	require.NoError(t, err)
	require.Equal(t, []string{"u9", "u10"}, asStrings(d.Updates))
}

func testRollback(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	existing := fullTask(f.list.Ref, "keep", at(1))
	update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.PutYap(existing) })
	before, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)

	boom := errors.New("boom")
	newPerm := &yaps.Permission{ID: id("p"), Role: yaps.RoleEditor, CreatedAt: at(2), CodeHash: hash(id("c"))}
	err = s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error {
		l := tx.List()
		l.Title = "changed"
		require.NoError(t, tx.SaveList(l))
		_, err := tx.AppendUpdate([]byte("lost"))
		require.NoError(t, err)
		require.NoError(t, tx.PutYap(fullTask(f.list.Ref, "new", at(2))))
		require.NoError(t, tx.DeleteYap(existing.ID))
		require.NoError(t, tx.CreatePermission(newPerm))
		require.NoError(t, tx.RevokePermission(f.owner.ID, at(3)))
		require.NoError(t, tx.AppendAudit(&yaps.AuditEntry{At: at(3), Action: "yap.create"}))
		require.NoError(t, tx.PutIdempotency(&yaps.IdempotencyRecord{Scope: "yaps:" + f.list.Ref, Key: "k", CreatedAt: at(3)}))
		return boom
	})
	require.ErrorIs(t, err, boom)

	after, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, before, after)
	d, err := s.Doc(ctx, f.list.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, &yaps.DocLog{Updates: [][]byte{[]byte("u1")}, LastSeq: 1}, d)
	_, err = s.Yap(ctx, f.list.Ref, "new")
	requireCode(t, yaps.ENOTFOUND, err)
	_, err = s.Yap(ctx, f.list.Ref, existing.ID)
	require.NoError(t, err)
	_, err = s.PermissionByHash(ctx, newPerm.CodeHash)
	requireCode(t, yaps.ENOTFOUND, err)
	p, err := s.PermissionByHash(ctx, f.owner.CodeHash)
	require.NoError(t, err)
	require.Nil(t, p.RevokedAt)
	entries, err := s.Audit(ctx, f.list.Ref, 0, 10)
	require.NoError(t, err)
	require.Empty(t, entries)
	_, err = s.Idempotency(ctx, "yaps:"+f.list.Ref, "k")
	requireCode(t, yaps.ENOTFOUND, err)

	// A yaps.Error from fn comes back with its kind intact, and the next
	// Update continues the log where it was.
	err = s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error {
		_, _ = tx.AppendUpdate([]byte("lost"))
		return yaps.Errorf(yaps.EFORBIDDEN, "archived")
	})
	requireCode(t, yaps.EFORBIDDEN, err)
	appendN(t, s, f.list.Ref, 2, 2)
}

// testFailingWrites runs concurrent writers to a few lists, through Update
// and through UpdateReplayable, some of which fail before writing, after
// writing, or panic after writing: exactly the writes that succeeded are
// stored, each once, however the store batched them and however often it
// ran their fn (a store that commits writers together, as bunstore's
// SQLite does, must keep a failing write's rows out of the others'
// transaction).
func testFailingWrites(t *testing.T, s yaps.Store) {
	ru, ok := s.(yaps.ReplayableUpdater)
	require.True(t, ok, "the store implements yaps.ReplayableUpdater")
	for _, how := range []struct {
		name   string
		update func(ctx context.Context, ref string, fn func(yaps.Tx) error) error
	}{{"Update", s.Update}, {"UpdateReplayable", ru.UpdateReplayable}} {
		t.Run(how.name, func(t *testing.T) {
			t.Parallel()
			failingWrites(t, s, how.update)
		})
	}
}

func failingWrites(t *testing.T, s yaps.Store, update func(ctx context.Context, ref string, fn func(yaps.Tx) error) error) {
	const lists, writers, rounds = 4, 16, 16
	var fs [lists]fixture
	for i := range fs {
		fs[i] = newList(t, s, base)
	}
	boom := errors.New("boom")
	var (
		mu   sync.Mutex
		want = map[string][]string{}
		wg   sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				f := fs[(w+r)%lists]
				data := fmt.Sprintf("w%d.%d", w, r)
				mode := (w*rounds + r) % 5 // 0: fails at once, 1: fails after writing, 2: panics after writing
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							require.Equal(t, "kaboom", p)
							err = boom
						}
					}()
					err = update(ctx, f.list.Ref, func(tx yaps.Tx) error {
						if mode == 0 {
							return boom
						}
						if _, err := tx.AppendUpdate([]byte(data)); err != nil {
							return err
						}
						if err := tx.PutYap(fullTask(f.list.Ref, "y"+data, at(1))); err != nil {
							return err
						}
						if err := tx.AppendAudit(&yaps.AuditEntry{At: base, Action: "yap.create", YapID: "y" + data}); err != nil {
							return err
						}
						l := tx.List()
						l.Title = data
						if err := tx.SaveList(l); err != nil {
							return err
						}
						switch mode {
						case 1:
							return boom
						case 2:
							panic("kaboom")
						}
						return nil
					})
				}()
				if mode <= 2 {
					require.ErrorIs(t, err, boom)
					continue
				}
				require.NoError(t, err)
				mu.Lock()
				want[f.list.Ref] = append(want[f.list.Ref], data)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, f := range fs {
		ref := f.list.Ref
		d, err := s.Doc(ctx, ref, 0)
		require.NoError(t, err)
		require.Equal(t, int64(len(want[ref])+1), d.LastSeq)
		var got []string
		for _, u := range d.Updates[1:] {
			got = append(got, string(u))
		}
		require.ElementsMatch(t, want[ref], got)
		page, err := s.Yaps(ctx, ref, yaps.YapQuery{Limit: 1000})
		require.NoError(t, err)
		require.Len(t, page, len(want[ref]))
		entries, err := s.Audit(ctx, ref, 0, 1000)
		require.NoError(t, err)
		require.Len(t, entries, len(want[ref]))
		l, err := s.List(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, d.LastSeq, l.DocVersion)
		require.Contains(t, want[ref], l.Title)
	}
}

func testConcurrentUpdates(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	const n = 24
	seqs := make([]int64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error {
				start := tx.List().DocVersion
				seq, err := tx.AppendUpdate(fmt.Appendf(nil, "w%d", i))
				if err != nil {
					return err
				}
				if seq != start+1 {
					return fmt.Errorf("seq %d after DocVersion %d", seq, start)
				}
				seqs[i] = seq
				return tx.AppendAudit(&yaps.AuditEntry{At: base, Action: "yap.update", Detail: fmt.Sprint(i)})
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	sorted := append([]int64(nil), seqs...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	for i, seq := range sorted {
		require.Equal(t, int64(i+2), seq, "seqs are gapless and unique: %v", sorted)
	}
	d, err := s.Doc(ctx, f.list.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, int64(n+1), d.LastSeq)
	require.Len(t, d.Updates, n+1)
	for i, seq := range seqs {
		require.Equal(t, fmt.Appendf(nil, "w%d", i), d.Updates[seq-1], "update stored at its seq")
	}
	l, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(n+1), l.DocVersion)
	entries, err := s.Audit(ctx, f.list.Ref, 0, 1000)
	require.NoError(t, err)
	require.Len(t, entries, n)
	for i := 1; i < len(entries); i++ {
		require.Greater(t, entries[i].Seq, entries[i-1].Seq)
	}
}

func testListsByAccount(t *testing.T, s yaps.Store) {
	acct, other := id("a"), id("a")
	rollup := func(f fixture, acct string) {
		t.Helper()
		update(t, s, f.list.Ref, func(tx yaps.Tx) error {
			l := tx.List()
			l.AccountID, l.RolledUpAt = acct, ptr(at(10))
			return tx.SaveList(l)
		})
	}
	// Three lists tie on createdAt, so their refs order them, bytewise:
	// "Z" < "a" < "b" (a locale collation would differ). The suffix keeps
	// refs unique per run.
	sfx := id("")
	mine := map[string]time.Time{"x" + sfx: at(3), "Z" + sfx: at(1), "b" + sfx: at(1), "a" + sfx: at(1), "0" + sfx: at(2)}
	for ref, created := range mine {
		rollup(newListRef(t, s, ref, created), acct)
	}
	rollup(newList(t, s, at(0)), other)
	newList(t, s, at(1)) // anonymous
	want := []string{"Z" + sfx, "a" + sfx, "b" + sfx, "0" + sfx, "x" + sfx}

	for _, tc := range []struct {
		name  string
		limit int
	}{
		{"1", 1}, {"2", 2}, {"3", 3}, {"5: the last page is full", 5}, {"100", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var after *yaps.ListCursor
			for pages := 0; ; pages++ {
				require.Less(t, pages, 10, "paging does not terminate")
				page, err := s.ListsByAccount(ctx, acct, after, tc.limit)
				require.NoError(t, err)
				require.LessOrEqual(t, len(page), tc.limit)
				if len(page) == 0 {
					break
				}
				for _, l := range page {
					require.Equal(t, acct, l.AccountID)
					require.Equal(t, ptr(utc(at(10))), l.RolledUpAt, "the whole list is returned")
					got = append(got, l.Ref)
				}
				last := page[len(page)-1]
				after = &yaps.ListCursor{CreatedAt: last.CreatedAt, Ref: last.Ref}
			}
			require.Equal(t, want, got, "oldest first, then by ref")
		})
	}

	got, err := s.ListsByAccount(ctx, acct, nil, 0)
	require.NoError(t, err)
	require.Len(t, got, len(want), "limit 0: all")

	// A cursor between existing positions, in another zone: "a" sorts
	// before "a"+sfx.
	got, err = s.ListsByAccount(ctx, acct, &yaps.ListCursor{CreatedAt: at(1).In(time.FixedZone("X", -7200)), Ref: "a"}, 3)
	require.NoError(t, err)
	require.Equal(t, want[1:4], refs(got))
	got, err = s.ListsByAccount(ctx, acct, &yaps.ListCursor{CreatedAt: at(3), Ref: "x" + sfx}, 10)
	require.NoError(t, err)
	require.Empty(t, got, "after the last")

	got, err = s.ListsByAccount(ctx, other, nil, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	got, err = s.ListsByAccount(ctx, id("a"), nil, 10)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = s.ListsByAccount(ctx, "", nil, 10)
	require.NoError(t, err)
	require.Empty(t, got, "anonymous lists belong to no account")
}

func refs(ls []*yaps.List) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Ref
	}
	return out
}

func testAccounts(t *testing.T, s yaps.Store) {
	a := &yaps.Account{ID: id("a"), CreatedAt: base, KeyHash: hash(id("k"))}
	host := &yaps.Account{ID: id("a"), CreatedAt: at(1)} // host-app account: no key
	host2 := &yaps.Account{ID: id("a"), CreatedAt: at(2)}
	for _, acc := range []*yaps.Account{a, host, host2} {
		require.NoError(t, s.CreateAccount(ctx, acc))
	}
	got, err := s.Account(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, &yaps.Account{ID: a.ID, CreatedAt: utc(base), KeyHash: a.KeyHash}, got)
	got, err = s.AccountByHash(ctx, a.KeyHash)
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	got, err = s.Account(ctx, host.ID)
	require.NoError(t, err)
	require.Empty(t, got.KeyHash)

	requireCode(t, yaps.ECONFLICT, s.CreateAccount(ctx, &yaps.Account{ID: a.ID, CreatedAt: base}))
	requireCode(t, yaps.ECONFLICT, s.CreateAccount(ctx, &yaps.Account{ID: id("a"), CreatedAt: base, KeyHash: a.KeyHash}))
}

func testAudit(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	g := newList(t, s, base)
	var want []*yaps.AuditEntry
	for round := range 3 {
		for _, l := range []fixture{f, g} {
			update(t, s, l.list.Ref, func(tx yaps.Tx) error {
				for i := range 2 {
					e := &yaps.AuditEntry{ListRef: l.list.Ref, At: at(round*10 + i), PermissionID: l.owner.ID,
						Role: yaps.RoleOwner, Action: "yap.create", YapID: fmt.Sprint("y", round, i), Detail: "kind=task"}
					require.NoError(t, tx.AppendAudit(e))
					require.NotZero(t, e.Seq, "AppendAudit assigns Seq")
					if l.list.Ref == f.list.Ref {
						c := *e
						c.At = utc(c.At)
						want = append(want, &c)
					}
				}
				return nil
			})
		}
	}
	all, err := s.Audit(ctx, f.list.Ref, 0, 100)
	require.NoError(t, err)
	require.Equal(t, want, all)

	var paged []*yaps.AuditEntry
	after := int64(0)
	for {
		page, err := s.Audit(ctx, f.list.Ref, after, 4)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 4)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].Seq
	}
	require.Equal(t, want, paged)

	none, err := s.Audit(ctx, id("l"), 0, 10)
	require.NoError(t, err)
	require.Empty(t, none)
}

func testIdempotency(t *testing.T, s yaps.Store) {
	rec := &yaps.IdempotencyRecord{Scope: "lists:127.0.0.1", Key: id("k"), RequestHash: hash("body"),
		Status: 201, Body: []byte(`{"ref":"x"}`), CreatedAt: base}
	l := &yaps.List{Ref: id("l"), Kind: yaps.KindTask, CreatedAt: base, UpdatedAt: base}
	owner := &yaps.Permission{ID: id("p"), Role: yaps.RoleOwner, CreatedAt: base, CodeHash: hash(id("c"))}
	require.NoError(t, s.CreateList(ctx, l, owner, []byte("u1"), rec))

	got, err := s.Idempotency(ctx, rec.Scope, rec.Key)
	require.NoError(t, err)
	want := *rec
	want.CreatedAt = utc(base)
	require.Equal(t, &want, got)
	_, err = s.Idempotency(ctx, "lists:10.0.0.1", rec.Key)
	requireCode(t, yaps.ENOTFOUND, err) // records are scoped

	// A second CreateList with the same key conflicts and creates nothing.
	l2 := &yaps.List{Ref: id("l"), Kind: yaps.KindTask, CreatedAt: base, UpdatedAt: base}
	owner2 := &yaps.Permission{ID: id("p"), Role: yaps.RoleOwner, CreatedAt: base, CodeHash: hash(id("c"))}
	requireCode(t, yaps.ECONFLICT, s.CreateList(ctx, l2, owner2, []byte("u1"), rec))
	_, err = s.List(ctx, l2.Ref)
	requireCode(t, yaps.ENOTFOUND, err)

	yrec := &yaps.IdempotencyRecord{Scope: "yaps:" + l.Ref, Key: "same", RequestHash: hash("b2"),
		Status: 201, Body: []byte("{}"), CreatedAt: at(1)}
	update(t, s, l.Ref, func(tx yaps.Tx) error { return tx.PutIdempotency(yrec) })
	got, err = s.Idempotency(ctx, yrec.Scope, "same")
	require.NoError(t, err)
	require.Equal(t, yrec.Body, got.Body)
	require.Equal(t, yrec.RequestHash, got.RequestHash)
	require.Equal(t, 201, got.Status)
	require.Equal(t, utc(at(1)), got.CreatedAt)

	err = s.Update(ctx, l.Ref, func(tx yaps.Tx) error { return tx.PutIdempotency(yrec) })
	requireCode(t, yaps.ECONFLICT, err)
}

// testIdempotencyReplace: a record is replaced only when it was created
// before the new record's ReplaceBefore (strictly), in CreateList and in
// Tx.PutIdempotency, and a rolled back replacement keeps the old record.
func testIdempotencyReplace(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	scope := "yaps:" + f.list.Ref
	rec := func(key, body string, created, replaceBefore time.Time) *yaps.IdempotencyRecord {
		return &yaps.IdempotencyRecord{Scope: scope, Key: key, RequestHash: hash(body), Status: 201,
			Body: []byte(body), CreatedAt: created, ReplaceBefore: replaceBefore}
	}
	put := func(r *yaps.IdempotencyRecord) error {
		return s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error { return tx.PutIdempotency(r) })
	}
	requireBody := func(key, body string, created time.Time) {
		t.Helper()
		got, err := s.Idempotency(ctx, scope, key)
		require.NoError(t, err)
		require.Equal(t, rec(key, body, utc(created), time.Time{}), got)
	}

	tests := []struct {
		name          string
		replaceBefore time.Time
		wantReplaced  bool
	}{
		{"Zero", time.Time{}, false},
		{"BeforeCreation", at(99), false},
		{"AtCreation", at(100), false}, // strictly before
		{"AfterCreation", at(101), true},
	}
	for _, tc := range tests {
		key := id("k")
		require.NoError(t, put(rec(key, "old", at(100), time.Time{})))
		err := put(rec(key, "new", at(500), tc.replaceBefore))
		if tc.wantReplaced {
			require.NoError(t, err, tc.name)
			requireBody(key, "new", at(500))
		} else {
			requireCode(t, yaps.ECONFLICT, err)
			requireBody(key, "old", at(100))
		}
	}

	// A replacement in a transaction that fails leaves the old record.
	key := id("k")
	require.NoError(t, put(rec(key, "old", at(100), time.Time{})))
	boom := errors.New("boom")
	err := s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error {
		require.NoError(t, tx.PutIdempotency(rec(key, "new", at(500), at(200))))
		return boom
	})
	require.ErrorIs(t, err, boom)
	requireBody(key, "old", at(100))

	// CreateList replaces an expired record and conflicts with a live one.
	lrec := &yaps.IdempotencyRecord{Scope: "lists:ip:" + id("ip"), Key: id("k"), RequestHash: hash("a"),
		Status: 201, Body: []byte("first"), CreatedAt: at(100)}
	newListWith := func(r *yaps.IdempotencyRecord) (*yaps.List, error) {
		l := &yaps.List{Ref: id("l"), Kind: yaps.KindTask, CreatedAt: base, UpdatedAt: base}
		owner := &yaps.Permission{ID: id("p"), Role: yaps.RoleOwner, CreatedAt: base, CodeHash: hash(id("c"))}
		return l, s.CreateList(ctx, l, owner, []byte("u1"), r)
	}
	_, err = newListWith(lrec)
	require.NoError(t, err)
	live := *lrec
	live.Body, live.CreatedAt, live.ReplaceBefore = []byte("second"), at(300), at(100)
	l2, err := newListWith(&live)
	requireCode(t, yaps.ECONFLICT, err)
	_, err = s.List(ctx, l2.Ref)
	requireCode(t, yaps.ENOTFOUND, err)
	live.ReplaceBefore = at(200)
	l3, err := newListWith(&live)
	require.NoError(t, err)
	_, err = s.List(ctx, l3.Ref)
	require.NoError(t, err)
	got, err := s.Idempotency(ctx, lrec.Scope, lrec.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("second"), got.Body)
	require.Equal(t, utc(at(300)), got.CreatedAt)
	require.True(t, got.ReplaceBefore.IsZero())
}

// testDeleteIdempotencyBefore: records created strictly before t go, oldest
// first and at most limit per call, whatever their scope.
func testDeleteIdempotencyBefore(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	type stored struct{ scope, key string }
	var all []stored
	putList := func(created time.Time) stored {
		r := &yaps.IdempotencyRecord{Scope: "lists:ip:127.0.0.1", Key: id("k"), Status: 201, CreatedAt: created}
		l := &yaps.List{Ref: id("l"), Kind: yaps.KindTask, CreatedAt: base, UpdatedAt: base}
		owner := &yaps.Permission{ID: id("p"), Role: yaps.RoleOwner, CreatedAt: base, CodeHash: hash(id("c"))}
		require.NoError(t, s.CreateList(ctx, l, owner, []byte("u1"), r))
		all = append(all, stored{r.Scope, r.Key})
		return all[len(all)-1]
	}
	putYap := func(created time.Time) stored {
		r := &yaps.IdempotencyRecord{Scope: "yaps:" + f.list.Ref, Key: id("k"), Status: 201, CreatedAt: created}
		update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.PutIdempotency(r) })
		all = append(all, stored{r.Scope, r.Key})
		return all[len(all)-1]
	}
	r100, r200, r300, r1000 := putList(at(100)), putYap(at(200)), putList(at(300)), putYap(at(1000))
	present := func(want ...stored) {
		t.Helper()
		for _, r := range all {
			_, err := s.Idempotency(ctx, r.scope, r.key)
			if slices.Contains(want, r) {
				require.NoError(t, err)
			} else {
				requireCode(t, yaps.ENOTFOUND, err)
			}
		}
	}

	tests := []struct {
		name   string
		before time.Time
		limit  int
		want   int
		left   []stored
	}{
		{"NothingOlder", at(100), 0, 0, []stored{r100, r200, r300, r1000}},
		{"StrictlyBefore", at(200), 10, 1, []stored{r200, r300, r1000}},
		{"OldestFirstWithinLimit", at(1001), 1, 1, []stored{r300, r1000}},
		{"NoLimit", at(1001), 0, 2, nil},
		{"Empty", at(5000), 10, 0, nil},
	}
	for _, tc := range tests {
		n, err := s.DeleteIdempotencyBefore(ctx, tc.before, tc.limit)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, n, tc.name)
		present(tc.left...)
	}
}

func testDeletedYapsBefore(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	g := newList(t, s, base)
	put := func(ref, yid string, deleted *time.Time) {
		update(t, s, ref, func(tx yaps.Tx) error {
			y := fullTask(ref, yid, at(0))
			y.DeletedAt = deleted
			return tx.PutYap(y)
		})
	}
	put(f.list.Ref, "live", nil)
	put(f.list.Ref, "old1", ptr(at(100)))
	put(g.list.Ref, "old2", ptr(at(200)))
	put(f.list.Ref, "old3", ptr(at(300)))
	put(g.list.Ref, "recent", ptr(at(1000)))

	got, err := s.DeletedYapsBefore(ctx, at(1000), 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []yaps.YapKey{
		{ListRef: f.list.Ref, ID: "old1"}, {ListRef: g.list.Ref, ID: "old2"}, {ListRef: f.list.Ref, ID: "old3"},
	}, got, "strictly before t")

	got, err = s.DeletedYapsBefore(ctx, at(1000), 2)
	require.NoError(t, err)
	require.Len(t, got, 2)

	got, err = s.DeletedYapsBefore(ctx, at(100), 10)
	require.NoError(t, err)
	require.Empty(t, got)

	// Purged yaps are gone from the answer.
	update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.DeleteYap("old1") })
	got, err = s.DeletedYapsBefore(ctx, at(1000), 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
}

func testCopies(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	y := fullTask(f.list.Ref, "y", at(1))
	update(t, s, f.list.Ref, func(tx yaps.Tx) error { return tx.PutYap(y) })
	// Mutating what was written...
	y.Tags[0] = "mutated"
	*y.Priority = yaps.PriorityLow
	f.owner.CodeHash[0] ^= 0xff
	f.list.Title = "mutated"

	// ...and what was read changes nothing stored.
	got, err := s.Yap(ctx, f.list.Ref, "y")
	require.NoError(t, err)
	require.Equal(t, "home", got.Tags[0])
	require.Equal(t, yaps.PriorityHigh, *got.Priority)
	got.Tags[0] = "mutated"
	*got.DueAt = base
	again, err := s.Yap(ctx, f.list.Ref, "y")
	require.NoError(t, err)
	require.Equal(t, "home", again.Tags[0])
	require.Equal(t, utc(at(1).Add(time.Hour)), *again.DueAt)

	l, err := s.List(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, "Groceries", l.Title)
	f.owner.CodeHash[0] ^= 0xff
	p, err := s.PermissionByHash(ctx, f.owner.CodeHash)
	require.NoError(t, err)
	p.CodeHash[0] ^= 0xff
	_, err = s.PermissionByHash(ctx, f.owner.CodeHash)
	require.NoError(t, err)
}

// Compaction racing writers never loses an update: whatever interleaving,
// the state plus the remaining log covers 1..LastSeq exactly.
func testCompactionDuringWrites(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	const writers, each = 4, 6
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(ctx, f.list.Ref, func(tx yaps.Tx) error {
					_, err := tx.AppendUpdate(fmt.Appendf(nil, "w%d-%d", w, i))
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// Two compactors, as two processes may run: each compacts to a seq
	// some writers, or the other compactor, may have passed already.
	for range 2 {
		wg.Go(func() {
			for range 2 * each {
				d, err := s.Doc(ctx, f.list.Ref, 0)
				if err == nil {
					err = s.CompactDoc(ctx, f.list.Ref, d.LastSeq, fmt.Appendf(nil, "state%d", d.LastSeq))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	d, err := s.Doc(ctx, f.list.Ref, 0)
	require.NoError(t, err)
	require.Equal(t, int64(writers*each+1), d.LastSeq)
	require.Len(t, d.Updates, int(d.LastSeq-d.StateSeq), "state seq %d", d.StateSeq)
	if d.StateSeq > 0 {
		require.Equal(t, fmt.Appendf(nil, "state%d", d.StateSeq), d.State)
	}
	n, err := s.UpdateCount(ctx, f.list.Ref)
	require.NoError(t, err)
	require.Equal(t, d.LastSeq-d.StateSeq, n)
}

// What an Update wrote reads back as if each write ran when it was made:
// the last write of a yap wins, a read in the middle sees the writes
// before it, and log updates and audit entries keep their order.
func testWritesInOrder(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	ref := f.list.Ref
	var audits []*yaps.AuditEntry
	audit := func(tx yaps.Tx, yid string) error {
		e := &yaps.AuditEntry{ListRef: ref, At: at(5), PermissionID: f.owner.ID, Role: yaps.RoleOwner,
			Action: "yap.update", YapID: yid}
		audits = append(audits, e)
		return tx.AppendAudit(e)
	}
	a1, a2 := fullTask(ref, "a", at(1)), fullTask(ref, "a", at(1))
	a2.Content = "second"
	b := fullTask(ref, "b", at(2))
	c := fullTask(ref, "c", at(3))
	update(t, s, ref, func(tx yaps.Tx) error {
		for _, step := range []func() error{
			func() error { _, err := tx.AppendUpdate([]byte("u2")); return err },
			func() error { return tx.PutYap(a1) },
			func() error { return tx.PutYap(b) },
			func() error { return audit(tx, "a") },
			func() error { return tx.DeleteYap("b") },
			func() error { return tx.PutYap(a2) },
			func() error {
				// A read in the middle sees everything before it.
				p, err := tx.Permission(f.owner.ID)
				if err == nil && p.ID != f.owner.ID {
					return fmt.Errorf("read the wrong permission %q", p.ID)
				}
				return err
			},
			func() error { _, err := tx.AppendUpdate([]byte("u3")); return err },
			func() error { return tx.PutYap(c) },
			func() error { return tx.DeleteYap("c") },
			func() error { return tx.PutYap(c) },
			func() error { return audit(tx, "c") },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := s.Yap(ctx, ref, "a")
	require.NoError(t, err)
	require.Equal(t, "second", got.Content, "the last write of a yap wins")
	_, err = s.Yap(ctx, ref, "b")
	requireCode(t, yaps.ENOTFOUND, err)
	got, err = s.Yap(ctx, ref, "c")
	require.NoError(t, err)
	require.Equal(t, normalizeYap(c).Content, got.Content)

	dl, err := s.Doc(ctx, ref, 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, dl.LastSeq)
	require.Equal(t, [][]byte{[]byte("u2"), []byte("u3")}, dl.Updates[len(dl.Updates)-2:])
	l, err := s.List(ctx, ref)
	require.NoError(t, err)
	require.EqualValues(t, 3, l.DocVersion)

	require.Len(t, audits, 2)
	require.NotZero(t, audits[0].Seq)
	require.Greater(t, audits[1].Seq, audits[0].Seq)
	log, err := s.Audit(ctx, ref, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 2)
	require.Equal(t, []string{"a", "c"}, []string{log[0].YapID, log[1].YapID})
	require.Equal(t, audits[1].Seq, log[1].Seq)
}

func testClaimClients(t *testing.T, s yaps.Store) {
	f := newList(t, s, base)
	g := newList(t, s, base)
	p1, p2 := id("p"), id("p")
	const big = 1<<53 - 1 // the largest client ID a Yjs update can hold
	got, err := s.ClaimClients(ctx, f.list.Ref, p1, []uint64{1, big})
	require.NoError(t, err)
	require.Equal(t, map[uint64]string{1: p1, big: p1}, got)
	// A claim is never changed; unclaimed IDs go to the new claimant.
	got, err = s.ClaimClients(ctx, f.list.Ref, p2, []uint64{big, 2})
	require.NoError(t, err)
	require.Equal(t, map[uint64]string{big: p1, 2: p2}, got)
	got, err = s.ClaimClients(ctx, f.list.Ref, p2, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	// Claims are per list.
	got, err = s.ClaimClients(ctx, g.list.Ref, p2, []uint64{1})
	require.NoError(t, err)
	require.Equal(t, map[uint64]string{1: p2}, got)

	// Concurrent claims of one ID leave one writer, and all see it.
	const n = 8
	winners := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got, err := s.ClaimClients(ctx, f.list.Ref, fmt.Sprint("racer", i), []uint64{77})
			assert.NoError(t, err)
			winners[i] = got[77]
		})
	}
	wg.Wait()
	for _, w := range winners {
		require.Equal(t, winners[0], w)
	}
	require.Contains(t, winners[0], "racer")

	// Claims of the same IDs in opposite orders, and with an ID given
	// twice, all succeed (on Postgres they deadlocked: each waited for the
	// other's row) and agree on one writer per ID.
	for round := range 20 {
		ids := []uint64{uint64(1000 + 2*round), uint64(1001 + 2*round)}
		orders := [][]uint64{{ids[0], ids[1]}, {ids[1], ids[0], ids[1]}}
		seen := make([]map[uint64]string, len(orders))
		var wg sync.WaitGroup
		for i, order := range orders {
			wg.Go(func() {
				got, err := s.ClaimClients(ctx, f.list.Ref, fmt.Sprint("crosser", i), order)
				assert.NoError(t, err)
				seen[i] = got
			})
		}
		wg.Wait()
		require.Len(t, seen[0], 2)
		require.Equal(t, seen[0], seen[1], "round %d", round)
	}
}

func testListVersions(t *testing.T, s yaps.Store) {
	a := newList(t, s, base)
	// b: a longer log, compacted (which leaves DocVersion alone), and
	// permissions created and revoked (twice, which counts once).
	b := newList(t, s, base)
	appendN(t, s, b.list.Ref, 2, 4)
	require.NoError(t, s.CompactDoc(ctx, b.list.Ref, 3, []byte("state3")))
	editor := &yaps.Permission{ID: id("p"), Role: yaps.RoleEditor, CreatedAt: at(1), CodeHash: hash(id("c"))}
	viewer := &yaps.Permission{ID: id("p"), Role: yaps.RoleViewer, CreatedAt: at(2), CodeHash: hash(id("c"))}
	update(t, s, b.list.Ref, func(tx yaps.Tx) error {
		require.NoError(t, tx.CreatePermission(editor))
		return tx.CreatePermission(viewer)
	})
	update(t, s, b.list.Ref, func(tx yaps.Tx) error { return tx.RevokePermission(editor.ID, at(3)) })
	update(t, s, b.list.Ref, func(tx yaps.Tx) error { return tx.RevokePermission(editor.ID, at(4)) })
	// c: no owner, no first update.
	c := &yaps.List{Ref: id("l"), Kind: yaps.KindTask, CreatedAt: base, UpdatedAt: base}
	require.NoError(t, s.CreateList(ctx, c, nil, nil, nil))

	all := map[string]yaps.ListVersion{
		a.list.Ref: {DocVersion: 1, Permissions: 1},
		b.list.Ref: {DocVersion: 4, Permissions: 3, Revoked: 1},
		c.Ref:      {},
	}
	// many spans several statements of a SQL store (512 refs each), the
	// lists at the first, a middle and the last position.
	many := make([]string, 1100)
	for i := range many {
		many[i] = id("missing")
	}
	many[0], many[600], many[1099] = a.list.Ref, b.list.Ref, c.Ref
	for _, tc := range []struct {
		name string
		refs []string
		want map[string]yaps.ListVersion
	}{
		{"None", nil, map[string]yaps.ListVersion{}},
		{"One", []string{b.list.Ref}, map[string]yaps.ListVersion{b.list.Ref: all[b.list.Ref]}},
		{"UnknownAndDuplicates", []string{id("missing"), a.list.Ref, b.list.Ref, a.list.Ref, c.Ref}, all},
		{"Many", many, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListVersions(ctx, tc.refs)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	// DocVersion is the LastSeq of Doc.
	for ref, v := range all {
		d, err := s.Doc(ctx, ref, v.DocVersion)
		require.NoError(t, err)
		require.Equal(t, d.LastSeq, v.DocVersion)
	}
}
