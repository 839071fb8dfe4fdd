package yaps_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// docAs returns a Y.Doc with the given client ID holding the list as the
// server has it.
func docAs(t *testing.T, e *env, a *yaps.Actor, client uint64) *yjs.Doc {
	t.Helper()
	snap, _, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(snap, nil))
	// Set after loading: a Y.Doc that receives structs under its own ID
	// picks a new one, as Yjs does.
	d.SetClientID(client)
	return d
}

// A Yjs client ID belongs to the first code that writes under it: another
// code may not add structs under it, so it cannot make the real client's
// offline edits look like duplicates.
func TestClientIDsAreBoundToCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("Milk"), "", nil)
	require.NoError(t, err)
	alice := e.actor(owner, yaps.RoleEditor)
	mallory := e.actor(owner, yaps.RoleEditor)
	agent := e.actor(owner, yaps.RoleAgent)
	const aliceID = 1001
	ref := owner.List.Ref
	version := func() int64 {
		t.Helper()
		l, err := e.store.List(e.ctx, ref)
		require.NoError(t, err)
		return l.DocVersion
	}
	content := func() string {
		t.Helper()
		got, err := e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		return got.Content
	}

	// Alice writes once (her ID is now hers), then edits offline.
	ad := docAs(t, e, alice, aliceID)
	first := clientUpdate(t, alice, ad, "alice", func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(4, " and", nil) })
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, alice, first.Update, first.Origin))
	offline := clientUpdate(t, alice, ad, "alice", func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(8, " bread", nil) })

	// Mallory, an editor, and an agent write under Alice's ID at her next
	// clocks: refused, nothing stored.
	for _, forger := range []*yaps.Actor{mallory, agent} {
		v := version()
		forged := clientUpdate(t, forger, docAs(t, e, forger, aliceID), "forger", func(d *yjs.Doc) {
			text(t, ymap(t, d, y.ID), "content").Insert(0, "X", nil)
		})
		requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, forger, forged.Update, forged.Origin))
		require.Equal(t, v, version())
		// In a batch too, and the other updates of the batch stand.
		other := clientUpdate(t, owner, docOf(t, e, owner), "owner", func(d *yjs.Doc) { ymap(t, d, y.ID).Set("status", "open") })
		errs := e.svc.ApplyUpdates(e.ctx, ref, []yaps.ClientUpdate{forged, other})
		requireCode(t, yaps.EFORBIDDEN, errs[0])
		require.NoError(t, errs[1])
	}
	// Alice's offline edit is not taken for a duplicate.
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, alice, offline.Update, offline.Origin))
	require.Equal(t, "Milk and bread", content())

	// Another process sharing the store knows the claim too.
	p2 := e.secondProcess()
	forged := clientUpdate(t, mallory, docAs(t, e, mallory, aliceID), "forger", func(d *yjs.Doc) {
		text(t, ymap(t, d, y.ID), "content").Insert(0, "X", nil)
	})
	requireCode(t, yaps.EFORBIDDEN, p2.ApplyUpdate(e.ctx, e.reauth(mallory), forged.Update, forged.Origin))

	// Alice's structs the server already has may come back in another
	// code's update (a step 2 holding what it got relayed), next to that
	// code's own edits under its own ID.
	md := docAs(t, e, mallory, 2002)
	held := md.StateVector() // alice's ID and the server's own
	text(t, ymap(t, md, y.ID), "content").Insert(0, "Oat ", nil)
	all, err := md.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, mallory, all, "mallory"))
	require.Equal(t, "Oat Milk and bread", content())
	// Structs the server had claim nothing for Mallory (the server's own
	// IDs among them).
	for id := range held {
		got, err := e.store.ClaimClients(e.ctx, ref, "probe", []uint64{id})
		require.NoError(t, err)
		require.NotEqual(t, mallory.Permission.ID, got[id], "client %d was claimed by a relayed struct", id)
	}
	got, err := e.store.ClaimClients(e.ctx, ref, "probe", []uint64{2002})
	require.NoError(t, err)
	require.Equal(t, mallory.Permission.ID, got[2002])

	// An owner code may write under any ID (a rotated owner code's
	// offline edits carry the old code's IDs).
	own := clientUpdate(t, owner, docAs(t, e, owner, aliceID), "owner", func(d *yjs.Doc) {
		text(t, ymap(t, d, y.ID), "content").Insert(0, "My ", nil)
	})
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, owner, own.Update, own.Origin))
	require.Equal(t, "My Oat Milk and bread", content())
	// And Alice still may.
	ad = docAs(t, e, alice, aliceID)
	again := clientUpdate(t, alice, ad, "alice", func(d *yjs.Doc) { ymap(t, d, y.ID).Set("status", "done") })
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, alice, again.Update, again.Origin))
}

