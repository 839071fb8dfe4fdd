package ysync

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

var timeNow = time.Now

const prefix = "/api/v1"

type testEnv struct {
	fake *fakeService
	srv  *Server
	ts   *httptest.Server
}

func newEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	return newEnvOn(t, cfg, httptest.NewServer)
}

// newEnvOn is newEnv with the test server started by serve (e.g. TLS).
func newEnvOn(t *testing.T, cfg Config, serve func(http.Handler) *httptest.Server) *testEnv {
	t.Helper()
	f := newFake()
	f.addList("L1")
	f.addList("L2")
	s, err := newServer(f, cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	s.Mount(mux, prefix)
	ts := serve(mux)
	t.Cleanup(func() {
		_ = s.Close()
		ts.Close()
	})
	return &testEnv{fake: f, srv: s, ts: ts}
}

func (e *testEnv) url(ref, code string) string {
	return "ws" + strings.TrimPrefix(e.ts.URL, "http") + prefix + "/lists/" + ref + "/sync?k=" + code
}

// client is a minimal y-websocket client speaking raw frames. A goroutine
// reads frames into a channel, because a gorilla read that times out
// breaks the connection for good.
type client struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan []byte
	err    chan error
}

func (e *testEnv) dial(t *testing.T, ref, code string) *client {
	t.Helper()
	return dialURL(t, e.url(ref, code))
}

func dialURL(t *testing.T, url string) *client {
	t.Helper()
	c, start := dialRaw(t, url)
	start()
	// Every connection starts with the server's step 1.
	m := c.next()
	require.Equal(t, uint64(MsgSync), m.Type)
	require.Equal(t, uint64(SyncStep1), m.SyncType)
	return c
}

// dialPaused connects a client that reads nothing until start is called,
// with a fixed socket receive buffer (64 KiB: a smaller one makes TCP
// crawl once it reads) so that the server's queue for it fills soon.
func dialPaused(t *testing.T, url string) (c *client, start func()) {
	t.Helper()
	c, start = dialRaw(t, url)
	require.NoError(t, c.ws.UnderlyingConn().(*net.TCPConn).SetReadBuffer(64<<10))
	return c, start
}

// dialRaw connects a client whose frames are read once start is called.
func dialRaw(t *testing.T, url string) (c *client, start func()) {
	t.Helper()
	return dialRawHeader(t, url, nil)
}

// dialRawHeader is dialRaw with request headers h.
func dialRawHeader(t *testing.T, url string, h http.Header) (c *client, start func()) {
	t.Helper()
	return dialRawWith(t, websocket.DefaultDialer, url, h)
}

// dialRawWith is dialRawHeader through dialer d.
func dialRawWith(t *testing.T, d *websocket.Dialer, url string, h http.Header) (c *client, start func()) {
	t.Helper()
	ws, resp, err := d.Dial(url, h)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { ws.Close() })
	c = &client{t: t, ws: ws, frames: make(chan []byte, 1024), err: make(chan error, 1)}
	start = func() {
		go func() {
			for {
				typ, frame, err := ws.ReadMessage()
				if err != nil {
					c.err <- err
					return
				}
				if typ != websocket.BinaryMessage {
					frame = nil
				}
				c.frames <- frame
			}
		}()
	}
	return c, start
}

func (c *client) write(frame []byte) {
	c.t.Helper()
	require.NoError(c.t, c.ws.WriteMessage(websocket.BinaryMessage, frame))
}

// next returns the next message, failing after two seconds.
func (c *client) next() Message {
	c.t.Helper()
	var frame []byte
	select {
	case frame = <-c.frames:
	case err := <-c.err:
		// The reader queues every frame before it reports the end, but a
		// select picks at random among ready cases: a frame that came
		// before the close must still come first.
		select {
		case frame = <-c.frames:
			c.err <- err // for the next call (the reader has returned)
		default:
			c.t.Fatalf("connection ended: %v", err)
		}
	case <-time.After(2 * time.Second):
		c.t.Fatalf("no message within 2s")
	}
	require.NotNil(c.t, frame, "text frame")
	m, err := DecodeMessage(frame)
	require.NoError(c.t, err)
	return m
}

// nextOf skips messages until one of the given type arrives.
func (c *client) nextOf(typ uint64) Message {
	c.t.Helper()
	for {
		if m := c.next(); m.Type == typ {
			return m
		}
	}
}

// quiet asserts nothing arrives for a short while.
func (c *client) quiet() {
	c.t.Helper()
	select {
	case frame := <-c.frames:
		c.t.Fatalf("unexpected frame %x", frame)
	case <-time.After(150 * time.Millisecond):
	}
}

// closed waits for the server's close frame and returns its code.
func (c *client) closed() int {
	c.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case <-c.frames:
		case err := <-c.err:
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			c.t.Fatalf("connection ended without a close frame: %v", err)
		case <-timeout:
			c.t.Fatalf("connection not closed within 5s")
		}
	}
}

func problemOf(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	return p
}

