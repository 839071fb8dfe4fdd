package ysync

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
)

// TestIdleConnectionsRSS opens many idle sync connections against a server
// in a child process and reports the child's RSS. Opt-in, because it needs
// ~2 file descriptors per connection:
//
//	YAPS_TEST_IDLE_CONNS=10000 go test -run TestIdleConnectionsRSS -v ./sync/ysync
//
// The target (issue 4) is 10,000 idle connections under 300 MB RSS.
func TestIdleConnectionsRSS(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("YAPS_TEST_IDLE_CONNS"))
	if n <= 0 {
		t.Skip("set YAPS_TEST_IDLE_CONNS=10000 to measure idle connection memory")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "YSYNC_IDLE_SERVER=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var addr string
	var lists [][2]string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "LIST" {
			lists = append(lists, [2]string{f[1], f[2]})
		} else if len(f) == 2 && f[0] == "ADDR" {
			addr = f[1]
			break
		}
	}
	require.NotEmpty(t, addr)
	base := rssKB(t, cmd.Process.Pid)

	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := 0; i < n; i++ {
		l := lists[i%len(lists)]
		c, err := upgradeRaw(addr, httpapi.DefaultPrefix+"/lists/"+l[0]+"/sync?k="+l[1])
		require.NoError(t, err, "connection %d", i)
		conns = append(conns, c)
	}
	t.Logf("opened %d connections in %v", n, time.Since(start).Round(time.Millisecond))
	time.Sleep(time.Second)
	t.Logf("server RSS right after connecting: %d MB", rssKB(t, cmd.Process.Pid)/1024)
	// Steady state: an idle Go server collects at least every two minutes
	// (which also shrinks the stacks grown during the handshake); ask the
	// child to do it now.
	_, err = fmt.Fprintln(stdin, "GC")
	require.NoError(t, err)
	require.True(t, sc.Scan())
	t.Log(sc.Text())
	rss := rssKB(t, cmd.Process.Pid)
	t.Logf("server RSS: %d MB before, %d MB with %d idle connections (%.1f KB per connection)",
		base/1024, rss/1024, n, float64(rss-base)/float64(n))
	if n >= 10_000 {
		require.Less(t, rss/1024, int64(300), "RSS with %d idle connections", n)
	}
}

// upgradeRaw performs a WebSocket handshake on a bare TCP connection and
// then never reads again, so the client side costs almost nothing.
func upgradeRaw(addr, path string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr, base64.StdEncoding.EncodeToString(key))
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return c, nil
}

func rssKB(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestIdleServerProcess is the child of TestIdleConnectionsRSS: a whole
// server (SQLite, service, HTTP API, sync) with 100 lists.
func TestIdleServerProcess(t *testing.T) {
	if os.Getenv("YSYNC_IDLE_SERVER") != "1" {
		t.Skip("child process of TestIdleConnectionsRSS")
	}
	// The parent spreads YAPS_TEST_IDLE_CONNS connections from 127.0.0.1
	// over 100 lists: 100 per list for 10,000, past the default
	// MaxConnsPerIP. Only the per-room cap applies here.
	st := newStack(t, Config{MaxConnsPerIP: Config{}.WithDefaults().MaxConnsPerRoom, MaxConnsPerIPTotal: Config{}.WithDefaults().MaxConnsPerProcess})
	for i := 0; i < 100; i++ {
		ref, owner := st.newList()
		fmt.Printf("LIST %s %s\n", ref, owner)
	}
	fmt.Printf("ADDR %s\n", strings.TrimPrefix(st.ts.URL, "http://"))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() { // until the parent closes stdin
		for i := 0; i < 3; i++ {
			runtime.GC()
		}
		debug.FreeOSMemory()
		if path := os.Getenv("YSYNC_HEAPPROF"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("MEM heapInuse=%dMB stackInuse=%dMB sys=%dMB goroutines=%d\n",
			ms.HeapInuse>>20, ms.StackInuse>>20, ms.Sys>>20, runtime.NumGoroutine())
	}
}
