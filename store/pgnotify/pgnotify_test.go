package pgnotify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/pgnotify"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// open returns a Notifier on dsn, closed when t ends.
func open(t *testing.T, cfg pgnotify.Config) *pgnotify.Notifier {
	t.Helper()
	n, err := pgnotify.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// listen collects the notices n delivers until t ends.
func listen(t *testing.T, n *pgnotify.Notifier) <-chan yaps.Notice {
	t.Helper()
	ch := make(chan yaps.Notice, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Listen(ctx, func(x yaps.Notice) { ch <- x }) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	time.Sleep(20 * time.Millisecond) // let Listen register
	return ch
}

// pair returns two Notifiers on one fresh schema, and what the second
// hears, for tests that publish from one to the other.
func pair(t *testing.T) (dsn string, pub, sub *pgnotify.Notifier, in <-chan yaps.Notice) {
	t.Helper()
	dsn = storetest.PostgresDSN(t)
	pub, sub = open(t, pgnotify.Config{DSN: dsn}), open(t, pgnotify.Config{DSN: dsn})
	waitPeers(t, pub, sub)
	return dsn, pub, sub, listen(t, sub)
}

// waitPeers waits until each of ns knows another Notifier listens, so it
// publishes (see Presence: the first one opened learns of the second from
// its hello).
func waitPeers(t *testing.T, ns ...*pgnotify.Notifier) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range ns {
			if !pgnotify.Peers(n) {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
}

// rawListen LISTENs on channel with a plain connection, which no Notifier
// counts as a peer.
func rawListen(t *testing.T, dsn, channel string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	raw, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close(context.Background()) })
	_, err = raw.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	return raw
}

// rawPayload is a notification as it travels (both forms).
type rawPayload struct {
	S string
	H int
	R string
	B []struct{ R string }
}

// rawNext returns the next notification raw hears, decoded.
func rawNext(t *testing.T, raw *pgx.Conn) rawPayload {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	note, err := raw.WaitForNotification(ctx)
	require.NoError(t, err, "no notification within 2s")
	var p rawPayload
	require.NoError(t, json.Unmarshal([]byte(note.Payload), &p), note.Payload)
	return p
}

// rawQuiet checks that raw hears nothing for a moment.
func rawQuiet(t *testing.T, raw *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	note, err := raw.WaitForNotification(ctx)
	require.Error(t, err, "unexpected notification %+v", note)
}

// A Notifier alone on its channel sends nothing (a plain LISTEN does not
// count); a second one sees the first at once, and the first starts
// publishing on the second's hello (not at its next look, an hour away),
// sending first what it skipped within ReplayWindow. A Notifier whose only
// peer goes away stops again at its next look.
func TestPresence(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()
	a := open(t, pgnotify.Config{DSN: dsn, PeerCheckInterval: time.Hour})
	require.False(t, pgnotify.Peers(a), "alone when it opened")
	raw := rawListen(t, dsn, a.Channel())

	require.NoError(t, a.Publish(ctx, yaps.Notice{Kind: yaps.NoticeDoc, ListRef: "stale", Seq: 1}))
	time.Sleep(pgnotify.ReplayWindow + 100*time.Millisecond)
	require.NoError(t, a.Publish(ctx, yaps.Notice{Kind: yaps.NoticeDoc, ListRef: "early", Seq: 2}))
	require.NoError(t, a.PublishBatch(ctx, []yaps.Notice{
		{Kind: yaps.NoticeList, ListRef: "l1"},
		{Kind: yaps.NoticeAwareness, ListRef: "l1", Payload: []byte{1}}, // not kept
		{Kind: yaps.NoticeList, ListRef: "l2"},
	}))
	require.EqualValues(t, 5, pgnotify.Unsent(a))
	rawQuiet(t, raw)

	b := open(t, pgnotify.Config{DSN: dsn})
	require.True(t, pgnotify.Peers(b), "sees a's listening connection when it opens")
	require.Equal(t, rawPayload{S: b.ID(), H: 1}, rawNext(t, raw))
	replay := rawNext(t, raw)
	require.Equal(t, a.ID(), replay.S)
	var refs []string
	for _, x := range replay.B {
		refs = append(refs, x.R)
	}
	require.Equal(t, []string{"early", "l1", "l2"}, refs, "skipped within ReplayWindow, awareness left out")
	require.True(t, pgnotify.Peers(a))
	require.NoError(t, a.Publish(ctx, yaps.Notice{Kind: yaps.NoticeList, ListRef: "now"}))
	require.Equal(t, rawPayload{S: a.ID(), R: "now"}, rawNext(t, raw))
	require.EqualValues(t, 5, pgnotify.Unsent(a))

	require.NoError(t, b.Close())
	c := open(t, pgnotify.Config{DSN: dsn, PeerCheckInterval: 50 * time.Millisecond})
	require.True(t, pgnotify.Peers(c), "sees a")
	require.Equal(t, rawPayload{S: c.ID(), H: 1}, rawNext(t, raw))
	require.NoError(t, a.Close())
	require.Eventually(t, func() bool { return !pgnotify.Peers(c) }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Publish(ctx, yaps.Notice{Kind: yaps.NoticeList, ListRef: "after"}))
	require.EqualValues(t, 1, pgnotify.Unsent(c))
	rawQuiet(t, raw)
}

// While a Notifier's own listening connection is gone, pg_stat_activity
// cannot tell it who listens, and it publishes.
func TestPresenceWhileReconnecting(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()
	a := open(t, pgnotify.Config{DSN: dsn, PeerCheckInterval: time.Hour})
	require.False(t, pgnotify.Peers(a))
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1`,
		"yaps-pgnotify-"+a.ID()+"-%")
	require.NoError(t, err)
	// The first reconnection waits 100 ms.
	require.Eventually(t, func() bool {
		pgnotify.CheckPeers(a)
		return pgnotify.Peers(a)
	}, 5*time.Second, 5*time.Millisecond)
	// Listening again, and still alone.
	require.Eventually(t, func() bool {
		pgnotify.CheckPeers(a)
		return !pgnotify.Peers(a)
	}, 5*time.Second, 20*time.Millisecond)
}

func recv(t *testing.T, ch <-chan yaps.Notice) yaps.Notice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(2 * time.Second):
		t.Fatal("no notice within 2s")
		return yaps.Notice{}
	}
}

func quiet(t *testing.T, ch <-chan yaps.Notice) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("unexpected notice %+v", n)
	case <-time.After(150 * time.Millisecond):
	}
}

func TestRoundTripAndOwnNoticesDropped(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()
	n1, n2 := open(t, pgnotify.Config{DSN: dsn}), open(t, pgnotify.Config{DSN: dsn})
	waitPeers(t, n1, n2)
	require.Equal(t, n1.Channel(), n2.Channel())
	require.NotEqual(t, n1.ID(), n2.ID())
	in1, in2 := listen(t, n1), listen(t, n2)

	sent := []yaps.Notice{
		{Kind: yaps.NoticeDoc, ListRef: "AAAAAAAAAAAAAAAAAAAAAA", Seq: 1 << 40},
		{Kind: yaps.NoticePermission, ListRef: "r", PermissionID: "0190a5f0-0000-7000-8000-000000000000"},
		{Kind: yaps.NoticeList, ListRef: "r"},
		{Kind: yaps.NoticeAwareness, ListRef: "r", Payload: []byte{1, 0xff, 0, 0, 2, '{', '}'}},
	}
	for _, s := range sent {
		require.NoError(t, n1.Publish(ctx, s))
	}
	for _, s := range sent {
		got := recv(t, in2)
		s.Sender = n1.ID()
		require.Equal(t, s, got)
	}
	// NoticeResync and NoticeLost are local: never published.
	require.NoError(t, n1.Publish(ctx, yaps.Notice{Kind: yaps.NoticeResync}))
	require.NoError(t, n1.Publish(ctx, yaps.Notice{Kind: yaps.NoticeLost}))
	quiet(t, in2)
	// n1 heard none of its own notices, but hears n2's.
	require.NoError(t, n2.Publish(ctx, yaps.Notice{Kind: yaps.NoticeList, ListRef: "from2"}))
	got := recv(t, in1)
	require.Equal(t, "from2", got.ListRef)
	require.Equal(t, n2.ID(), got.Sender)
	quiet(t, in1)

	// Garbage on the channel is ignored.
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT pg_notify($1, 'not json')", n1.Channel())
	require.NoError(t, err)
	quiet(t, in1)
}

func TestChannelPerSchema(t *testing.T) {
	t.Parallel()
	dsnA, dsnB := storetest.PostgresDSN(t), storetest.PostgresDSN(t)
	require.NotEqual(t, pgnotify.ChannelFor(dsnA), pgnotify.ChannelFor(dsnB))
	require.Equal(t, pgnotify.DefaultChannel, pgnotify.ChannelFor("postgres://u@h/db"))
	require.Regexp(t, `^yaps_notices_[0-9a-f]{12}$`, pgnotify.ChannelFor("host=h dbname=db search_path=s1"))
	a, b := open(t, pgnotify.Config{DSN: dsnA}), open(t, pgnotify.Config{DSN: dsnB})
	inB := listen(t, b)
	require.NoError(t, a.Publish(context.Background(), yaps.Notice{Kind: yaps.NoticeList, ListRef: "x"}))
	quiet(t, inB)

	_, err := pgnotify.Open(context.Background(), pgnotify.Config{DSN: dsnA, Channel: "Bad-Name"})
	require.Error(t, err)
}

func TestReconnectAfterTermination(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()
	pub := open(t, pgnotify.Config{DSN: dsn})
	sub := open(t, pgnotify.Config{DSN: dsn, MaxBackoff: 200 * time.Millisecond, PingInterval: 300 * time.Millisecond})
	waitPeers(t, pub, sub)
	in := listen(t, sub)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var killed int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE $1`,
		"yaps-pgnotify-"+sub.ID()+"-%").Scan(&killed)
	require.NoError(t, err)
	require.Equal(t, 1, killed)

	got := recv(t, in)
	require.Equal(t, yaps.NoticeLost, got.Kind, "the loss is announced at once so the service stops trusting its cache")
	got = recv(t, in)
	require.Equal(t, yaps.NoticeResync, got.Kind, "a reconnect is announced so the service resyncs")
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeDoc, ListRef: "after", Seq: 7}))
	got = recv(t, in)
	require.Equal(t, "after", got.ListRef)

	// Idle longer than PingInterval: the ping keeps the connection and
	// nothing spurious is delivered.
	time.Sleep(700 * time.Millisecond)
	quiet(t, in)
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeDoc, ListRef: "later", Seq: 8}))
	require.Equal(t, "later", recv(t, in).ListRef)
}

