package yaps_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

func auditLog(t *testing.T, e *env, owner *yaps.Actor) []*yaps.AuditEntry {
	t.Helper()
	var all []*yaps.AuditEntry
	cursor := ""
	for {
		p, err := e.svc.Audit(e.ctx, owner, cursor, 200)
		require.NoError(t, err)
		all = append(all, p.Entries...)
		if p.NextCursor == "" {
			return all
		}
		cursor = p.NextCursor
	}
}

type auditRow struct{ action, perm, yap, detail string }

func auditRows(t *testing.T, e *env, owner *yaps.Actor, after int) []auditRow {
	t.Helper()
	var out []auditRow
	for _, a := range auditLog(t, e, owner)[after:] {
		out = append(out, auditRow{a.Action, a.PermissionID, a.YapID, a.Detail})
	}
	return out
}

// Sync typing is recorded once per code, yap and AuditCoalesce window;
// creations and HTTP writes are recorded one by one.
func TestAuditCoalescesSyncTyping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	ed := e.actor(owner, yaps.RoleEditor)
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("a"), "", nil)
	require.NoError(t, err)
	base := len(auditLog(t, e, owner))

	po, pe := newPeer(t, e, owner), newPeer(t, e, ed)
	typeOn := func(p *peer, s string) {
		t.Helper()
		for _, r := range s {
			require.NoError(t, p.send(func(d *yjs.Doc) {
				tx := text(t, ymap(t, d, y.ID), "content")
				tx.Insert(tx.Len(), string(r), nil)
			}))
			po.sync()
			pe.sync()
		}
	}
	typeOn(po, "bcd")
	typeOn(pe, "ef")
	e.clock.Advance(9 * time.Second)
	typeOn(po, "g") // still within the owner's window
	e.clock.Advance(2 * time.Second)
	typeOn(po, "h") // a new window
	_, err = e.svc.UpdateYap(e.ctx, owner, y.ID, yaps.YapFields{Content: yaps.Set("x")}, "")
	require.NoError(t, err)
	_, err = e.svc.UpdateYap(e.ctx, owner, y.ID, yaps.YapFields{Content: yaps.Set("xy")}, "")
	require.NoError(t, err)
	// A sync creation is always recorded.
	require.NoError(t, po.send(func(d *yjs.Doc) {
		m := yjs.NewMap()
		d.GetMap("yaps").Set("client-yap", m)
		m.Set("id", "client-yap")
		m.Set("kind", "task")
		m.Set("status", "open")
		m.Set("content", yjs.NewText(""))
	}))

	const co = "sync, coalescing 10s"
	require.Equal(t, []auditRow{
		{"yap.update", owner.Permission.ID, y.ID, co},
		{"yap.update", ed.Permission.ID, y.ID, co},
		{"yap.update", owner.Permission.ID, y.ID, co},
		{"yap.update", owner.Permission.ID, y.ID, ""},
		{"yap.update", owner.Permission.ID, y.ID, ""},
		{"yap.create", owner.Permission.ID, "client-yap", "sync"},
	}, auditRows(t, e, owner, base))
	got, err := e.svc.GetYap(e.ctx, owner, y.ID)
	require.NoError(t, err)
	require.Equal(t, "xy", got.Content)
}

func TestAuditCoalesceDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *yaps.Config) { c.AuditCoalesce = -1 })
	owner := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("a"), "", nil)
	require.NoError(t, err)
	base := len(auditLog(t, e, owner))
	p := newPeer(t, e, owner)
	for range 3 {
		require.NoError(t, p.send(func(d *yjs.Doc) {
			tx := text(t, ymap(t, d, y.ID), "content")
			tx.Insert(0, "z", nil)
		}))
		p.sync()
	}
	row := auditRow{"yap.update", owner.Permission.ID, y.ID, "sync"}
	require.Equal(t, []auditRow{row, row, row}, auditRows(t, e, owner, base))
}

// Coalescing never holds an entry back: the first sync edit of a window is
// recorded with its own write, and the later ones are left out because
// that entry stands for them. So evicting the document (which forgets when
// each run was last recorded) loses no entry; the next edit after an
// eviction is recorded again. Every edit has an entry of its code and yap
// at most AuditCoalesce before it.
func TestAuditCoalesceSurvivesEviction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		mod   func(*yaps.Config)
		evict bool
	}{
		{"cached", func(*yaps.Config) {}, false},
		{"evicted after each write", func(c *yaps.Config) {
			c.DocCacheMemory = 1               // over budget once released...
			c.DocCacheGrace = -1               // ...at once...
			c.DocIdleTimeout = time.Nanosecond // ...and no longer watched by sync
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.mod)
			owner := e.list()
			y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("a"), "", nil)
			require.NoError(t, err)
			base := len(auditLog(t, e, owner))
			p := newPeer(t, e, owner)
			loads := yaps.DocLoads(e.svc)
			var edits []time.Time
			for _, gap := range []time.Duration{0, time.Second, 5 * time.Second, 5 * time.Second, time.Second} {
				e.clock.Advance(gap)
				require.NoError(t, p.send(func(d *yjs.Doc) {
					tx := text(t, ymap(t, d, y.ID), "content")
					tx.Insert(tx.Len(), "x", nil)
				}))
				p.sync()
				edits = append(edits, e.clock.Now())
			}
			if tc.evict {
				require.GreaterOrEqual(t, yaps.DocLoads(e.svc)-loads, int64(len(edits)), "the document was not evicted between edits")
			}
			entries := auditLog(t, e, owner)[base:]
			for _, at := range edits {
				covered := slices.ContainsFunc(entries, func(a *yaps.AuditEntry) bool {
					return a.Action == "yap.update" && a.YapID == y.ID && a.PermissionID == owner.Permission.ID &&
						!a.At.After(at) && at.Sub(a.At) < 10*time.Second
				})
				require.True(t, covered, "the edit at %s has no entry", at)
			}
			if !tc.evict {
				require.Len(t, entries, 2, "coalesced: the edits at 0-6 s, then at 11-12 s")
			}
		})
	}
}
