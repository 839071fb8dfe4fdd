package pgnotify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// wirePart is a part as it travels, with what must never be in one.
type wirePart struct {
	S string
	M uint64
	I int
	N int
	T yaps.NoticeKind
	R string
	A []byte
	K yaps.NoticeKind // never set: a process from before parts would deliver it
	B json.RawMessage // never set: the same
}

// randomBytes returns n bytes that do not compress or repeat.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

// rawAll returns what raw hears until it is quiet for 300 ms.
func rawAll(t *testing.T, raw *pgx.Conn) []string {
	t.Helper()
	var out []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		note, err := raw.WaitForNotification(ctx)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, note.Payload)
	}
}

// checkParts checks that payloads are the parts of one awareness update of
// ref from sender, each within Postgres's limit and full but the last,
// and returns the update they carry.
func checkParts(t *testing.T, payloads []string, sender, ref string) []byte {
	t.Helper()
	require.GreaterOrEqual(t, len(payloads), 2)
	var data []byte
	var first wirePart
	for i, p := range payloads {
		require.Less(t, len(p), 8000, "part %d", i)
		require.True(t, strings.HasPrefix(p, `{"s":"`+sender+`"`), "the sender first, so it drops its own by prefix")
		var w wirePart
		require.NoError(t, json.Unmarshal([]byte(p), &w))
		require.Zero(t, w.K, "a part has no kind: an older process would deliver it")
		require.Nil(t, w.B)
		if i == 0 {
			first = w
			require.NotZero(t, w.M)
		}
		require.Equal(t, wirePart{S: sender, M: first.M, I: i, N: len(payloads), T: yaps.NoticeAwareness, R: ref, A: w.A}, w)
		if i < len(payloads)-1 {
			require.Greater(t, len(w.A), pgnotify.MaxAwarenessPayload, "part %d is not full", i)
		}
		data = append(data, w.A...)
	}
	return data
}

func requireEmpty(t *testing.T, n *pgnotify.Notifier) {
	t.Helper()
	msgs, size := pgnotify.Buffered(n)
	require.Zero(t, msgs, "incomplete messages kept")
	require.Zero(t, size, "bytes kept")
}

// An awareness update too large for one payload arrives whole, in parts
// that each fit Postgres's limit, from Publish and, at its place in the
// order, from PublishBatch; its sender drops its own parts, and nothing
// stays buffered.
func TestAwarenessInParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, pub, sub, in := pair(t)
	inPub := listen(t, pub)
	raw := rawListen(t, dsn, pub.Channel())
	ref := strings.Repeat("R", 22)

	for _, size := range []int{20 << 10, 60 << 10} {
		update := randomBytes(size)
		require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: ref, Payload: update}))
		require.Equal(t, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: ref, Payload: update, Sender: pub.ID()}, recv(t, in))
		payloads := rawAll(t, raw)
		require.Equal(t, update, checkParts(t, payloads, pub.ID(), ref))
		t.Logf("%d bytes: %d parts", size, len(payloads))
		requireEmpty(t, sub)
	}

	update := randomBytes(20 << 10)
	require.NoError(t, pub.PublishBatch(ctx, []yaps.Notice{
		{Kind: yaps.NoticeDoc, ListRef: "before", Seq: 1},
		{Kind: yaps.NoticeAwareness, ListRef: ref, Payload: update},
		{Kind: yaps.NoticeList, ListRef: "after"},
	}))
	require.Equal(t, "before", recv(t, in).ListRef)
	require.Equal(t, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: ref, Payload: update, Sender: pub.ID()}, recv(t, in))
	require.Equal(t, "after", recv(t, in).ListRef)
	payloads := rawAll(t, raw)
	require.Equal(t, rawPayload{S: pub.ID(), R: "before"}, decodeRaw(t, payloads[0]))
	require.Equal(t, rawPayload{S: pub.ID(), R: "after"}, decodeRaw(t, payloads[len(payloads)-1]))
	require.Equal(t, update, checkParts(t, payloads[1:len(payloads)-1], pub.ID(), ref))

	quiet(t, in)
	quiet(t, inPub)
	requireEmpty(t, sub)
	requireEmpty(t, pub)
}

