package yaps_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// countingStore counts the reads Authenticate makes.
type countingStore struct {
	yaps.Store
	reads atomic.Int64
}

func (c *countingStore) List(ctx context.Context, ref string) (*yaps.List, error) {
	c.reads.Add(1)
	return c.Store.List(ctx, ref)
}

func (c *countingStore) PermissionByHash(ctx context.Context, h []byte) (*yaps.Permission, error) {
	c.reads.Add(1)
	return c.Store.PermissionByHash(ctx, h)
}

func newCountingEnv(t *testing.T, ttl time.Duration) (*env, *countingStore) {
	t.Helper()
	var cs *countingStore
	e := newEnv(t, func(c *yaps.Config) {
		cs = &countingStore{Store: c.Store}
		c.Store = cs
		c.AuthCacheTTL = ttl
	})
	return e, cs
}

func authOK(t *testing.T, s *yaps.Service, ref, code string) *yaps.Actor {
	t.Helper()
	a, err := s.Authenticate(context.Background(), ref, code)
	require.NoError(t, err)
	return a
}

func TestAuthCacheServesRepeatedReads(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		ttl       time.Duration
		wantReads int64
	}{
		{"enabled", time.Hour, 0},
		{"disabled", -1, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, cs := newCountingEnv(t, c.ttl)
			cl, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Title: yaps.Set("t")})
			require.NoError(t, err)
			first := authOK(t, e.svc, cl.List.Ref, cl.OwnerCode)
			before := cs.reads.Load()
			for range 5 {
				a := authOK(t, e.svc, cl.List.Ref, cl.OwnerCode)
				require.Equal(t, first.Permission.ID, a.Permission.ID)
				// Callers get copies: changing one changes nothing cached.
				a.List.Title, a.Permission.Role = "changed", yaps.RoleViewer
			}
			require.Equal(t, c.wantReads, cs.reads.Load()-before)
			a := authOK(t, e.svc, cl.List.Ref, cl.OwnerCode)
			require.Equal(t, "t", a.List.Title)
			require.Equal(t, yaps.RoleOwner, a.Permission.Role)
		})
	}
}

// Every change made through this process is seen by the very next
// Authenticate, cached or not.
func TestAuthCacheFollowsLocalChanges(t *testing.T) {
	t.Parallel()
	e, _ := newCountingEnv(t, time.Hour)
	cl, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Title: yaps.Set("before")})
	require.NoError(t, err)
	ref := cl.List.Ref
	owner := authOK(t, e.svc, ref, cl.OwnerCode)
	ed, err := e.svc.IssuePermission(e.ctx, owner, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	editor := authOK(t, e.svc, ref, ed.Code)
	authOK(t, e.svc, ref, ed.Code) // cached now

	// A write through the write path updates the cached row.
	_, err = e.svc.UpdateList(e.ctx, owner, yaps.ListPatch{Title: yaps.Set("after")}, "")
	require.NoError(t, err)
	a := authOK(t, e.svc, ref, ed.Code)
	require.Equal(t, "after", a.List.Title)
	require.Greater(t, a.List.DocVersion, editor.List.DocVersion)
	_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("x"), "", nil)
	require.NoError(t, err)
	b := authOK(t, e.svc, ref, ed.Code)
	require.Greater(t, b.List.DocVersion, a.List.DocVersion)
	stored, err := e.store.List(e.ctx, ref)
	require.NoError(t, err)
	require.Equal(t, stored.DocVersion, b.List.DocVersion)
	require.Equal(t, stored.UpdatedAt, b.List.UpdatedAt)

	// Archive and unarchive.
	_, err = e.svc.UpdateList(e.ctx, owner, yaps.ListPatch{ArchivedAt: yaps.Set(e.clock.Now())}, "")
	require.NoError(t, err)
	require.True(t, authOK(t, e.svc, ref, ed.Code).List.Archived())
	_, err = e.svc.UpdateList(e.ctx, e.reauth(owner), yaps.ListPatch{ArchivedAt: yaps.Null[time.Time]()}, "")
	require.NoError(t, err)
	require.False(t, authOK(t, e.svc, ref, ed.Code).List.Archived())

	// Rollup changes the list row outside the document.
	acct, _, err := e.svc.CreateAccount(e.ctx)
	require.NoError(t, err)
	_, err = e.svc.Rollup(e.ctx, owner, acct)
	require.NoError(t, err)
	require.Equal(t, acct.ID, authOK(t, e.svc, ref, ed.Code).List.AccountID)

	// Revocation and rotation take effect at once.
	require.NoError(t, e.svc.RevokePermission(e.ctx, owner, ed.Permission.ID))
	_, err = e.svc.Authenticate(e.ctx, ref, ed.Code)
	requireCode(t, yaps.EUNAUTHORIZED, err)
	newCode, err := e.svc.RotateOwner(e.ctx, owner)
	require.NoError(t, err)
	_, err = e.svc.Authenticate(e.ctx, ref, cl.OwnerCode)
	requireCode(t, yaps.EUNAUTHORIZED, err)
	authOK(t, e.svc, ref, newCode)
}

