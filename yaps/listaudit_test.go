package yaps_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// A PATCH of the list that archives or unarchives it and also changes its
// title or kind is audited as both changes (R5: every mutation is
// recorded), in the order two separate requests would need: a change made
// while the list is writable, so list.update before list.archive and after
// list.unarchive. Before, it was list.archive (or list.unarchive) alone.
func TestListPatchAudit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	title := yaps.Set("Renamed")
	for _, tc := range []struct {
		name     string
		archived bool
		patch    yaps.ListPatch
		want     []string
	}{
		{"title", false, yaps.ListPatch{Title: title}, []string{"list.update"}},
		{"title and kind", false, yaps.ListPatch{Title: title, Kind: yaps.Set(yaps.KindNote)}, []string{"list.update"}},
		{"archive", false, yaps.ListPatch{ArchivedAt: yaps.Set(now)}, []string{"list.archive"}},
		{"archive and title", false, yaps.ListPatch{Title: title, ArchivedAt: yaps.Set(now)}, []string{"list.update", "list.archive"}},
		{"archive and kind", false, yaps.ListPatch{Kind: yaps.Set(yaps.KindNote), ArchivedAt: yaps.Set(now)}, []string{"list.update", "list.archive"}},
		{"unarchive", true, yaps.ListPatch{ArchivedAt: yaps.Null[time.Time]()}, []string{"list.unarchive"}},
		{"unarchive and title", true, yaps.ListPatch{Title: title, ArchivedAt: yaps.Null[time.Time]()}, []string{"list.unarchive", "list.update"}},
		{"unarchive, title sent back", true, yaps.ListPatch{Title: yaps.Set("Groceries"), ArchivedAt: yaps.Null[time.Time]()}, []string{"list.unarchive"}},
		{"nothing", false, yaps.ListPatch{Title: yaps.Set("Groceries")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			owner := e.list()
			ed := e.actor(owner, yaps.RoleEditor)
			if tc.archived {
				require.NoError(t, e.svc.ArchiveList(e.ctx, owner, ""))
				ed = e.reauth(ed)
			}
			base := len(auditLog(t, e, owner))
			_, err := e.svc.UpdateList(e.ctx, ed, tc.patch, "")
			require.NoError(t, err)
			rows := auditRows(t, e, owner, base)
			var got []string
			for _, r := range rows {
				require.Equal(t, ed.Permission.ID, r.perm)
				require.Empty(t, r.yap)
				got = append(got, r.action)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// Sync writes are audited as HTTP's: an update that archives the list and
// renames it is list.update and list.archive, and a yap that arrives
// already soft-deleted is yap.create and yap.delete, as creating it and
// deleting it over HTTP would be. (Over sync an archived list takes no
// write, so there is no unarchive to combine.) The yap-mutation budget is
// charged for each, as for the HTTP requests.
func TestSyncAuditCombined(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, e *env, d *yjs.Doc)
		want []string
	}{
		{"title", func(t *testing.T, e *env, d *yjs.Doc) {
			d.GetMap("list").Set("title", "Renamed")
		}, []string{"list.update"}},
		{"archive and title", func(t *testing.T, e *env, d *yjs.Doc) {
			lm := d.GetMap("list")
			lm.Set("title", "Renamed")
			lm.Set("archivedAt", yaps.FormatTime(e.clock.Now()))
		}, []string{"list.update", "list.archive"}},
		{"created deleted", func(t *testing.T, e *env, d *yjs.Doc) {
			m := yjs.NewMap()
			d.GetMap("yaps").Set("gone", m)
			m.Set("id", "gone")
			m.Set("kind", "task")
			m.Set("status", "open")
			m.Set("content", yjs.NewText("x"))
			m.Set("deletedAt", yaps.FormatTime(e.clock.Now()))
		}, []string{"yap.create gone", "yap.delete gone"}},
		{"created live", func(t *testing.T, e *env, d *yjs.Doc) {
			m := yjs.NewMap()
			d.GetMap("yaps").Set("live", m)
			m.Set("id", "live")
			m.Set("kind", "task")
			m.Set("status", "open")
			m.Set("content", yjs.NewText("x"))
		}, []string{"yap.create live"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := &budgetLimiter{limit: 100, used: map[string]int{}}
			e := newEnv(t, func(c *yaps.Config) { c.Limiter = lim })
			owner := e.list()
			ed := e.actor(owner, yaps.RoleEditor)
			ed.ClientIP = "192.0.2.7"
			p := newPeer(t, e, ed)
			base := len(auditLog(t, e, owner))
			require.NoError(t, p.send(func(d *yjs.Doc) { tc.edit(t, e, d) }))
			var got []string
			yapEntries := 0
			for _, r := range auditRows(t, e, owner, base) {
				require.Equal(t, ed.Permission.ID, r.perm)
				require.Equal(t, "sync", r.detail)
				s := r.action
				if r.yap != "" {
					s += " " + r.yap
					yapEntries++
				}
				got = append(got, s)
			}
			require.Equal(t, tc.want, got)
			// The sync budget charges what the log records (R8).
			takes, _ := lim.counts()
			require.Equal(t, yapEntries, takes)
		})
	}
}