func decodeRaw(t *testing.T, payload string) rawPayload {
	t.Helper()
	var p rawPayload
	require.NoError(t, json.Unmarshal([]byte(payload), &p), payload)
	return p
}

// part is a part as a test sends it, every member present.
type part struct {
	S string          `json:"s"`
	M uint64          `json:"m"`
	I int             `json:"i"`
	N int             `json:"n"`
	T yaps.NoticeKind `json:"t"`
	R string          `json:"r"`
	A []byte          `json:"a"`
}

func (p part) String() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// split returns update as count parts of message m from sender.
func split(sender string, m uint64, ref string, update []byte, count int) []string {
	var out []string
	size := (len(update) + count - 1) / count
	for i := range count {
		out = append(out, part{S: sender, M: m, I: i, N: count, T: yaps.NoticeAwareness, R: ref,
			A: update[i*size : min((i+1)*size, len(update))]}.String())
	}
	return out
}

// rawSender sends notifications on a channel from a plain connection,
// and waits until a Notifier handled them.
type rawSender struct {
	t       *testing.T
	conn    *pgx.Conn
	channel string
	in      <-chan yaps.Notice
	markers atomic.Int64
}

func newRawSender(t *testing.T, dsn, channel string, in <-chan yaps.Notice) *rawSender {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return &rawSender{t: t, conn: conn, channel: channel, in: in}
}

// send sends payloads in one statement, then a marker notice, and returns
// the notices delivered before the marker (the listener handles
// notifications in order, so the payloads were handled by then).
func (r *rawSender) send(payloads ...string) []yaps.Notice {
	r.t.Helper()
	marker := fmt.Sprintf("marker-%d", r.markers.Add(1))
	payloads = append(payloads, `{"s":"0000000000000000","k":3,"r":"`+marker+`"}`)
	_, err := r.conn.Exec(context.Background(), "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", r.channel, payloads)
	require.NoError(r.t, err)
	var got []yaps.Notice
	for {
		n := recv(r.t, r.in)
		if n.ListRef == marker {
			return got
		}
		got = append(got, n)
	}
}

// A message one of whose parts never arrives is dropped PartTimeout after
// its first part, and nothing of it stays; its late part is ignored, and
// the sender's next message arrives.
func TestAwarenessPartLost(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	sub := open(t, pgnotify.Config{DSN: dsn, PartTimeout: time.Second})
	in := listen(t, sub)
	r := newRawSender(t, dsn, sub.Channel(), in)
	const sender = "feedfacefeedface"
	update := randomBytes(3000)
	parts := split(sender, 1, "L", update, 3)

	start := time.Now()
	require.Empty(t, r.send(parts[0], parts[1])) // the third is lost
	msgs, size := pgnotify.Buffered(sub)
	require.Equal(t, 1, msgs)
	require.GreaterOrEqual(t, size, 2000)
	require.Eventually(t, func() bool {
		msgs, size := pgnotify.Buffered(sub)
		return msgs == 0 && size == 0
	}, 5*time.Second, 10*time.Millisecond, "the incomplete message was never dropped")
	require.GreaterOrEqual(t, time.Since(start), time.Second)

	require.Empty(t, r.send(parts[2]), "a late part of a dropped message is ignored")
	requireEmpty(t, sub)

	got := r.send(split(sender, 2, "L", update, 3)...)
	require.Equal(t, []yaps.Notice{{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: update, Sender: sender}}, got)
	requireEmpty(t, sub)
}