func TestRefusalsBeforeUpgrade(t *testing.T) {
	t.Parallel()
	// Written as an operator might; matched in canonical form.
	e := newEnv(t, Config{MaxConnsPerRoom: 1, AllowedOrigins: []string{"HTTPS://App.Example:443/"}})
	for _, tc := range []struct {
		ref, code, origin string
		status            int
		errCode           string
	}{
		{"nope", "owner", "", 404, "not_found"},
		{"no%20such%22list", "owner", "", 404, "not_found"},
		{"L1", "", "", 401, "unauthorized"},
		{"L1", "bogus", "", 401, "unauthorized"},
		{"L1", "owner", "https://evil.example", 403, "forbidden"},
	} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		_, resp, err := websocket.DefaultDialer.Dial(e.url(tc.ref, tc.code), h)
		require.ErrorIs(t, err, websocket.ErrBadHandshake)
		require.Equal(t, tc.status, resp.StatusCode, tc)
		p := problemOf(t, resp)
		require.Equal(t, float64(tc.status), p["status"])
		require.Equal(t, tc.errCode, p["error"].(map[string]any)["code"])
		require.NotContains(t, p["instance"], "k=")
		require.Equal(t, prefix+"/lists/"+tc.ref+"/sync", p["instance"], "the escaped path, a URI reference")
		if tc.status == 401 {
			require.Equal(t, `Bearer realm="yaps"`, resp.Header.Get("WWW-Authenticate"), "RFC 9110: every 401")
		} else {
			require.Empty(t, resp.Header.Get("WWW-Authenticate"))
		}
		resp.Body.Close()
	}

	// A plain GET is told to upgrade.
	resp, err := http.Get(e.ts.URL + prefix + "/lists/L1/sync?k=owner")
	require.NoError(t, err)
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, "bad_request", problemOf(t, resp)["error"].(map[string]any)["code"])
	resp.Body.Close()

	// Allowed and same-host origins pass; the room cap (1) then refuses.
	h := http.Header{"Origin": {"https://app.example"}}
	ws, resp, err := websocket.DefaultDialer.Dial(e.url("L1", "owner"), h)
	require.NoError(t, err)
	resp.Body.Close()
	defer ws.Close()
	h = http.Header{"Origin": {e.ts.URL}}
	_, resp, err = websocket.DefaultDialer.Dial(e.url("L1", "editor"), h)
	require.Error(t, err)
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	p := problemOf(t, resp)
	require.Equal(t, "unavailable", p["error"].(map[string]any)["code"])
	resp.Body.Close()
}

// TestBearerCode: the code may come as Authorization: Bearer instead of k
// (RULINGS R4); an account key there is not a code, and k then counts,
// provided the key is valid (a bad account credential is a 401, as over
// HTTP).
func TestBearerCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	bare := "ws" + strings.TrimPrefix(e.ts.URL, "http") + prefix + "/lists/L1/sync"
	for _, tc := range []struct {
		url, auth string
		status    int
	}{
		{bare, "Bearer owner", 101},
		{bare, "bearer  viewer ", 101},
		{bare, "Bearer bogus", 401},
		{bare, "Basic owner", 401},
		{bare, "Bearer " + yaps.AccountKeyPrefix + "x", 401},
		{e.url("L1", "owner"), "Bearer " + fakeAccountKey, 101},
		{e.url("L1", "owner"), "Bearer " + yaps.AccountKeyPrefix + "x", 401},
	} {
		ws, resp, err := websocket.DefaultDialer.Dial(tc.url, http.Header{"Authorization": {tc.auth}})
		require.Equal(t, tc.status, resp.StatusCode, tc)
		if tc.status == 101 {
			require.NoError(t, err)
			ws.Close()
		} else {
			require.Error(t, err)
		}
		resp.Body.Close()
	}
}

func TestSyncRelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	a := e.dial(t, "L1", "owner")
	b := e.dial(t, "L1", "editor")
	other := e.dial(t, "L2", "owner")

	// Step 1 is answered with step 2.
	a.write(AppendSyncStep1(nil, []byte{0}))
	m := a.nextOf(MsgSync)
	require.Equal(t, uint64(SyncStep2), m.SyncType)
	require.Equal(t, emptyUpdate, m.Payload)

	// An empty step 2 is not a write.
	a.write(AppendSyncStep2(nil, emptyUpdate))
	// A write reaches every connection of the room, the sender included.
	upd := []byte{1, 2, 3}
	a.write(AppendUpdate(nil, upd))
	for _, c := range []*client{a, b} {
		m := c.nextOf(MsgSync)
		require.Equal(t, uint64(SyncUpdate), m.SyncType)
		require.Equal(t, upd, m.Payload)
	}
	b.write(AppendSyncStep2(nil, []byte{4, 5}))
	require.Equal(t, []byte{4, 5}, a.nextOf(MsgSync).Payload)
	require.Equal(t, []byte{4, 5}, b.nextOf(MsgSync).Payload)
	other.quiet()
	require.Equal(t, 2, e.fake.appliedCount())

	// Events from elsewhere (HTTP writes) take the same path.
	e.fake.emit(eventUpdate("L2", []byte{9}))
	require.Equal(t, []byte{9}, other.nextOf(MsgSync).Payload)

	// A later step 1 gets the whole state.
	b.write(AppendSyncStep1(nil, []byte{0}))
	require.Equal(t, []byte{1, 2, 3, 4, 5}, b.nextOf(MsgSync).Payload)
}

// A relay to connections with nothing queued is written by the relaying
// goroutine itself (conn.relay), and arrives like any other.
func TestRelayWritesIdleConnectionsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	a := e.dial(t, "L1", "owner")
	b := e.dial(t, "L1", "editor")
	rm := e.srv.room("L1")
	require.NotNil(t, rm)
	require.Eventually(t, func() bool {
		conns := *rm.snapshot.Load()
		return len(conns) == 2 && !slices.ContainsFunc(conns, func(c *conn) bool { return !c.idle() })
	}, 5*time.Second, time.Millisecond)
	before := e.srv.directWrites.Load()
	e.fake.emit(eventUpdate("L1", []byte{7, 7}))
	for _, c := range []*client{a, b} {
		m := c.nextOf(MsgSync)
		require.Equal(t, uint64(SyncUpdate), m.SyncType)
		require.Equal(t, []byte{7, 7}, m.Payload)
	}
	require.Equal(t, before+2, e.srv.directWrites.Load())
}

