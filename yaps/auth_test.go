package yaps_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cl, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{})
	require.NoError(t, err)
	other, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{})
	require.NoError(t, err)
	owner, err := e.svc.Authenticate(e.ctx, cl.List.Ref, cl.OwnerCode)
	require.NoError(t, err)
	require.Equal(t, yaps.RoleOwner, owner.Permission.Role)
	ed, err := e.svc.IssuePermission(e.ctx, owner, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	require.NoError(t, e.svc.RevokePermission(e.ctx, owner, ed.Permission.ID))

	cases := []struct {
		name, ref, code, want string
	}{
		{"unknown ref first", "nope", "", yaps.ENOTFOUND},
		{"unknown ref with valid code", "nope", cl.OwnerCode, yaps.ENOTFOUND},
		{"missing code", cl.List.Ref, "", yaps.EUNAUTHORIZED},
		{"malformed code", cl.List.Ref, "yap_short", yaps.EUNAUTHORIZED},
		{"wrong prefix", cl.List.Ref, "yak_" + cl.OwnerCode[4:], yaps.EUNAUTHORIZED},
		{"unknown code", cl.List.Ref, yaps.NewCode(), yaps.EUNAUTHORIZED},
		{"revoked code", cl.List.Ref, ed.Code, yaps.EUNAUTHORIZED},
		{"other list's code", cl.List.Ref, other.OwnerCode, yaps.EUNAUTHORIZED},
	}
	for _, c := range cases {
		_, err := e.svc.Authenticate(e.ctx, c.ref, c.code)
		requireCode(t, c.want, err)
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	editor := e.actor(owner, yaps.RoleEditor)
	_, err := e.svc.IssuePermission(e.ctx, owner, yaps.Role("admin"), "", nil)
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.IssuePermission(e.ctx, owner, yaps.RoleEditor, "", []yaps.Scope{yaps.ScopeYapsWrite})
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.IssuePermission(e.ctx, owner, yaps.RoleAgent, "", []yaps.Scope{"all:write"})
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.IssuePermission(e.ctx, editor, yaps.RoleViewer, "", nil)
	requireCode(t, yaps.EFORBIDDEN, err)
	_, err = e.svc.Permissions(e.ctx, editor)
	requireCode(t, yaps.EFORBIDDEN, err)

	ag, err := e.svc.IssuePermission(e.ctx, owner, yaps.RoleAgent, "bot", nil)
	require.NoError(t, err)
	require.Equal(t, []yaps.Scope{yaps.ScopeTasksWrite}, ag.Permission.Scopes)
	ps, err := e.svc.Permissions(e.ctx, owner)
	require.NoError(t, err)
	require.Len(t, ps, 3)

	// The last owner code cannot be revoked; with two owners one can.
	requireCode(t, yaps.EFORBIDDEN, e.svc.RevokePermission(e.ctx, owner, owner.Permission.ID))
	o2, err := e.svc.IssuePermission(e.ctx, owner, yaps.RoleOwner, "second", nil)
	require.NoError(t, err)
	var revoked []string
	unsub := e.svc.Subscribe(func(ev yaps.Event) {
		if ev.Kind == yaps.EventCodeRevoked {
			revoked = append(revoked, ev.PermissionID)
		}
	})
	defer unsub()
	require.NoError(t, e.svc.RevokePermission(e.ctx, owner, o2.Permission.ID))
	require.NoError(t, e.svc.RevokePermission(e.ctx, owner, o2.Permission.ID)) // idempotent
	requireCode(t, yaps.ENOTFOUND, e.svc.RevokePermission(e.ctx, owner, "nope"))
	require.Equal(t, []string{o2.Permission.ID}, revoked)

	// Rotation: old code dead, new code works, event emitted.
	code, err := e.svc.RotateOwner(e.ctx, owner)
	require.NoError(t, err)
	require.True(t, yaps.WellFormedCode(code))
	require.Equal(t, []string{o2.Permission.ID, owner.Permission.ID}, revoked)
	_, err = e.svc.Authenticate(e.ctx, owner.List.Ref, code)
	require.NoError(t, err)
	// The stale actor of the rotated code can no longer act.
	_, err = e.svc.IssuePermission(e.ctx, owner, yaps.RoleViewer, "", nil)
	requireCode(t, yaps.EUNAUTHORIZED, err)
	_, err = e.svc.RotateOwner(e.ctx, editor)
	requireCode(t, yaps.EFORBIDDEN, err)
}

func TestRoleMatrixThroughService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	start := yaps.Set(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	note := yaps.YapFields{Body: yaps.Set("b")}
	ev := yaps.YapFields{Title: yaps.Set("e"), StartsAt: start}
	actors := map[string]*yaps.Actor{
		"owner":       owner,
		"editor":      e.actor(owner, yaps.RoleEditor),
		"viewer":      e.actor(owner, yaps.RoleViewer),
		"agent-tasks": e.actor(owner, yaps.RoleAgent),
		"agent-yaps":  e.actor(owner, yaps.RoleAgent, yaps.ScopeYapsWrite),
	}
	type want struct{ task, note, event, patchList, manage, audit bool }
	wants := map[string]want{
		"owner":       {true, true, true, true, true, true},
		"editor":      {true, true, true, true, false, false},
		"viewer":      {false, false, false, false, false, false},
		"agent-tasks": {true, false, false, false, false, false},
		"agent-yaps":  {true, true, true, false, false, false},
	}
	check := func(ok bool, err error) {
		t.Helper()
		if ok {
			require.NoError(t, err)
		} else {
			requireCode(t, yaps.EFORBIDDEN, err)
		}
	}
	for name, a := range actors {
		w := wants[name]
		_, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("t"), "", nil)
		check(w.task, err)
		_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindNote, note, "", nil)
		check(w.note, err)
		_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindEvent, ev, "", nil)
		check(w.event, err)
		_, err = e.svc.UpdateList(e.ctx, a, yaps.ListPatch{Title: yaps.Set("by " + name)}, "")
		check(w.patchList, err)
		_, err = e.svc.Permissions(e.ctx, a)
		check(w.manage, err)
		_, err = e.svc.Audit(e.ctx, a, "", 0)
		check(w.audit, err)
		_, err = e.svc.ListYaps(e.ctx, a, "", 0, false)
		require.NoError(t, err)
		_, _, err = e.svc.Snapshot(e.ctx, a, nil)
		require.NoError(t, err)
		require.Equal(t, w.task, e.svc.CanWrite(a), name)
	}
	// An agent with tasks:write cannot edit or delete a note.
	n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, note, "", nil)
	require.NoError(t, err)
	_, err = e.svc.UpdateYap(e.ctx, actors["agent-tasks"], n.ID, yaps.YapFields{Body: yaps.Set("x")}, "")
	requireCode(t, yaps.EFORBIDDEN, err)
	requireCode(t, yaps.EFORBIDDEN, e.svc.DeleteYap(e.ctx, actors["agent-tasks"], n.ID, ""))
	requireCode(t, yaps.EFORBIDDEN, e.svc.ArchiveList(e.ctx, actors["editor"], ""))
	_, err = e.svc.Rollup(e.ctx, actors["editor"], &yaps.Account{ID: "x"})
	requireCode(t, yaps.EFORBIDDEN, err)
}

func TestAuditLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	agent := e.actor(owner, yaps.RoleAgent)
	y, _, err := e.svc.CreateYap(e.ctx, agent, yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	_, err = e.svc.UpdateYap(e.ctx, agent, y.ID, yaps.YapFields{Status: yaps.Set(yaps.StatusDone)}, "")
	require.NoError(t, err)
	require.NoError(t, e.svc.DeleteYap(e.ctx, agent, y.ID, ""))
	var all []*yaps.AuditEntry
	cursor := ""
	for {
		p, err := e.svc.Audit(e.ctx, owner, cursor, 2)
		require.NoError(t, err)
		all = append(all, p.Entries...)
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	var actions []string
	for _, a := range all {
		actions = append(actions, a.Action)
	}
	require.Equal(t, []string{"permission.issue", "yap.create", "yap.update", "yap.delete"}, actions)
	require.Equal(t, agent.Permission.ID, all[1].PermissionID)
	require.Equal(t, yaps.RoleAgent, all[1].Role)
	require.Equal(t, y.ID, all[1].YapID)
	_, err = e.svc.Audit(e.ctx, owner, "garbage!", 0)
	requireCode(t, yaps.EINVALID, err)
}

func TestAccountsAndRollup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct, key, err := e.svc.CreateAccount(e.ctx)
	require.NoError(t, err)
	require.True(t, yaps.WellFormedAccountKey(key))
	got, err := e.svc.AccountByKey(e.ctx, key)
	require.NoError(t, err)
	require.Equal(t, acct.ID, got.ID)
	_, err = e.svc.AccountByKey(e.ctx, "yak_nope")
	requireCode(t, yaps.EUNAUTHORIZED, err)
	_, err = e.svc.AccountByKey(e.ctx, yaps.NewAccountKey())
	requireCode(t, yaps.EUNAUTHORIZED, err)
	_, err = e.svc.AccountLists(e.ctx, nil, "", 0)
	requireCode(t, yaps.EUNAUTHORIZED, err)

	owner := e.list()
	_, err = e.svc.Rollup(e.ctx, owner, nil)
	requireCode(t, yaps.EUNAUTHORIZED, err)
	merged, err := e.svc.Rollup(e.ctx, owner, acct)
	require.NoError(t, err)
	require.True(t, merged)
	merged, err = e.svc.Rollup(e.ctx, owner, acct)
	require.NoError(t, err)
	require.False(t, merged)
	other, _, err := e.svc.CreateAccount(e.ctx)
	require.NoError(t, err)
	_, err = e.svc.Rollup(e.ctx, owner, other)
	requireCode(t, yaps.EFORBIDDEN, err)
	page, err := e.svc.AccountLists(e.ctx, acct, "", 0)
	require.NoError(t, err)
	ls := page.Lists
	require.Len(t, ls, 1)
	require.Empty(t, page.NextCursor, "one page")
	require.Equal(t, owner.List.Ref, ls[0].Ref)
	require.NotNil(t, ls[0].RolledUpAt)
	// Writes after rollup keep the account.
	_, _, err = e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	l, err := e.store.List(e.ctx, owner.List.Ref)
	require.NoError(t, err)
	require.Equal(t, acct.ID, l.AccountID)
}