// Malformed parts, and parts that do not follow the one before them of
// their message, discard the message at once and deliver nothing; the
// listener goes on.
func TestAwarenessPartsMalformed(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	sub := open(t, pgnotify.Config{DSN: dsn}) // PartTimeout: 5 s, longer than the test
	in := listen(t, sub)
	r := newRawSender(t, dsn, sub.Channel(), in)
	const sender = "feedfacefeedface"
	update := randomBytes(3000)
	b64 := base64.StdEncoding.EncodeToString(update[:100])
	var m atomic.Uint64
	msg := func() []string { return split(sender, m.Add(1), "L", update, 3) }
	with := func(p part) string { return p.String() }
	good := part{S: sender, M: 1000, I: 0, N: 2, T: yaps.NoticeAwareness, R: "L", A: update[:100]}

	cases := map[string][]string{
		"index past the count": {with(part{S: sender, M: 1000, I: 2, N: 2, T: yaps.NoticeAwareness, A: update[:10]})},
		"negative index":       {with(part{S: sender, M: 1000, I: -1, N: 2, T: yaps.NoticeAwareness, A: update[:10]})},
		"no count":             {`{"s":"` + sender + `","m":1000,"t":4,"a":"` + b64 + `"}`},
		"no message id":        {`{"s":"` + sender + `","n":2,"t":4,"a":"` + b64 + `"}`},
		"no sender":            {`{"m":1000,"n":2,"t":4,"a":"` + b64 + `"}`},
		"another kind":         {with(part{S: sender, M: 1000, N: 2, T: yaps.NoticeDoc, A: update[:10]})},
		"no kind":              {`{"s":"` + sender + `","m":1000,"n":2,"a":"` + b64 + `"}`},
		"no data":              {with(part{S: sender, M: 1000, N: 2, T: yaps.NoticeAwareness})},
		"a notice's kind":      {`{"s":"` + sender + `","k":4,"m":1000,"n":1,"t":4,"r":"L","a":"` + b64 + `"}`},
		"packed notices":       {`{"s":"` + sender + `","m":1000,"n":1,"t":4,"r":"L","a":"` + b64 + `","b":[{"k":3,"r":"x"}]}`},
		"data not base64":      {`{"s":"` + sender + `","m":1000,"n":1,"t":4,"r":"L","a":"!!"}`},
		"id not a number":      {`{"s":"` + sender + `","m":"x","n":1,"t":4,"r":"L","a":"` + b64 + `"}`},
		"a huge count":         {with(part{S: sender, M: 1000, N: 1 << 40, T: yaps.NoticeAwareness, A: update[:10]})},
		"first part lost":      msg()[1:],
		"skipped part": func() []string {
			p := msg()
			return []string{p[0], p[2], p[1]}
		}(),
		"repeated part": func() []string {
			p := msg()
			// Postgres folds identical payloads of a transaction.
			return []string{p[0], "{ " + p[0][1:], p[1], p[2]}
		}(),
		"count changes": func() []string {
			p := msg()
			p[1] = strings.Replace(p[1], `"n":3`, `"n":4`, 1)
			return p
		}(),
		"list changes": func() []string {
			p := msg()
			p[1] = strings.Replace(p[1], `"r":"L"`, `"r":"M"`, 1)
			return p
		}(),
		"a malformed part amid": func() []string {
			p := msg()
			p[1] = strings.Replace(p[1], `"t":4`, `"t":9`, 1)
			return p
		}(),
		"good part then a huge count": {with(good), with(part{S: sender, M: 1000, I: 1, N: 1 << 40, T: yaps.NoticeAwareness, R: "L", A: update[:10]})},
	}
	for name, payloads := range cases {
		require.Empty(t, r.send(payloads...), name)
		requireEmpty(t, sub)
	}
	// Sent together, every one after the other.
	var all []string
	for _, payloads := range cases {
		all = append(all, payloads...)
	}
	require.Empty(t, r.send(all...))
	requireEmpty(t, sub)

	got := r.send(msg()...)
	require.Equal(t, []yaps.Notice{{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: update, Sender: sender}}, got)
	requireEmpty(t, sub)
}