// A reader that stops, then reads slower than the writer, with small
// socket buffers: relays are written at once, kept in part when the socket
// is full, then queued, and the reader still gets every update whole and
// in order.
func TestRelayToSlowReaderInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MessagesPerSecond: -1})
	a := e.dial(t, "L1", "owner")
	ws, resp, err := websocket.DefaultDialer.Dial(e.url("L1", "editor"), nil)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { ws.Close() })
	require.NoError(t, ws.UnderlyingConn().(*net.TCPConn).SetReadBuffer(64<<10)) // smaller makes loopback TCP crawl (see dialPaused)
	// Small server-side send buffers, so the socket fills.
	rm := e.srv.room("L1")
	require.Eventually(t, func() bool { return len(*rm.snapshot.Load()) == 2 }, 5*time.Second, time.Millisecond)
	for _, c := range *rm.snapshot.Load() {
		require.NoError(t, c.netConn.(*net.TCPConn).SetWriteBuffer(32<<10))
	}
	got := make(chan []byte, 4096)
	readErr := make(chan error, 1)
	start := make(chan struct{})
	go func() {
		<-start
		for i := 0; ; i++ {
			_, frame, err := ws.ReadMessage()
			if err != nil {
				readErr <- err
				return
			}
			if m, err := DecodeMessage(frame); err == nil && m.Type == MsgSync && m.SyncType == SyncUpdate {
				got <- m.Payload
			}
			if i%8 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	var sent [][]byte
	for i := range 300 {
		if i == 60 {
			// 60 updates of 10-40 KB are more than both socket buffers
			// hold: the reader now drains the backlog while more come.
			close(start)
		}
		size := 1 + rng.IntN(40<<10)
		if i < 60 {
			size = 10<<10 + rng.IntN(30<<10)
		}
		upd := make([]byte, size)
		for j := range upd {
			upd[j] = byte(i + j)
		}
		upd[0] = 1 // not one of the fake's refusal markers
		a.write(AppendUpdate(nil, upd))
		require.Equal(t, upd, a.nextOf(MsgSync).Payload, "#%d: the sender's echo", i)
		sent = append(sent, upd)
	}
	for i, want := range sent {
		select {
		case p := <-got:
			require.Equal(t, want, p, "#%d", i)
		case err := <-readErr:
			t.Fatalf("#%d: %v", i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("#%d: not delivered", i)
		}
	}
	require.Positive(t, e.srv.directWrites.Load())
	require.Positive(t, e.srv.restsKept.Load(), "the socket never filled: the test did not reach the rest path")
}

// Over TLS the socket is a *tls.Conn: relays must go through it (queued),
// never straight to the file descriptor, or the client would read
// plaintext in the middle of its TLS stream.
func TestRelayOverTLS(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, Config{}, httptest.NewTLSServer)
	dialer := *websocket.DefaultDialer
	dialer.TLSClientConfig = e.ts.Client().Transport.(*http.Transport).TLSClientConfig
	var clients []*client
	for _, code := range []string{"owner", "editor"} {
		c, start := dialRawWith(t, &dialer, e.url("L1", code), nil) // wss://
		start()
		require.Equal(t, uint64(SyncStep1), c.nextOf(MsgSync).SyncType)
		clients = append(clients, c)
	}
	for i := range 20 {
		upd := []byte{byte(i), 1, 2}
		clients[i%2].write(AppendUpdate(nil, upd))
		for _, c := range clients {
			require.Equal(t, upd, c.nextOf(MsgSync).Payload, "#%d", i)
		}
	}
	require.Zero(t, e.srv.directWrites.Load())
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	v := e.dial(t, "L1", "viewer")
	w := e.dial(t, "L1", "editor")

	v.write(AppendSyncStep2(nil, emptyUpdate)) // not a write: no denial
	v.write(AppendUpdate(nil, []byte{1, 1}))
	m := v.next()
	require.Equal(t, uint64(MsgAuth), m.Type)
	require.Equal(t, "permission denied", m.Reason)
	v.write(AppendUpdate(nil, []byte{1, 2}))
	v.quiet() // only the first write is answered
	w.quiet() // and nothing was relayed
	require.Equal(t, 0, e.fake.appliedCount())

	// Viewers still read.
	w.write(AppendUpdate(nil, []byte{7}))
	require.Equal(t, []byte{7}, v.nextOf(MsgSync).Payload)
	require.Equal(t, []byte{7}, w.nextOf(MsgSync).Payload)

	// Archiving makes writers read-only; unarchiving lifts it.
	e.fake.archive("L1", true)
	require.Eventually(t, func() bool {
		for _, c := range *e.srv.room("L1").snapshot.Load() {
			if c.permID == "L1-editor" && !c.readOnly.Load() {
				return false
			}
		}
		return true
	}, 2*time.Second, 5*time.Millisecond)
	w.write(AppendUpdate(nil, []byte{8}))
	require.Equal(t, "permission denied", w.nextOf(MsgAuth).Reason)
	e.fake.archive("L1", false)
	require.Eventually(t, func() bool {
		for _, c := range *e.srv.room("L1").snapshot.Load() {
			if c.permID == "L1-editor" && c.readOnly.Load() {
				return false
			}
		}
		return true
	}, 2*time.Second, 5*time.Millisecond)
	// Writable again: our step 1, so the client sends what it edited
	// while it was read-only.
	m = w.nextOf(MsgSync)
	require.Equal(t, uint64(SyncStep1), m.SyncType)
	require.Equal(t, []byte{1}, m.Payload) // the fake's state vector: one update
	w.write(AppendUpdate(nil, []byte{9}))
	require.Equal(t, []byte{9}, w.nextOf(MsgSync).Payload)
}

// Unarchiving sends every writer our step 1, reading the state vector
// once for all of them, not once per connection.
func TestUnarchiveReadsStateVectorOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	var writers []*client
	for _, role := range []string{"editor", "editor", "editor", "owner", "owner"} {
		writers = append(writers, e.dial(t, "L1", role))
	}
	v := e.dial(t, "L1", "viewer")
	readOnly := func(want bool) func() bool {
		return func() bool {
			for _, c := range *e.srv.room("L1").snapshot.Load() {
				if c.permID != "L1-viewer" && c.readOnly.Load() != want {
					return false
				}
			}
			return true
		}
	}
	e.fake.archive("L1", true)
	require.Eventually(t, readOnly(true), 2*time.Second, 5*time.Millisecond)
	e.fake.mu.Lock()
	before := e.fake.stateVectors
	e.fake.mu.Unlock()
	e.fake.archive("L1", false)
	for _, w := range writers {
		m := w.nextOf(MsgSync)
		require.Equal(t, uint64(SyncStep1), m.SyncType)
	}
	v.quiet() // a viewer is not asked
	e.fake.mu.Lock()
	defer e.fake.mu.Unlock()
	require.Equal(t, 1, e.fake.stateVectors-before)
}