type fakeLimiter struct {
	class yaps.LimitClass
	key   string
	allow bool
}

func (f *fakeLimiter) Take(_ context.Context, _ yaps.LimitGroup, c yaps.LimitClass, key string) (yaps.LimitResult, error) {
	f.class, f.key = c, key
	return yaps.LimitResult{Allowed: f.allow, Limit: 1, RetryAfter: 3 * time.Second}, nil
}

func TestLimit(t *testing.T) {
	t.Parallel()
	lim := &fakeLimiter{allow: true}
	e := newEnv(t, func(c *yaps.Config) { c.Limiter = lim })
	rolled := &yaps.List{AccountID: "A"}
	viewer := &yaps.Actor{List: rolled, Permission: &yaps.Permission{ID: "P1", Role: yaps.RoleViewer}}
	cases := []struct {
		name  string
		ip    string
		acct  *yaps.Account
		actor *yaps.Actor
		class yaps.LimitClass
		key   string
	}{
		{"anonymous ipv4", "1.2.3.4", nil, nil, yaps.ClassAnonymous, "ip:1.2.3.4"},
		{"ipv4-mapped ipv6 is ipv4", "::ffff:1.2.3.4", nil, nil, yaps.ClassAnonymous, "ip:1.2.3.4"},
		{"ipv6 by its /64", "2001:db8:1:2:aaaa::1", nil, nil, yaps.ClassAnonymous, "ip:2001:db8:1:2::/64"},
		{"code on an anonymous list", "1.2.3.4", nil, &yaps.Actor{List: &yaps.List{}, Permission: &yaps.Permission{ID: "P0"}}, yaps.ClassAnonymous, "ip:1.2.3.4"},
		{"code on a rolled-up list: the account's budget at this address", "1.2.3.4", nil, viewer, yaps.ClassAuthenticated, "acct:A|ip:1.2.3.4"},
		{"another code there shares it", "1.2.3.4", nil, &yaps.Actor{List: rolled, Permission: &yaps.Permission{ID: "P2"}}, yaps.ClassAuthenticated, "acct:A|ip:1.2.3.4"},
		{"from another address, another budget", "2001:db8::7", nil, viewer, yaps.ClassAuthenticated, "acct:A|ip:2001:db8::/64"},
		{"account credential", "1.2.3.4", &yaps.Account{ID: "B"}, viewer, yaps.ClassAuthenticated, "acct:B"},
		// All callers with an empty ID would share the bucket "acct:".
		{"account without an ID is no credential", "1.2.3.4", &yaps.Account{}, nil, yaps.ClassAnonymous, "ip:1.2.3.4"},
		{"nor on a rolled-up list", "1.2.3.4", &yaps.Account{}, viewer, yaps.ClassAuthenticated, "acct:A|ip:1.2.3.4"},
	}
	for _, c := range cases {
		_, err := e.svc.Limit(e.ctx, yaps.LimitRead, c.ip, c.acct, c.actor)
		require.NoError(t, err, c.name)
		require.Equal(t, c.class, lim.class, c.name)
		require.Equal(t, c.key, lim.key, c.name)
	}
	lim.allow = false
	res, err := e.svc.Limit(e.ctx, yaps.LimitMutation, "1.2.3.4", nil, nil)
	requireCode(t, yaps.ERATELIMITED, err)
	require.False(t, res.Allowed)
	var ye *yaps.Error
	require.ErrorAs(t, err, &ye)
	require.Equal(t, 3*time.Second, ye.RetryAfter)

	e2 := newEnv(t)
	res, err = e2.svc.Limit(e.ctx, yaps.LimitRead, "", nil, nil)
	require.NoError(t, err)
	require.True(t, res.Allowed)
}

// TestAuthenticateOddRefs: refs the store could choke on are plain misses.
func TestAuthenticateOddRefs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, ref := range []string{"", "a\x00b", "../etc", "a b", string(make([]byte, 129))} {
		_, err := e.svc.Authenticate(e.ctx, ref, "")
		requireCode(t, yaps.ENOTFOUND, err)
	}
}

func TestAddressKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"1.2.3.4":              "1.2.3.4",
		"::ffff:10.0.0.1":      "10.0.0.1",
		"2001:db8::1":          "2001:db8::/64",
		"2001:db8:0:0:ffff::9": "2001:db8::/64",
		"2001:db8:0:1::9":      "2001:db8:0:1::/64",
		"fe80::1%eth0":         "fe80::/64",
		// Teredo (RFC 4380's example): the client's IPv4, inverted, at the end.
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": "192.0.2.45",
		"2001:0:4136:e378:8000:63bf:3fff:fdd3": "192.0.2.44",
		"2001:1::1":                            "2001:1::/64",
		"":                                     "",
		"not an address":                       "not an address",
	} {
		require.Equal(t, want, yaps.AddressKey(in), in)
	}
}
