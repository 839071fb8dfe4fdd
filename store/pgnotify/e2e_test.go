package pgnotify_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/pgnotify"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

type proc struct {
	svc    *yaps.Service
	notify *pgnotify.Notifier
	events chan yaps.Event
}

// newProc is one `yaps serve` process on dsn: its own store pool, its own
// Notifier and a service polling only once a minute.
func newProc(t *testing.T, dsn string) *proc {
	t.Helper()
	ctx := context.Background()
	st, err := bunstore.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	n, err := pgnotify.Open(ctx, pgnotify.Config{DSN: dsn, MaxBackoff: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	s, err := yaps.NewService(yaps.Config{Store: st, Notifier: n, PollInterval: time.Minute, PurgeInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() }) // before the notifier and the store (LIFO)
	p := &proc{svc: s, notify: n, events: make(chan yaps.Event, 100)}
	t.Cleanup(s.Subscribe(func(ev yaps.Event) { p.events <- ev }))
	return p
}

// twoProcs is two processes on one fresh schema (dsn), their services
// listening.
func twoProcs(t *testing.T) (dsn string, A, B *proc) {
	t.Helper()
	dsn = storetest.PostgresDSN(t)
	A, B = newProc(t, dsn), newProc(t, dsn)
	time.Sleep(50 * time.Millisecond) // the services' Listen calls register
	return dsn, A, B
}

func (p *proc) next(t *testing.T, kind yaps.EventKind, within time.Duration) yaps.Event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-p.events:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no event of kind %d within %v", kind, within)
		}
	}
}

// TestTwoProcessesOnePostgres: writes through process A (HTTP-style and
// sync) reach a sync room of process B within a second through
// LISTEN/NOTIFY, with polling at one minute; so do revocations and
// awareness, and a killed listening connection loses nothing.
func TestTwoProcessesOnePostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, A, B := twoProcs(t)

	cl, err := A.svc.CreateList(ctx, yaps.CreateListInput{Title: yaps.Set("shared")})
	require.NoError(t, err)
	ref := cl.List.Ref
	a, err := A.svc.Authenticate(ctx, ref, cl.OwnerCode)
	require.NoError(t, err)
	// B has a sync room on the list.
	unpin := B.svc.Pin(ref)
	defer unpin()
	_, err = B.svc.StateVector(ctx, ref)
	require.NoError(t, err)

	start := time.Now()
	y, _, err := A.svc.CreateYap(ctx, a, yaps.KindTask, yaps.YapFields{Content: yaps.Set("milk"), Status: yaps.Set(yaps.StatusOpen)}, "", nil)
	require.NoError(t, err)
	ev := B.next(t, yaps.EventDocUpdate, time.Second)
	t.Logf("HTTP write on A seen on B after %v", time.Since(start))
	require.Equal(t, ref, ev.ListRef)
	require.EqualValues(t, 2, ev.Seq)

	// A sync update through A.
	d := yjs.NewDoc()
	snap, _, err := A.svc.Snapshot(ctx, a, nil)
	require.NoError(t, err)
	require.NoError(t, d.ApplyUpdate(snap, nil))
	var upd []byte
	un := d.OnUpdate(func(u []byte, _ any) { upd = u })
	ym, _ := d.GetMap("yaps").Get(y.ID)
	ct, _ := ym.(*yjs.Map).Get("content")
	ct.(*yjs.Text).Insert(4, " and eggs", nil)
	un()
	require.NoError(t, A.svc.ApplyUpdate(ctx, a, upd, "conn"))
	ev = B.next(t, yaps.EventDocUpdate, time.Second)
	require.EqualValues(t, 3, ev.Seq)
	full, err := B.svc.EncodeState(ctx, ref, nil)
	require.NoError(t, err)
	c := yjs.NewDoc()
	require.NoError(t, c.ApplyUpdate(full, nil))
	require.Equal(t, d.ToJSON(), c.ToJSON())

	// Awareness crosses, revocation closes B's sockets.
	require.NoError(t, A.svc.PublishAwareness(ctx, ref, []byte{1, 7, 1, 2, '{', '}'}))
	ev = B.next(t, yaps.EventAwareness, time.Second)
	require.Equal(t, []byte{1, 7, 1, 2, '{', '}'}, ev.Update)
	iss, err := A.svc.IssuePermission(ctx, a, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	require.NoError(t, A.svc.RevokePermission(ctx, a, iss.Permission.ID))
	ev = B.next(t, yaps.EventCodeRevoked, time.Second)
	require.Equal(t, iss.Permission.ID, ev.PermissionID)

	// Kill B's listening connection and write at once: the reconnect's
	// resync finds the write the lost notice would have announced.
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1`,
		"yaps-pgnotify-"+B.notify.ID()+"-%")
	require.NoError(t, err)
	_, _, err = A.svc.CreateYap(ctx, a, yaps.KindTask, yaps.YapFields{Content: yaps.Set("bread"), Status: yaps.Set(yaps.StatusOpen)}, "", nil)
	require.NoError(t, err)
	ev = B.next(t, yaps.EventDocUpdate, 3*time.Second)
	require.EqualValues(t, 4, ev.Seq)
}

// TestRevocationIsAtOnceOnEveryProcess (RULINGS R4: revoking a code, or
// rotating the owner code, takes effect at once for HTTP): once the revoke
// on A returns, B, which has the code in its auth cache, refuses it.
func TestRevocationIsAtOnceOnEveryProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, A, B := twoProcs(t)
	cl, err := A.svc.CreateList(ctx, yaps.CreateListInput{Title: yaps.Set("shared")})
	require.NoError(t, err)
	ref, owner := cl.List.Ref, cl.OwnerCode
	a, err := A.svc.Authenticate(ctx, ref, owner)
	require.NoError(t, err)
	for i := range 20 {
		iss, err := A.svc.IssuePermission(ctx, a, yaps.RoleViewer, "v", nil)
		require.NoError(t, err)
		_, err = B.svc.Authenticate(ctx, ref, iss.Code) // now in B's cache
		require.NoError(t, err)
		require.NoError(t, A.svc.RevokePermission(ctx, a, iss.Permission.ID))
		_, err = B.svc.Authenticate(ctx, ref, iss.Code)
		require.Equal(t, yaps.EUNAUTHORIZED, yaps.ErrorCode(err), "round %d: B still accepts the revoked code", i)

		if i%5 == 0 { // the owner code too, by rotation
			_, err = B.svc.Authenticate(ctx, ref, owner)
			require.NoError(t, err)
			owner, err = A.svc.RotateOwner(ctx, a)
			require.NoError(t, err)
			_, err = B.svc.Authenticate(ctx, ref, cl.OwnerCode)
			require.Equal(t, yaps.EUNAUTHORIZED, yaps.ErrorCode(err), "round %d: B still accepts the rotated owner code", i)
			a, err = A.svc.Authenticate(ctx, ref, owner)
			require.NoError(t, err)
			cl.OwnerCode = owner
		}
	}
}