func TestAwareness(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	a := e.dial(t, "L1", "owner")
	b := e.dial(t, "L1", "viewer")

	// Clock 0 for an unknown client is not newer (y-protocols rule).
	sendAwareness(a, AwarenessEntry{ClientID: 11, Clock: 0, State: `{}`})
	sendAwareness(a, AwarenessEntry{ClientID: 11, Clock: 1, State: `{"user":"a"}`})
	for _, c := range []*client{a, b} { // the sender too
		entries := decodeAw(t, c.nextOf(MsgAwareness))
		require.Equal(t, []AwarenessEntry{{ClientID: 11, Clock: 1, State: `{"user":"a"}`}}, entries)
	}
	// Stale clocks are not relayed.
	sendAwareness(a, AwarenessEntry{ClientID: 11, Clock: 1, State: `{"user":"stale"}`})
	b.quiet()
	sendAwareness(b, AwarenessEntry{ClientID: 22, Clock: 3, State: `{"user":"b"}`})
	a.nextOf(MsgAwareness)
	b.nextOf(MsgAwareness)

	// A newcomer gets every state on connect; query-awareness answers too.
	c := e.dial(t, "L1", "editor")
	got := awarenessMap(t, c.nextOf(MsgAwareness))
	require.Equal(t, map[uint64]string{11: `{"user":"a"}`, 22: `{"user":"b"}`}, got)
	c.write(AppendQueryAwareness(nil))
	require.Equal(t, got, awarenessMap(t, c.nextOf(MsgAwareness)))

	// Disconnect removes what the connection controlled: clock + 1, null.
	require.NoError(t, a.ws.Close())
	for _, cl := range []*client{b, c} {
		entries := decodeAw(t, cl.nextOf(MsgAwareness))
		require.Equal(t, []AwarenessEntry{{ClientID: 11, Clock: 2, State: "null"}}, entries)
	}
	c.write(AppendQueryAwareness(nil))
	require.Equal(t, map[uint64]string{22: `{"user":"b"}`}, awarenessMap(t, c.nextOf(MsgAwareness)))

	// An explicit null at the same clock removes as well.
	sendAwareness(b, AwarenessEntry{ClientID: 22, Clock: 3, State: "null"})
	require.Equal(t, map[uint64]string{22: "null"}, awarenessMap(t, c.nextOf(MsgAwareness)))
}

// sendAwareness sends entries as one awareness message.
func sendAwareness(c *client, entries ...AwarenessEntry) {
	c.t.Helper()
	c.write(AppendAwareness(nil, EncodeAwareness(entries)))
}

// decodeAw decodes the entries of awareness message m.
func decodeAw(t *testing.T, m Message) []AwarenessEntry {
	t.Helper()
	entries, err := DecodeAwareness(m.Payload, AwarenessLimits{})
	require.NoError(t, err)
	return entries
}

func awarenessMap(t *testing.T, m Message) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for _, e := range decodeAw(t, m) {
		out[e.ClientID] = e.State
	}
	return out
}

func TestRevocationCloses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	v1 := e.dial(t, "L1", "viewer")
	v2 := e.dial(t, "L1", "viewer")
	o := e.dial(t, "L1", "owner")
	e.fake.revoke("L1", "viewer")
	require.Equal(t, CloseRevoked, v1.closed())
	require.Equal(t, CloseRevoked, v2.closed())
	o.write(AppendUpdate(nil, []byte{1}))
	require.Equal(t, []byte{1}, o.nextOf(MsgSync).Payload)
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxMessageSize: 1024, MaxAwarenessIDsPerConn: 2, MessagesPerSecond: 1, MessageBurst: 20})
	for name, tc := range map[string]struct {
		typ   int
		frame []byte
		code  int
	}{
		"garbage":         {websocket.BinaryMessage, []byte{0, 2, 0xff, 0xff, 0xff, 0xff, 0x0f}, CloseBadMessage},
		"trailing":        {websocket.BinaryMessage, []byte{3, 3}, CloseBadMessage},
		"text":            {websocket.TextMessage, []byte("hello"), websocket.CloseUnsupportedData},
		"too big":         {websocket.BinaryMessage, make([]byte, 2048), websocket.CloseMessageTooBig},
		"invalid update":  {websocket.BinaryMessage, AppendUpdate(nil, []byte{0xEE}), CloseBadMessage},
		"awareness json":  {websocket.BinaryMessage, AppendAwareness(nil, EncodeAwareness([]AwarenessEntry{{ClientID: 1, Clock: 1, State: "{"}})), CloseBadMessage},
		"awareness count": {websocket.BinaryMessage, AppendAwareness(nil, EncodeAwareness([]AwarenessEntry{{ClientID: 1, Clock: 1, State: "1"}, {ClientID: 2, Clock: 1, State: "1"}, {ClientID: 3, Clock: 1, State: "1"}})), CloseBadMessage},
	} {
		c := e.dial(t, "L1", "owner")
		require.NoError(t, c.ws.WriteMessage(tc.typ, tc.frame), name)
		require.Equal(t, tc.code, c.closed(), name)
	}
	// Unknown message types are skipped.
	c := e.dial(t, "L1", "owner")
	c.write([]byte{42, 1, 2, 3})
	c.write(AppendUpdate(nil, []byte{5}))
	require.Equal(t, []byte{5}, c.nextOf(MsgSync).Payload)
	// A flood past the burst is cut.
	for i := 0; i < 30; i++ {
		if c.ws.WriteMessage(websocket.BinaryMessage, []byte{42}) != nil {
			break
		}
	}
	require.Equal(t, CloseRateLimited, c.closed())
	require.Eventually(t, func() bool { return e.srv.Stats().Conns == 0 }, 5*time.Second, 10*time.Millisecond)

	// Pings and pongs count too: each ping costs a pong write.
	for _, typ := range []int{websocket.PingMessage, websocket.PongMessage} {
		c := e.dial(t, "L1", "owner")
		for i := 0; i < 30; i++ {
			if c.ws.WriteControl(typ, []byte("x"), time.Now().Add(time.Second)) != nil {
				break
			}
		}
		require.Equal(t, CloseRateLimited, c.closed(), "control frame %d", typ)
	}
}

