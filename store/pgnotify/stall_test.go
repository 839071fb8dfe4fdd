package pgnotify_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/pgnotify"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// stallProxy forwards to upstream until stalled; then the connections it
// stalls forward nothing more in either direction and close nothing (a
// half-open link: a NAT or load balancer that dropped the flow). With
// onlyListeners, only the Notifiers' listening connections (their startup
// message names an application "yaps-pgnotify-...") stall.
type stallProxy struct {
	ln            net.Listener
	onlyListeners bool
	stalled       atomic.Bool
}

// stallDSN returns a proxy to dsn's server and dsn pointing at it.
func stallDSN(t *testing.T, dsn string, onlyListeners bool) (*stallProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, onlyListeners: onlyListeners}
	upstream := u.Host
	var mu sync.Mutex
	var all []net.Conn
	pipe := func(dst, src net.Conn, stalls bool, first []byte) {
		if len(first) > 0 {
			if _, err := dst.Write(first); err != nil {
				return
			}
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if stalls && p.stalled.Load() {
				if err != nil {
					return // dst stays open: the other side never learns
				}
				continue
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			first := make([]byte, 4096)
			n, err := c.Read(first) // the startup message
			if err != nil {
				c.Close()
				continue
			}
			first = first[:n]
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			all = append(all, c, up)
			mu.Unlock()
			stalls := !p.onlyListeners || bytes.Contains(first, []byte("yaps-pgnotify-"))
			go pipe(up, c, stalls, first)
			go pipe(c, up, stalls, nil)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range all {
			c.Close()
		}
		mu.Unlock()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

// A listening connection gone half-open (its backend is gone, the process
// never hears of it) is noticed at the next presence check, not after
// PingInterval (30 s) and the ping's timeout: the other processes stop
// publishing to it at once (it is no longer listed), so the Service must
// hear NoticeLost, and NoticeResync once listening again (pgnotify review).
func TestHalfOpenListenerNoticed(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	p, proxied := stallDSN(t, dsn, true)
	pub := open(t, pgnotify.Config{DSN: dsn})
	sub := open(t, pgnotify.Config{DSN: proxied, PeerCheckInterval: 100 * time.Millisecond}) // PingInterval: 30 s
	waitPeers(t, pub, sub)
	in := listen(t, sub)
	time.Sleep(300 * time.Millisecond) // a presence check saw the listening connection

	p.stalled.Store(true)
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1`,
		"yaps-pgnotify-"+sub.ID()+"-%")
	require.NoError(t, err)
	next := func(what string) yaps.Notice {
		t.Helper()
		select {
		case x := <-in:
			return x
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s within 5 s of the listening backend's end", what)
			return yaps.Notice{}
		}
	}
	require.Equal(t, yaps.NoticeLost, next("NoticeLost").Kind)
	p.stalled.Store(false)
	require.Equal(t, yaps.NoticeResync, next("NoticeResync").Kind)
}

// Close returns within about a second when the network path to Postgres
// stalls; pgxpool alone waited 15 s for a cancelled query's cancel request
// (pgnotify review).
func TestCloseWhileStalled(t *testing.T) {
	t.Parallel()
	p, proxied := stallDSN(t, storetest.PostgresDSN(t), false)
	n, err := pgnotify.Open(context.Background(), pgnotify.Config{DSN: proxied, PeerCheckInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	p.stalled.Store(true)
	time.Sleep(300 * time.Millisecond) // a presence check now hangs
	start := time.Now()
	require.NoError(t, n.Close())
	require.Less(t, time.Since(start), 5*time.Second)
}