// MaxAwarenessMessageBytes: a sender sends nothing of a larger update; a
// listener discards a message whose parts add up to more, keeps at most
// that much of one sender's incomplete messages (a newer one pushes out
// older ones) and four times that of all senders'.
func TestAwarenessPartsCaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.PostgresDSN(t)
	const maxMsg = 32 << 10
	pub := open(t, pgnotify.Config{DSN: dsn, MaxAwarenessMessageBytes: maxMsg})
	big := open(t, pgnotify.Config{DSN: dsn, MaxAwarenessMessageBytes: 2 * maxMsg})
	sub := open(t, pgnotify.Config{DSN: dsn, MaxAwarenessMessageBytes: maxMsg, PartTimeout: 3 * time.Second})
	waitPeers(t, pub, big, sub)
	in := listen(t, sub)
	raw := rawListen(t, dsn, sub.Channel())

	// The sender.
	update := randomBytes(maxMsg)
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: update}))
	require.Equal(t, update, recv(t, in).Payload, "at the cap")
	require.Len(t, rawAll(t, raw), 6)
	require.NoError(t, pub.Publish(ctx, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: append(update, 0)}))
	require.NoError(t, pub.PublishBatch(ctx, []yaps.Notice{{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: append(update, 1)}}))
	require.Empty(t, rawAll(t, raw), "nothing sent of an update over the cap")
	quiet(t, in)

	// A listener with a lower cap than the sender's.
	require.NoError(t, big.Publish(ctx, yaps.Notice{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: randomBytes(maxMsg + 1)}))
	require.NoError(t, big.Publish(ctx, yaps.Notice{Kind: yaps.NoticeList, ListRef: "marker"}))
	require.Equal(t, "marker", recv(t, in).ListRef, "over the listener's cap: discarded")
	requireEmpty(t, sub)

	// What listeners keep: four senders' incomplete messages of 26.5 KB,
	// not a fifth's.
	r := newRawSender(t, dsn, sub.Channel(), in)
	chunk := 5300
	updates := map[string][]byte{}
	var first []string
	for i := range 5 {
		sender := fmt.Sprintf("%016x", i+1)
		updates[sender] = randomBytes(6 * chunk)
		first = append(first, split(sender, 1, "L", updates[sender], 6)[:5]...) // the sixth later
	}
	require.Empty(t, r.send(first...))
	msgs, size := pgnotify.Buffered(sub)
	require.Equal(t, 4, msgs, "the fifth sender's message went over the total")
	require.LessOrEqual(t, size, 4*(maxMsg+256))
	got := r.send(split("0000000000000001", 1, "L", updates["0000000000000001"], 6)[5], split("0000000000000005", 1, "L", updates["0000000000000005"], 6)[5])
	require.Equal(t, []yaps.Notice{{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: updates["0000000000000001"], Sender: "0000000000000001"}}, got)
	msgs, _ = pgnotify.Buffered(sub)
	require.Equal(t, 3, msgs)

	// A sender's newer message pushes out its older incomplete one when
	// both do not fit its share.
	next := randomBytes(3 * 5000)
	got = r.send(split("0000000000000002", 2, "L", next, 3)[:2]...)
	require.Empty(t, got)
	msgs, _ = pgnotify.Buffered(sub)
	require.Equal(t, 3, msgs, "the older message of sender 2 went, the newer came")
	got = r.send(split("0000000000000002", 2, "L", next, 3)[2], split("0000000000000002", 1, "L", updates["0000000000000002"], 6)[5])
	require.Equal(t, []yaps.Notice{{Kind: yaps.NoticeAwareness, ListRef: "L", Payload: next, Sender: "0000000000000002"}}, got)

	// The rest times out.
	require.Eventually(t, func() bool {
		msgs, size := pgnotify.Buffered(sub)
		return msgs == 0 && size == 0
	}, 10*time.Second, 20*time.Millisecond)
}
