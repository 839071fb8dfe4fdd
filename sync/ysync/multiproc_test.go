package ysync

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Two server processes on one Postgres database (YAPS_TEST_POSTGRES): a
// client on one sees what is written through the other, HTTP or sync,
// within a second; awareness, revocation and archive cross too.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	A, B := twoPostgresStacks(t)
	ref, owner := A.newList()
	viewer, viewerPerm := A.issue(ref, owner, "viewer")
	editor, _ := A.issue(ref, owner, "editor")

	a := newPeer(t, A.dial(ref, owner))
	b := newPeer(t, B.dial(ref, editor))
	bv := B.dial(ref, viewer)

	within := func(what string, d time.Duration, p *peer, cond func() bool) {
		t.Helper()
		start := time.Now()
		p.until(cond)
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
		require.Less(t, time.Since(start), d, what)
	}

	// HTTP on A -> sync client on B.
	y := A.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
	id := y["id"].(string)
	within("HTTP on A to B", time.Second, b, func() bool { return yapField(b.doc, id, "content") == "milk" })
	a.until(func() bool { return yapField(a.doc, id, "content") == "milk" })

	// Sync on A -> B, and sync on B -> A and HTTP on B.
	a.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get(id)
		f, _ := v.(*yjs.Map).Get("content")
		f.(*yjs.Text).Insert(0, "oat ", nil)
	})
	within("sync on A to B", time.Second, b, func() bool { return yapField(b.doc, id, "content") == "oat milk" })
	b.setYapField(id, "status", "done")
	within("sync on B to A", time.Second, a, func() bool { return yapField(a.doc, id, "status") == "done" })
	require.Equal(t, "done", B.yaps(ref, owner)[id]["status"])

	// Awareness from A reaches B.
	sendAwareness(a.c, AwarenessEntry{ClientID: 99, Clock: 1, State: `{"u":"a"}`})
	start := time.Now()
	for {
		m := bv.nextOf(MsgAwareness)
		if awarenessMap(t, m)[99] == `{"u":"a"}` {
			break
		}
	}
	require.Less(t, time.Since(start), time.Second)

	// Revocation on A closes the viewer's socket on B.
	A.do("DELETE", "/lists/"+ref+"/permissions/"+viewerPerm, owner, nil, 204)
	require.Equal(t, CloseRevoked, bv.closed())

	// Archive on A makes B's editor read-only.
	A.do("DELETE", "/lists/"+ref, owner, nil, 204)
	B.waitReadOnly(ref, 3*time.Second)
	b.edit(func(d *yjs.Doc) {
		v, _ := d.GetMap("yaps").Get(id)
		v.(*yjs.Map).Set("status", "open")
	})
	require.Equal(t, "permission denied", b.c.nextOf(MsgAuth).Reason)
}

// A process whose LISTEN connection dropped misses the notices sent
// meanwhile, and the others stop waiting for it. A revocation made then
// must still hold on it (found in review): its auth cache is not trusted
// until it listens again (a read with the revoked code is 401 at once),
// and once it does, every sync connection's code is checked again, even
// one issued after the room's last permission poll.
func TestRevocationWhileListenerDown(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	A := startStackDSN(t, Config{}, dsn, "127.0.0.1:0")
	B := startStackDSN(t, Config{}, dsn, "127.0.0.1:0")
	ref, owner := A.newList()
	viewer, viewerPerm := A.issue(ref, owner, "viewer")
	B.do("GET", "/lists/"+ref, viewer, nil, 200) // now in B's auth cache
	bv := B.dial(ref, viewer)
	// Connected (its fresh code check runs right after, long before the
	// revocation below); B's room has not polled permissions yet.
	require.Eventually(t, func() bool { return B.sync.room(ref) != nil && len(*B.sync.room(ref).snapshot.Load()) == 1 }, 2*time.Second, 5*time.Millisecond)

	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'yaps-pgnotify-'||$1||'-%'`, B.notifier.ID())
	require.NoError(t, err)
	select {
	case <-B.listenerLost:
	case <-time.After(5 * time.Second):
		t.Fatal("B did not notice its LISTEN connection was lost")
	}

	A.do("DELETE", "/lists/"+ref+"/permissions/"+viewerPerm, owner, nil, 204)
	B.do("GET", "/lists/"+ref, viewer, nil, 401)
	require.Equal(t, CloseRevoked, bv.closed()) // within 5 s, before B's first permission poll
}