// A client that stops reading is disconnected once its queue is full,
// and neither its room nor other rooms stall meanwhile.
func TestSlowClientDisconnected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{SendQueueMessages: 16, WriteWait: 2 * time.Second})
	slow, resp, err := websocket.DefaultDialer.Dial(e.url("L1", "viewer"), nil)
	require.NoError(t, err)
	resp.Body.Close()
	defer slow.Close()
	require.NoError(t, slow.UnderlyingConn().(*net.TCPConn).SetReadBuffer(4096))
	// slow never reads.
	fast := e.dial(t, "L1", "owner")
	elsewhere := e.dial(t, "L2", "owner")

	big := bytes.Repeat([]byte{7}, 256<<10)
	var slowest time.Duration
	for i := 0; i < 200 && e.srv.Stats().Conns == 3; i++ {
		start := time.Now()
		e.fake.emit(eventUpdate("L1", big))
		slowest = max(slowest, time.Since(start))
		fast.nextOf(MsgSync)
	}
	// Emitting never waited for the stuck socket (that would take
	// WriteWait or forever).
	require.Less(t, slowest, time.Second)
	e.fake.emit(eventUpdate("L2", []byte{1}))
	require.Equal(t, []byte{1}, elsewhere.nextOf(MsgSync).Payload)
	require.Eventually(t, func() bool { return e.srv.Stats().Conns == 2 }, 5*time.Second, 10*time.Millisecond)
}

// burstUpdates writes n updates of 256 KiB, each marked with its index,
// from c on a goroutine of its own (the server stops reading c while its
// room catches up) and returns the payloads. Each starts with a client
// count no update can hold, so the room cannot merge two of them into one
// (a run of zeros alone is a valid empty Yjs update) and relays each as
// sent.
func burstUpdates(t *testing.T, c *client, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		p := append([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, bytes.Repeat([]byte{byte(i)}, 256<<10)...)
		out = append(out, p)
	}
	_, err := yjs.MergeUpdates(out[:min(2, n)])
	require.Error(t, err, "the room must not be able to merge the burst's updates")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range out {
			if c.ws.WriteMessage(websocket.BinaryMessage, AppendUpdate(nil, p)) != nil {
				return // the test ended early and closed c
			}
		}
	}()
	t.Cleanup(func() {
		_ = c.ws.Close()
		<-done
	})
	return out
}

// requireUpdates reads the next sync messages of c: updates with the
// payloads of want, in order.
func requireUpdates(t *testing.T, c *client, want [][]byte) {
	t.Helper()
	for i, p := range want {
		m := c.nextOf(MsgSync)
		require.Equal(t, uint64(SyncUpdate), m.SyncType)
		require.True(t, bytes.Equal(p, m.Payload), "update %d", i)
	}
}

// A burst of client updates larger than a connection's send queue waits
// for a reader that is behind instead of closing it: it gets every update,
// in order, once it reads again.
func TestBurstWaitsForSendQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{SendQueueMessages: 16, MessagesPerSecond: -1, SendQueueWait: 20 * time.Second})
	behind, start := dialPaused(t, e.url("L1", "viewer"))
	writer := e.dial(t, "L1", "owner")
	const n = 60 // 15 MiB: far more than the queue (16 frames) and the socket buffers hold
	want := burstUpdates(t, writer, n)
	// The burst is under way and the server's frames for behind pile up.
	require.Eventually(t, func() bool { return e.fake.appliedCount() >= 8 }, 5*time.Second, time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	start()
	require.Equal(t, uint64(SyncStep1), behind.nextOf(MsgSync).SyncType)
	requireUpdates(t, behind, want)
	for range want {
		require.Equal(t, uint64(SyncUpdate), writer.nextOf(MsgSync).SyncType)
	}
	require.Equal(t, n, e.fake.appliedCount())
	require.Equal(t, 2, e.srv.Stats().Conns)
}

// A reader that stays behind longer than SendQueueWait is closed as slow,
// and the rest of its room gets the whole burst.
func TestBurstClosesReaderStuckPastWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{SendQueueMessages: 16, MessagesPerSecond: -1, SendQueueWait: 200 * time.Millisecond, WriteWait: time.Second})
	_, _ = dialPaused(t, e.url("L1", "viewer")) // never reads
	writer := e.dial(t, "L1", "owner")
	other := e.dial(t, "L1", "editor")
	want := burstUpdates(t, writer, 60)
	requireUpdates(t, other, want)
	require.Eventually(t, func() bool { return e.srv.Stats().Conns == 2 }, 5*time.Second, 10*time.Millisecond)
}

func TestIdleUnloadAndCaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{IdleUnload: 50 * time.Millisecond, MaxRooms: 1})
	a := e.dial(t, "L1", "owner")
	require.Equal(t, 1, e.fake.pinned("L1"))
	// The only room slot is taken by a live room.
	_, resp, err := websocket.DefaultDialer.Dial(e.url("L2", "owner"), nil)
	require.Error(t, err)
	require.Equal(t, 503, resp.StatusCode)
	resp.Body.Close()
	require.NoError(t, a.ws.Close())
	require.Eventually(t, func() bool { return e.srv.Stats() == Stats{} }, 2*time.Second, 10*time.Millisecond)
	require.Equal(t, 0, e.fake.pinned("L1"))
	e.dial(t, "L2", "owner")
	require.Equal(t, Stats{Rooms: 1, Conns: 1}, e.srv.Stats())
}

func TestCloseServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	a := e.dial(t, "L1", "owner")
	b := e.dial(t, "L2", "owner")
	done := make(chan error)
	go func() { done <- e.srv.Close() }()
	require.Equal(t, websocket.CloseGoingAway, a.closed())
	require.Equal(t, websocket.CloseGoingAway, b.closed())
	require.NoError(t, <-done)
	_, resp, err := websocket.DefaultDialer.Dial(e.url("L1", "owner"), nil)
	require.Error(t, err)
	require.Equal(t, 503, resp.StatusCode)
	resp.Body.Close()
}

func TestRefFromPath(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", refFromPath("/api/v1/lists/abc/sync"))
	require.Equal(t, "abc", refFromPath("/lists/abc/sync"))
	require.Equal(t, "", refFromPath("/lists//sync"))
	require.Equal(t, "", refFromPath("/lists/a/b/sync"))
	require.Equal(t, "", refFromPath("/lists/abc"))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := newServer(newFake(), Config{PingPeriod: time.Minute, PongWait: time.Second})
	require.Error(t, err)
	_, err = newServer(newFake(), Config{MaxMessageSize: 10})
	require.Error(t, err)
	_, err = newServer(newFake(), Config{SendQueueWait: -time.Second})
	require.Error(t, err)
	for _, bad := range []string{"", "app.example", "https://app.example/path", "ftp://app.example"} {
		_, err = newServer(newFake(), Config{AllowedOrigins: []string{bad}})
		require.ErrorContains(t, err, "AllowedOrigins", bad)
	}
	c := Config{}.WithDefaults()
	require.Equal(t, int64(1<<20), c.MaxMessageSize)
	require.Equal(t, 2*time.Second, c.SendQueueWait)
	require.NoError(t, c.validate())
}

func TestDeadPeerClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{PingPeriod: 100 * time.Millisecond, PongWait: time.Second})
	live := e.dial(t, "L1", "owner") // answers pings while it reads
	dead, err := upgradeRaw(strings.TrimPrefix(e.ts.URL, "http://"), prefix+"/lists/L1/sync?k=viewer")
	require.NoError(t, err)
	defer dead.Close()
	require.Eventually(t, func() bool { return e.srv.Stats().Conns == 1 }, 3*time.Second, 10*time.Millisecond)
	time.Sleep(1500 * time.Millisecond) // more than a pong wait
	require.Equal(t, 1, e.srv.Stats().Conns)
	live.write(AppendUpdate(nil, []byte{1}))
	require.Equal(t, []byte{1}, live.nextOf(MsgSync).Payload)
}

func TestProcessConnectionCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxConnsPerProcess: 2})
	e.dial(t, "L1", "owner")
	e.dial(t, "L2", "owner")
	_, resp, err := websocket.DefaultDialer.Dial(e.url("L1", "editor"), nil)
	require.Error(t, err)
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "unavailable", problemOf(t, resp)["error"].(map[string]any)["code"])
	resp.Body.Close()
}

// A client flooding garbage into one room is cut off without delaying
// another room's traffic.
func TestHostileClientDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	other := e.dial(t, "L2", "owner")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, resp, err := websocket.DefaultDialer.Dial(e.url("L1", "owner"), nil)
			if err != nil {
				return
			}
			resp.Body.Close()
			defer ws.Close()
			junk := bytes.Repeat([]byte{0xff}, 512<<10)
			for j := 0; j < 200; j++ {
				if ws.WriteMessage(websocket.BinaryMessage, junk) != nil {
					return
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		start := time.Now()
		other.write(AppendUpdate(nil, []byte{byte(i)}))
		require.Equal(t, []byte{byte(i)}, other.nextOf(MsgSync).Payload)
		require.Less(t, time.Since(start), time.Second)
	}
	wg.Wait()
	require.Eventually(t, func() bool { return e.srv.Stats().Conns == 1 }, 5*time.Second, 10*time.Millisecond)
}

func TestConnectAttemptsRateLimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	e.fake.mu.Lock()
	e.fake.maxAttempts = 2
	e.fake.mu.Unlock()
	// Every answer carries the X-RateLimit-* headers (RULINGS R8), the
	// 101 of an accepted upgrade included.
	rateHeaders := func(resp *http.Response, remaining string) {
		t.Helper()
		require.Equal(t, "2", resp.Header.Get("X-RateLimit-Limit"))
		require.Equal(t, remaining, resp.Header.Get("X-RateLimit-Remaining"))
		require.Equal(t, "3", resp.Header.Get("X-RateLimit-Reset"))
	}
	ws, resp, err := websocket.DefaultDialer.Dial(e.url("L1", "owner"), nil)
	require.NoError(t, err)
	require.Equal(t, 101, resp.StatusCode)
	rateHeaders(resp, "1")
	ws.Close()
	_, resp, err = websocket.DefaultDialer.Dial(e.url("L1", "bogus"), nil) // failures count too
	require.Error(t, err)
	require.Equal(t, 401, resp.StatusCode)
	rateHeaders(resp, "0")
	resp.Body.Close()
	_, resp, err = websocket.DefaultDialer.Dial(e.url("L1", "owner"), nil)
	require.Error(t, err)
	require.Equal(t, 429, resp.StatusCode)
	rateHeaders(resp, "0")
	require.Equal(t, "3", resp.Header.Get("Retry-After"))
	p := problemOf(t, resp)
	require.Equal(t, "rate_limited", p["error"].(map[string]any)["code"])
	require.EqualValues(t, 3, p["error"].(map[string]any)["retryAfter"])
	resp.Body.Close()
}