func TestOversizedPayloads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pub, _, in := pair(t)
	ref := strings.Repeat("R", 22)

	largest := bytes.Repeat([]byte{0xa5}, pgnotify.MaxAwarenessPayload)
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: ref, Payload: largest}))
	require.Equal(t, largest, recv(t, in).Payload)

	// One byte more goes in parts (parts_test.go); over
	// MaxAwarenessMessageBytes it is dropped quietly (best effort).
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: ref, Payload: append(largest, 0)}))
	require.Equal(t, append(largest, 0), recv(t, in).Payload)
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: ref,
		Payload: make([]byte, pgnotify.DefaultMaxAwarenessMessageBytes+1)}))
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeList, ListRef: "marker"}))
	require.Equal(t, "marker", recv(t, in).ListRef, "the oversized awareness update was dropped")

	// Any other notice over the NOTIFY limit is an error.
	err := pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeDoc, ListRef: strings.Repeat("r", 8000), Seq: 1})
	require.ErrorContains(t, err, "NOTIFY limit")
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	storetest.PostgresDSN(t) // only with Postgres configured, like the others
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := pgnotify.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2&sslmode=disable")
	require.Error(t, err)
}

func TestClosed(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	n, err := pgnotify.New(context.Background(), dsn)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- n.Listen(context.Background(), func(yaps.Notice) {}) }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, n.Close())
	require.NoError(t, n.Close())
	require.ErrorIs(t, <-done, pgnotify.ErrClosed)
	require.ErrorIs(t, n.Publish(context.Background(), yaps.Notice{Kind: yaps.NoticeList}), pgnotify.ErrClosed)
}