// Another process's changes arrive by notice and drop what was cached.
func TestAuthCacheFollowsNotices(t *testing.T) {
	t.Parallel()
	e1, s2, _, _ := twoProcesses(t, -1)
	owner := e1.list()
	ref := owner.List.Ref
	ed, err := e1.svc.IssuePermission(e1.ctx, owner, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	authOK(t, s2, ref, ed.Code)

	_, err = e1.svc.UpdateList(e1.ctx, owner, yaps.ListPatch{Title: yaps.Set("renamed")}, "")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return authOK(t, s2, ref, ed.Code).List.Title == "renamed" },
		5*time.Second, 5*time.Millisecond)

	require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, ed.Permission.ID))
	require.Eventually(t, func() bool {
		_, err := s2.Authenticate(context.Background(), ref, ed.Code)
		return yaps.ErrorCode(err) == yaps.EUNAUTHORIZED
	}, 5*time.Second, 5*time.Millisecond)
}

// Without a notifier another process's revocation is unseen by reads for
// at most the TTL, and never lets a write through.
func TestAuthCacheStaleEntryNeverWrites(t *testing.T) {
	t.Parallel()
	e1 := newEnv(t)
	s2 := e1.secondProcess(func(c *yaps.Config) { c.AuthCacheTTL = time.Hour })
	owner := e1.list()
	ref := owner.List.Ref
	ed, err := e1.svc.IssuePermission(e1.ctx, owner, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	authOK(t, s2, ref, ed.Code)
	require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, ed.Permission.ID))

	authOK(t, s2, ref, ed.Code) // within the TTL, nobody told s2
	// AuthenticateFresh asks the store (the sync endpoint's check of a new
	// connection) and drops the stale entry.
	_, err = s2.AuthenticateFresh(context.Background(), ref, ed.Code)
	requireCode(t, yaps.EUNAUTHORIZED, err)
	_, err = s2.Authenticate(context.Background(), ref, ed.Code)
	requireCode(t, yaps.EUNAUTHORIZED, err)
	ed, err = e1.svc.IssuePermission(e1.ctx, owner, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	authOK(t, s2, ref, ed.Code)
	require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, ed.Permission.ID))
	stale := authOK(t, s2, ref, ed.Code)
	_, _, err = s2.CreateYap(context.Background(), stale, yaps.KindTask, task("x"), "", nil)
	requireCode(t, yaps.EUNAUTHORIZED, err)

	// Archived by the other process: a write with the stale row is refused.
	ed2, err := e1.svc.IssuePermission(e1.ctx, owner, yaps.RoleEditor, "ed2", nil)
	require.NoError(t, err)
	authOK(t, s2, ref, ed2.Code)
	_, err = e1.svc.UpdateList(e1.ctx, owner, yaps.ListPatch{ArchivedAt: yaps.Set(e1.clock.Now())}, "")
	require.NoError(t, err)
	stale = authOK(t, s2, ref, ed2.Code)
	require.False(t, stale.List.Archived())
	_, _, err = s2.CreateYap(context.Background(), stale, yaps.KindTask, task("x"), "", nil)
	requireCode(t, yaps.EFORBIDDEN, err)
}

func TestAuthCacheTTLExpires(t *testing.T) {
	t.Parallel()
	e1 := newEnv(t)
	s2 := e1.secondProcess(func(c *yaps.Config) { c.AuthCacheTTL = 20 * time.Millisecond })
	owner := e1.list()
	ed, err := e1.svc.IssuePermission(e1.ctx, owner, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	authOK(t, s2, owner.List.Ref, ed.Code)
	require.NoError(t, e1.svc.RevokePermission(e1.ctx, owner, ed.Permission.ID))
	time.Sleep(30 * time.Millisecond)
	_, err = s2.Authenticate(context.Background(), owner.List.Ref, ed.Code)
	requireCode(t, yaps.EUNAUTHORIZED, err)
}