// gatedEnv is newEnv with the fake's ApplyUpdates held until the returned
// channel is closed.
func gatedEnv(t *testing.T, cfg Config) (*testEnv, chan struct{}) {
	t.Helper()
	e := newEnv(t, cfg)
	gate := make(chan struct{})
	e.fake.mu.Lock()
	e.fake.gate = gate
	e.fake.mu.Unlock()
	return e, gate
}

// waitBatches waits until the fake has been called n times.
func (e *testEnv) waitBatches(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(e.fake.batchSizes()) == n }, 2*time.Second, time.Millisecond)
}

// waitQueued waits until n updates wait in the room of ref.
func (e *testEnv) waitQueued(t *testing.T, ref string, n int) {
	t.Helper()
	rm := e.srv.room(ref)
	require.Eventually(t, func() bool {
		rm.applyMu.Lock()
		defer rm.applyMu.Unlock()
		return len(rm.applyQ) == n
	}, 5*time.Second, time.Millisecond)
}

// queueBehindHeld has first write the update {1} to L1 and holds its batch
// in the store (gate); then each of then writes {2}, {3}, ... in turn, into
// the room's queue; then it releases the store.
func queueBehindHeld(t *testing.T, e *testEnv, gate chan struct{}, first *client, then ...*client) {
	t.Helper()
	first.write(AppendUpdate(nil, []byte{1}))
	e.waitBatches(t, 1)
	for i, c := range then {
		c.write(AppendUpdate(nil, []byte{byte(2 + i)}))
		e.waitQueued(t, "L1", i+1)
	}
	close(gate)
}

// Updates that arrive while the room's previous batch is being stored are
// applied in one service call, and every connection gets them in order.
func TestUpdatesBatchedPerRoom(t *testing.T) {
	t.Parallel()
	e, gate := gatedEnv(t, Config{})
	a := e.dial(t, "L1", "owner")
	b := e.dial(t, "L1", "editor")
	c := e.dial(t, "L1", "agent")

	// The first batch is held in the store; two more clients write.
	queueBehindHeld(t, e, gate, a, b, c)

	for _, cl := range []*client{a, b, c} {
		for _, want := range []byte{1, 2, 3} {
			m := cl.nextOf(MsgSync)
			require.Equal(t, uint64(SyncUpdate), m.SyncType)
			require.Equal(t, []byte{want}, m.Payload)
		}
	}
	require.Equal(t, []int{1, 2}, e.fake.batchSizes())
	require.Equal(t, 3, e.fake.appliedCount())
}

// A busy room's worker waits (Config.BatchWait) for the connections that
// wrote in its last batches, so writers that answer the same relayed batch
// are stored and relayed together rather than in groups of their own.
func TestBusyRoomGathersWriters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		batchWait time.Duration
		want      []int
	}{
		{"gathers the missing writer", time.Second, []int{1, 3}},
		{"off", -1, []int{1, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, gate := gatedEnv(t, Config{BatchWait: tc.batchWait})
			a := e.dial(t, "L1", "owner")
			b := e.dial(t, "L1", "editor")
			c := e.dial(t, "L1", "owner")

			queueBehindHeld(t, e, gate, a, b, c)
			if tc.batchWait > 0 {
				// The room is busy now and a wrote in its last batch: its
				// worker holds b's and c's updates for a's next one.
				require.Eventually(t, func() bool { return e.srv.gathers.Load() == 1 }, 5*time.Second, time.Millisecond)
				require.Equal(t, []int{1}, e.fake.batchSizes())
			} else {
				e.waitBatches(t, 2)
			}
			a.write(AppendUpdate(nil, []byte{4}))
			require.Eventually(t, func() bool { return e.fake.appliedCount() == 4 }, 5*time.Second, time.Millisecond)
			require.Equal(t, tc.want, e.fake.batchSizes())
			for _, cl := range []*client{a, b, c} {
				for _, want := range []byte{1, 2, 3, 4} {
					require.Equal(t, []byte{want}, cl.nextOf(MsgSync).Payload)
				}
			}
		})
	}
}

// Nobody waits for a writer that is not missing: a lone writer's updates,
// and those of a room whose other recent writer left, are applied at once.
func TestBatchWaitOnlyForMissingWriters(t *testing.T) {
	t.Parallel()
	e, gate := gatedEnv(t, Config{BatchWait: time.Second})
	a := e.dial(t, "L1", "owner")
	b := e.dial(t, "L1", "editor")

	a.write(AppendUpdate(nil, []byte{1}))
	e.waitBatches(t, 1)
	a.write(AppendUpdate(nil, []byte{2}))
	e.waitQueued(t, "L1", 1)
	close(gate)
	// a, the last batch's only writer, has an update queued: no wait.
	require.Eventually(t, func() bool { return e.fake.appliedCount() == 2 }, 5*time.Second, time.Millisecond)

	// b writes: a, a writer of the last two batches, has nothing queued,
	// so b's update waits for it, up to BatchWait.
	b.write(AppendUpdate(nil, []byte{3}))
	require.Eventually(t, func() bool { return e.fake.appliedCount() == 3 }, 5*time.Second, time.Millisecond)
	require.EqualValues(t, 1, e.srv.gathers.Load())
	// Now a and b wrote in the last two batches. a leaves; b writes again
	// and is not held for a.
	require.NoError(t, a.ws.Close())
	require.Eventually(t, func() bool { return len(*e.srv.room("L1").snapshot.Load()) == 1 }, 5*time.Second, time.Millisecond)
	b.write(AppendUpdate(nil, []byte{4}))
	require.Eventually(t, func() bool { return e.fake.appliedCount() == 4 }, 5*time.Second, time.Millisecond)
	require.EqualValues(t, 1, e.srv.gathers.Load())
	require.Equal(t, []int{1, 1, 1, 1}, e.fake.batchSizes())
}