// PublishBatch sends every sendable notice, in order (an awareness update
// too large for one payload in parts, at its place), and reports the ones
// it could not send.
func TestPublishBatch(t *testing.T) {
	t.Parallel()
	_, n1, _, in2 := pair(t)
	batch := []yaps.Notice{
		{Kind: yaps.NoticeDoc, ListRef: "a", Seq: 7},
		{Kind: yaps.NoticeResync},                                          // local only
		{Kind: yaps.NoticeLost},                                            // local only
		{Kind: yaps.NoticeDoc, ListRef: strings.Repeat("x", 9000), Seq: 1}, // over the limit
		{Kind: yaps.NoticeAwareness, ListRef: "a", Payload: bytes.Repeat([]byte{7}, 2*pgnotify.MaxAwarenessPayload)}, // in parts
		{Kind: yaps.NoticeList, ListRef: "b"},
		{Kind: yaps.NoticeDoc, ListRef: "a", Seq: 7}, // a duplicate is still delivered once
		{Kind: yaps.NoticeAwareness, ListRef: "a", Payload: bytes.Repeat([]byte{7}, 2*pgnotify.MaxAwarenessPayload)},  // so is this one
		{Kind: yaps.NoticeAwareness, ListRef: "a", Payload: make([]byte, pgnotify.DefaultMaxAwarenessMessageBytes+1)}, // dropped
	}
	err := n1.PublishBatch(context.Background(), batch)
	require.ErrorContains(t, err, "exceeds the NOTIFY limit")
	got := recv(t, in2)
	require.Equal(t, yaps.Notice{Kind: yaps.NoticeDoc, ListRef: "a", Seq: 7, Sender: n1.ID()}, got)
	got = recv(t, in2)
	require.Equal(t, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: "a", Payload: batch[4].Payload, Sender: n1.ID()}, got)
	got = recv(t, in2)
	require.Equal(t, yaps.Notice{Kind: yaps.NoticeList, ListRef: "b", Sender: n1.ID()}, got)
	quiet(t, in2)

	require.NoError(t, n1.PublishBatch(context.Background(), nil))
	require.NoError(t, n1.Close())
	require.ErrorIs(t, n1.PublishBatch(context.Background(), batch[:1]), pgnotify.ErrClosed)
}

