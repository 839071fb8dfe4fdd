package ysync

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// ipEnv is a test server whose client address is the ip query parameter,
// so one test can connect from many addresses.
func ipEnv(t *testing.T, cfg Config) (e *testEnv, from func(ref, ip string) string) {
	t.Helper()
	cfg.ClientIP = func(r *http.Request) string { return r.URL.Query().Get("ip") }
	e = newEnv(t, cfg)
	return e, func(ref, ip string) string { return e.url(ref, "viewer") + "&ip=" + url.QueryEscape(ip) }
}

// perIP returns the per-address counts of ref's room.
func (e *testEnv) perIP(ref string) map[string]int {
	rm := e.srv.room(ref)
	if rm == nil {
		return nil
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	out := map[string]int{}
	for k, n := range rm.perIP {
		out[k] = n
	}
	return out
}

// requireIPRefused dials url and expects the MaxConnsPerIP refusal.
func requireIPRefused(t *testing.T, url string) {
	t.Helper()
	_, resp, err := websocket.DefaultDialer.Dial(url, nil)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	defer resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	p := problemOf(t, resp)
	require.Equal(t, "rate_limited", p["error"].(map[string]any)["code"])
	require.EqualValues(t, 5, p["error"].(map[string]any)["retryAfter"])
	require.Contains(t, p["detail"], "from your address")
}

// One address may hold MaxConnsPerIP sockets of a list: the next one is
// refused with 429 while other addresses, and the same address in other
// lists, still connect, and a closed socket gives its slot back. IPv6
// addresses count by their /64.
func TestConnsPerIPCap(t *testing.T) {
	t.Parallel()
	e, from := ipEnv(t, Config{MaxConnsPerIP: 2})
	for _, tc := range []struct {
		name          string
		same          [3]string // three addresses counted as one
		other, other2 string    // addresses counted apart from them
	}{
		{"IPv4", [3]string{"192.0.2.1", "192.0.2.1", "::ffff:192.0.2.1"}, "192.0.2.2", "192.0.2.3"},
		{"IPv6 /64", [3]string{"2001:db8:0:1::1", "2001:db8:0:1::2", "2001:db8:0:1:ffff:ffff:ffff:ffff"}, "2001:db8:0:2::1", "2001:db8::1"},
	} {
		first := dialURL(t, from("L1", tc.same[0]))
		dialURL(t, from("L1", tc.same[1]))
		requireIPRefused(t, from("L1", tc.same[2]))
		dialURL(t, from("L1", tc.other))
		dialURL(t, from("L1", tc.other2))
		dialURL(t, from("L2", tc.same[2]))

		key := yaps.AddressKey(tc.same[0])
		require.Equal(t, 2, e.perIP("L1")[key], tc.name)
		require.NoError(t, first.ws.Close())
		require.Eventually(t, func() bool { return e.perIP("L1")[key] == 1 }, 2*time.Second, 5*time.Millisecond, tc.name)
		last := dialURL(t, from("L1", tc.same[2]))
		requireIPRefused(t, from("L1", tc.same[0]))
		require.NoError(t, last.ws.Close())
	}
}

// Every path that frees a connection gives its address's slot back: a
// closed socket, and an upgrade that fails after the slot was taken.
func TestConnsPerIPReleased(t *testing.T) {
	t.Parallel()
	e, from := ipEnv(t, Config{MaxConnsPerIP: 1})
	const ip = "198.51.100.7"

	// A client that sends a frame before the handshake completed is
	// admitted, then dropped without an answer (server.go: Buffered).
	u, err := url.Parse(from("L1", ip))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		nc, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host)
		_, err = nc.Write(append([]byte(req), AppendQueryAwareness(nil)...)) // one write: the frame is buffered with the request
		require.NoError(t, err)
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
		got, err := io.ReadAll(nc)
		require.NoError(t, err)
		require.Empty(t, got, "closed without a 101")
		nc.Close()
		require.Eventually(t, func() bool { return len(e.perIP("L1")) == 0 }, 2*time.Second, 5*time.Millisecond)
		require.NotNil(t, e.srv.room("L1"), "the room is gone: no count was checked")
	}

	// The slot is free: one socket, then a refusal, then one again after
	// it closed; the room ends with no count left.
	for i := 0; i < 3; i++ {
		c := dialURL(t, from("L1", ip))
		requireIPRefused(t, from("L1", ip))
		require.NoError(t, c.ws.Close())
		require.Eventually(t, func() bool { return len(e.perIP("L1")) == 0 }, 2*time.Second, 5*time.Millisecond)
		require.NotNil(t, e.srv.room("L1"), "the room is gone: no count was checked")
	}
	require.Equal(t, 0, e.srv.Stats().Conns)
	require.Empty(t, e.serverPerIP())
}