// An update may write under at most 64 client IDs no code has claimed;
// past that it is refused and claims nothing.
func TestNewClientIDsPerUpdateAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	editor := e.actor(owner, yaps.RoleEditor)
	ref := owner.List.Ref
	many := func(n int, base uint64) []byte {
		t.Helper()
		var ups [][]byte
		for i := range n {
			d := yjs.NewDoc(yjs.WithClientID(base + uint64(i)))
			d.OnUpdate(func(u []byte, _ any) { ups = append(ups, u) })
			d.GetMap("custom").Set("k", float64(i))
		}
		u, err := yjs.MergeUpdates(ups)
		require.NoError(t, err)
		return u
	}
	requireCode(t, yaps.EINVALID, e.svc.ApplyUpdate(e.ctx, editor, many(65, 5000), "editor"))
	got, err := e.store.ClaimClients(e.ctx, ref, "probe", []uint64{5000, 5064})
	require.NoError(t, err)
	require.Equal(t, map[uint64]string{5000: "probe", 5064: "probe"}, got, "a refused update claimed IDs")
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, editor, many(64, 7000), "editor"))
	got, err = e.store.ClaimClients(e.ctx, ref, "probe", []uint64{7000, 7063})
	require.NoError(t, err)
	require.Equal(t, map[uint64]string{7000: editor.Permission.ID, 7063: editor.Permission.ID}, got)
}

// A code that may write claims the client IDs its connection announces in
// awareness, before it writes under them: another code that saw an ID
// there may not write under it first. Codes that may not write claim none.
func TestClaimClientIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("Milk"), "", nil)
	require.NoError(t, err)
	alice := e.actor(owner, yaps.RoleEditor)
	mallory := e.actor(owner, yaps.RoleEditor)
	viewer := e.actor(owner, yaps.RoleViewer)
	ref := owner.List.Ref
	probe := func(id uint64) string {
		t.Helper()
		got, err := e.store.ClaimClients(e.ctx, ref, "probe", []uint64{id})
		require.NoError(t, err)
		return got[id]
	}
	insert := func(a *yaps.Actor, client uint64, s string) error {
		t.Helper()
		u := clientUpdate(t, a, docAs(t, e, a, client), "x", func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(0, s, nil) })
		return e.svc.ApplyUpdate(e.ctx, a, u.Update, u.Origin)
	}

	// Alice announces 3003 and has not written yet: Mallory may not take it.
	require.NoError(t, e.svc.ClaimClientIDs(e.ctx, alice, []uint64{3003}))
	requireCode(t, yaps.EFORBIDDEN, insert(mallory, 3003, "X"))
	require.NoError(t, insert(alice, 3003, "Oat "))
	// A second announcement, by another code, changes nothing.
	require.NoError(t, e.svc.ClaimClientIDs(e.ctx, mallory, []uint64{3003}))
	require.Equal(t, alice.Permission.ID, probe(3003))

	// A viewer, and any code of an archived list, claim nothing.
	require.NoError(t, e.svc.ClaimClientIDs(e.ctx, viewer, []uint64{4004}))
	require.Equal(t, "probe", probe(4004))
	require.NoError(t, e.svc.ArchiveList(e.ctx, owner, ""))
	require.NoError(t, e.svc.ClaimClientIDs(e.ctx, e.reauth(alice), []uint64{4005}))
	require.Equal(t, "probe", probe(4005))
	_, err = e.svc.UpdateList(e.ctx, e.reauth(owner), yaps.ListPatch{ArchivedAt: yaps.Null[time.Time]()}, "")
	require.NoError(t, err)

	// At most 64 unclaimed IDs at once; more claims none.
	ids := make([]uint64, 65)
	for i := range ids {
		ids[i] = 6000 + uint64(i)
	}
	requireCode(t, yaps.EINVALID, e.svc.ClaimClientIDs(e.ctx, e.reauth(alice), ids))
	require.Equal(t, "probe", probe(6000))
	require.NoError(t, e.svc.ClaimClientIDs(e.ctx, e.reauth(alice), ids[1:]))
	require.Equal(t, alice.Permission.ID, probe(6064))
}