// PublishBatch packs consecutive notices into payloads within Postgres's
// limit: far fewer notifications than notices, every one of them under the
// limit, and the listener gets every notice in order, identical ones once.
func TestPublishBatchPacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, n1, _, in2 := pair(t)
	raw := rawListen(t, dsn, n1.Channel())

	var batch, want []yaps.Notice
	for i := range 400 {
		n := yaps.Notice{Kind: yaps.NoticeDoc, ListRef: fmt.Sprintf("list-%03d", i), Seq: int64(i + 1)}
		switch i {
		case 100: // the largest awareness update, alone in its payload or nearly
			n = yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: "aw", Payload: bytes.Repeat([]byte{0x5a}, pgnotify.MaxAwarenessPayload)}
		case 200:
			n = yaps.Notice{Kind: yaps.NoticePermission, ListRef: "p", PermissionID: "perm-1"}
		}
		batch = append(batch, n)
		n.Sender = n1.ID()
		want = append(want, n)
	}
	batch = append(batch, batch[5], yaps.Notice{Kind: yaps.NoticeResync}) // a duplicate and a local one
	require.NoError(t, n1.PublishBatch(ctx, batch))

	for i, w := range want {
		require.Equal(t, w, recv(t, in2), "notice %d", i)
	}
	quiet(t, in2)

	count, total := 0, 0
	for {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		note, err := raw.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		count++
		total += len(note.Payload)
		require.Less(t, len(note.Payload), 8000)
	}
	require.Positive(t, count)
	require.LessOrEqual(t, count, total/7999+2, "payloads are filled up to the limit")
	require.Less(t, count, len(want)/20, "%d notifications for %d notices", count, len(want))
}