// Leaving twice gives the address slot back once: the other connection of
// the address still counts.
func TestConnsPerIPLeaveTwice(t *testing.T) {
	t.Parallel()
	e, from := ipEnv(t, Config{MaxConnsPerIP: 2})
	const ip = "198.51.100.9"
	dialURL(t, from("L1", ip))
	dialURL(t, from("L1", ip))
	rm := e.srv.room("L1")
	require.Eventually(t, func() bool { return len(*rm.snapshot.Load()) == 2 }, 2*time.Second, 5*time.Millisecond)
	var gone *conn
	for _, c := range *rm.snapshot.Load() {
		gone = c // either one: both are from ip
	}
	rm.leave(gone)
	rm.leave(gone)
	require.Equal(t, 1, e.perIP("L1")[ip])
	// One slot came back: one more socket, then the cap.
	dialURL(t, from("L1", ip))
	requireIPRefused(t, from("L1", ip))
}

func TestConnsPerIPConfig(t *testing.T) {
	t.Parallel()
	require.Equal(t, 64, Config{}.WithDefaults().MaxConnsPerIP)
	require.Equal(t, 1_000, Config{}.WithDefaults().MaxConnsPerIPTotal)
	for _, n := range []int{-1, -64} {
		_, err := newServer(newFake(), Config{MaxConnsPerIP: n})
		require.ErrorContains(t, err, "MaxConnsPerIP", n)
		_, err = newServer(newFake(), Config{MaxConnsPerIPTotal: n})
		require.ErrorContains(t, err, "MaxConnsPerIPTotal", n)
	}
	_, err := newServer(newFake(), Config{MaxConnsPerIP: 1})
	require.NoError(t, err)
}

func TestUnfinishedConfig(t *testing.T) {
	t.Parallel()
	def := Config{}.WithDefaults()
	require.Equal(t, 60*time.Second, def.MessageReadTimeout)
	require.Equal(t, int64(32<<20), def.MaxUnfinishedBytesPerIP)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MessageReadTimeout: -time.Second}, "MessageReadTimeout"},
		{Config{MaxUnfinishedBytesPerIP: -1}, "MaxUnfinishedBytesPerIP"},
		{Config{MaxUnfinishedBytesPerIP: 4 << 20}, "MaxUnfinishedBytesPerIP"}, // below the 8 MiB step 2
		{Config{MaxMessageSize: 2 << 20, MaxSyncStep2Size: 1, MaxUnfinishedBytesPerIP: 1 << 20}, "MaxUnfinishedBytesPerIP"},
	} {
		_, err := newServer(newFake(), tc.cfg)
		require.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
	}
	_, err := newServer(newFake(), Config{MaxMessageSize: 1 << 20, MaxSyncStep2Size: 1, MaxUnfinishedBytesPerIP: 1 << 20})
	require.NoError(t, err)
}

// serverPerIP returns the process-wide per-address counts.
func (e *testEnv) serverPerIP() map[string]int {
	e.srv.mu.RLock()
	defer e.srv.mu.RUnlock()
	return maps.Clone(e.srv.perIP)
}

// One address spreading over lists holds at most MaxConnsPerIPTotal
// sockets of the process (found in review: it could take every slot of
// MaxConnsPerProcess, and every other client got 503); other addresses
// still connect, and a closed socket gives the slot back.
func TestConnsPerIPTotalCap(t *testing.T) {
	t.Parallel()
	e, from := ipEnv(t, Config{MaxConnsPerIP: 4, MaxConnsPerIPTotal: 6})
	const ip = "203.0.113.7"
	var first *client
	for i := range 4 {
		c := dialURL(t, from("L1", ip))
		if i == 0 {
			first = c
		}
	}
	dialURL(t, from("L2", ip))
	dialURL(t, from("L2", ip))
	requireIPRefused(t, from("L2", ip)) // 2 of its 4 on L2, but 6 in all
	dialURL(t, from("L2", "198.51.100.1"))
	require.Equal(t, 6, e.serverPerIP()[ip])

	require.NoError(t, first.ws.Close())
	require.Eventually(t, func() bool { return e.serverPerIP()[ip] == 5 }, 2*time.Second, 5*time.Millisecond)
	last := dialURL(t, from("L2", ip))
	requireIPRefused(t, from("L2", ip))
	require.NoError(t, last.ws.Close())
	require.Eventually(t, func() bool { return e.serverPerIP()[ip] == 5 }, 2*time.Second, 5*time.Millisecond)
}