// A refused update in a batch is answered on its own connection only.
func TestBatchRefusalsPerConnection(t *testing.T) {
	t.Parallel()
	e, gate := gatedEnv(t, Config{})
	a := e.dial(t, "L1", "owner")
	b := e.dial(t, "L1", "editor")
	c := e.dial(t, "L1", "owner")

	a.write(AppendUpdate(nil, []byte{1}))
	e.waitBatches(t, 1)
	b.write(AppendUpdate(nil, []byte{0xEE})) // malformed for the fake
	c.write(AppendUpdate(nil, []byte{3}))
	e.waitQueued(t, "L1", 2)
	close(gate)

	require.Equal(t, CloseBadMessage, b.closed())
	for _, cl := range []*client{a, c} {
		require.Equal(t, []byte{1}, cl.nextOf(MsgSync).Payload)
		require.Equal(t, []byte{3}, cl.nextOf(MsgSync).Payload)
	}
	require.Equal(t, []int{1, 2}, e.fake.batchSizes())
}

// One write takes at most roomBatch updates; the rest wait for the next.
func TestRoomBatchBounded(t *testing.T) {
	t.Parallel()
	// The batch cap is a quarter of the send queue; this room has a
	// larger queue than the default, so a bigger cap.
	require.Equal(t, 64, (&Server{cfg: Config{}.WithDefaults()}).roomBatch(), "the default send queue is 256")
	e, gate := gatedEnv(t, Config{MessagesPerSecond: -1, SendQueueMessages: 1024})
	var clients []*client
	for range 5 {
		clients = append(clients, e.dial(t, "L1", "owner"))
	}
	clients[0].write(AppendUpdate(nil, []byte{1}))
	e.waitBatches(t, 1)
	const each = 60 // under maxPendingUpdates, so no read loop blocks
	for _, c := range clients {
		for i := range each {
			c.write(AppendUpdate(nil, []byte{2, byte(i)}))
		}
	}
	e.waitQueued(t, "L1", 5*each)
	close(gate)
	require.Eventually(t, func() bool { return e.fake.appliedCount() == 1+5*each }, 5*time.Second, time.Millisecond)
	want := []int{1}
	for left := 5 * each; left > 0; left -= e.srv.roomBatch() {
		want = append(want, min(left, e.srv.roomBatch()))
	}
	require.Equal(t, []int{1, 256, 44}, want)
	require.Equal(t, want, e.fake.batchSizes())
}

// Mount reads its prefix like yaps.Config does, takes the service's when
// none is given, and panics on one that cannot be a path.
func TestMountPrefix(t *testing.T) {
	t.Parallel()
	svc, err := yaps.NewService(yaps.Config{Store: memstore.New(), PurgeInterval: -1, Prefix: "/svc/v1"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	s, err := New(svc, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	cases := []struct{ prefix, want string }{
		{"", "GET /svc/v1/lists/{ref}/sync"},
		{"api/v1", "GET /api/v1/lists/{ref}/sync"},
		{"/api/v1/", "GET /api/v1/lists/{ref}/sync"},
	}
	for _, c := range cases {
		mux := http.NewServeMux()
		s.Mount(mux, c.prefix)
		want := strings.TrimSuffix(strings.TrimPrefix(c.want, "GET "), "/lists/{ref}/sync")
		r := httptest.NewRequest("GET", want+"/lists/L1/sync", nil)
		_, pattern := mux.Handler(r)
		require.Equal(t, c.want, pattern, "prefix %q", c.prefix)
	}
	for _, bad := range []string{"/a b", "/", "/a/../b"} {
		require.Panics(t, func() { s.Mount(http.NewServeMux(), bad) }, "prefix %q", bad)
	}
}

// A connection whose writes keep being refused is closed with 4529 once
// it is past RefusedWritesPerMinute: each refusal may cost the server a
// reload of the document. It is told "permission denied" once before.
func TestRefusedWritesAreRateLimited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		perMinute, refusals int
		closed              bool
	}{
		{perMinute: 3, refusals: 3, closed: false},
		{perMinute: 3, refusals: 4, closed: true},
		{perMinute: -1, refusals: 20, closed: false},
	} {
		e := newEnv(t, Config{RefusedWritesPerMinute: tc.perMinute})
		c := e.dial(t, "L1", "editor")
		for i := range tc.refusals {
			c.write(AppendUpdate(nil, []byte{0xEF}))
			if i == 0 {
				require.Equal(t, "permission denied", c.nextOf(MsgAuth).Reason)
			}
			if i == tc.refusals-1 && tc.closed {
				require.Equal(t, CloseRateLimited, c.closed(), "%+v", tc)
				break
			}
			// Still open: a valid write goes through.
			c.write(AppendUpdate(nil, []byte{byte(i + 1)}))
			require.Equal(t, []byte{byte(i + 1)}, c.nextOf(MsgSync).Payload, "%+v", tc)
		}
	}
}

// A code revoked while its connection is being set up (after the upgrade
// authenticated it, before the connection was registered for revocations,
// so the revocation's event found nothing to close) is closed all the same.
func TestRevokedDuringHandshake(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	e.fake.mu.Lock()
	e.fake.svHook = func() {
		e.fake.mu.Lock()
		e.fake.svHook = nil
		e.fake.mu.Unlock()
		e.fake.revoke("L1", "viewer")
	}
	e.fake.mu.Unlock()
	c := e.dial(t, "L1", "viewer")
	require.Equal(t, CloseRevoked, c.closed())
	// An active code stays.
	o := e.dial(t, "L1", "owner")
	o.write(AppendUpdate(nil, []byte{1}))
	require.Equal(t, []byte{1}, o.nextOf(MsgSync).Payload)
}