// PublishConfirmed returns only once every other Notifier handled the
// notice (its Listen callback returned); alone it returns at once; a
// listener that looks like a Notifier but never acks makes it wait for its
// context and report ErrUnconfirmed.
func TestPublishConfirmed(t *testing.T) {
	// Not parallel: its last part opens a connection named like a Notifier
	// from before presence, which carries no channel tag, so every
	// Notifier on the database counts it as a possible peer. Tests running
	// meanwhile that expect to be alone (TestPresence) would see it (CI
	// did, once). Top-level parallel tests start only after this one ended.
	ctx := context.Background()
	dsn := storetest.PostgresDSN(t)
	pub := open(t, pgnotify.Config{DSN: dsn})
	notice := yaps.Notice{Kind: yaps.NoticePermission, ListRef: "L", PermissionID: "P"}

	start := time.Now()
	require.NoError(t, pub.PublishConfirmed(ctx, notice), "alone: nobody to wait for")
	require.Less(t, time.Since(start), time.Second)

	// Two peers; one takes its time handling the notice.
	slow, fast := open(t, pgnotify.Config{DSN: dsn}), open(t, pgnotify.Config{DSN: dsn})
	var handled [2]atomic.Int32
	for i, n := range []*pgnotify.Notifier{slow, fast} {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- n.Listen(lctx, func(x yaps.Notice) {
				if x.Kind != yaps.NoticePermission || x.PermissionID != "P" {
					return
				}
				if i == 0 {
					time.Sleep(150 * time.Millisecond)
				}
				handled[i].Add(1)
			})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	waitPeers(t, pub, slow, fast)
	time.Sleep(20 * time.Millisecond) // let Listen register
	for range 3 {
		before := [2]int32{handled[0].Load(), handled[1].Load()}
		require.NoError(t, pub.PublishConfirmed(ctx, notice))
		require.Equal(t, before[0]+1, handled[0].Load(), "the slow peer handled it before the call returned")
		require.Equal(t, before[1]+1, handled[1].Load(), "the fast peer handled it before the call returned")
	}

	// A listening connection named like a Notifier's that never acks.
	cc, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	cc.RuntimeParams["application_name"] = "yaps-pgnotify-0123456789abcdef-" + pgnotify.ShortHash(pub.Channel())
	mute, err := pgx.ConnectConfig(ctx, cc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mute.Close(context.Background()) })
	_, err = mute.Exec(ctx, "LISTEN "+pgx.Identifier{pub.Channel()}.Sanitize())
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	before := handled[1].Load()
	err = pub.PublishConfirmed(wctx, notice)
	require.ErrorIs(t, err, pgnotify.ErrUnconfirmed)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, before+1, handled[1].Load(), "the others still heard it")
	require.NoError(t, mute.Close(ctx))

	// A Notifier from before presence (no channel tag in its name) may
	// listen on this channel and cannot ack: unconfirmed at once.
	cc.RuntimeParams["application_name"] = "yaps-pgnotify-0123456789abcdef"
	old, err := pgx.ConnectConfig(ctx, cc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = old.Close(context.Background()) })
	_, err = old.Exec(ctx, "LISTEN "+pgx.Identifier{pub.Channel()}.Sanitize())
	require.NoError(t, err)
	before = handled[1].Load()
	err = pub.PublishConfirmed(ctx, notice)
	require.ErrorIs(t, err, pgnotify.ErrUnconfirmed)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "not waited for: it cannot ack")
	require.Eventually(t, func() bool { return handled[1].Load() == before+1 }, 2*time.Second, 5*time.Millisecond, "the others still heard it")
}
