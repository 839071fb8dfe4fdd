package syncbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/yaps-dev/yaps/sync/ysync"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Dialect is how a server frames the y-websocket messages.
type Dialect int

const (
	// YWebsocket: one y-protocols message per frame, room in the URL
	// (yaps, @y/websocket-server).
	YWebsocket Dialect = iota
	// Hocuspocus: every message starts with varString(document name); the
	// client authenticates each document first (@hocuspocus/server).
	Hocuspocus
)

// Target is one server under test.
type Target struct {
	Name    string
	Dialect Dialect
	// RoomURL returns the WebSocket URL of room i and, for Hocuspocus,
	// the document name. It may create the room (yaps creates a list).
	RoomURL func(ctx context.Context, i int) (url, doc string, err error)
	// PID of the server process; 0 skips the server CPU and RSS figures.
	PID int
}

// Scenario is one workload.
type Scenario struct {
	Rooms, Clients, Updates int
	// Interval between a client's updates; 0 sends them back to back.
	Interval time.Duration
	// Timeout for the whole run after connecting. Default: 2 minutes.
	Timeout time.Duration
}

func (s Scenario) String() string {
	pace := "burst"
	if s.Interval > 0 {
		pace = "every " + s.Interval.String()
	}
	return fmt.Sprintf("%d rooms × %d clients × %d updates, %s", s.Rooms, s.Clients, s.Updates, pace)
}

// Result is what one run measured.
type Result struct {
	Target   string
	Scenario Scenario
	// Expected and Delivered count deliveries (see the package doc).
	Expected, Delivered int64
	Elapsed             time.Duration // first send to last delivery
	PerSecond           float64       // deliveries per second
	P50, P99            time.Duration // delivery latency
	// ServerCPU is the server's user+system CPU during the run;
	// CPUPerDelivery divides it by Delivered.
	ServerCPU      time.Duration
	CPUPerDelivery time.Duration
	// ServerRSS is the server's resident set at the end of the run, and
	// ServerPeakRSS its high-water mark since it started.
	ServerRSS, ServerPeakRSS int64
	// ClientCPU is this process's CPU during the run (the load generator).
	ClientCPU time.Duration
}

// String formats r on one line.
func (r Result) String() string {
	return fmt.Sprintf("%-20s %-48s %7d/%-7d deliveries %8.0f/s  p50 %-9v p99 %-9v  server CPU %-8v = %6.1f µs/delivery  RSS %4d MB (peak %d)",
		r.Target, r.Scenario, r.Delivered, r.Expected, r.PerSecond,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond),
		r.ServerCPU.Round(time.Millisecond), float64(r.CPUPerDelivery.Nanoseconds())/1e3,
		r.ServerRSS>>20, r.ServerPeakRSS>>20)
}

type client struct {
	idx   int
	ws    *websocket.Conn
	doc   string // Hocuspocus document name
	ydoc  *yjs.Doc
	sent  []atomic.Int64 // send time per update, unix nanos
	wmu   sync.Mutex
	frame []byte
}

// write sends one y-protocols message in the target's framing.
func (c *client) write(d Dialect, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if d == Hocuspocus {
		c.frame = append(ysync.AppendVarBytes(c.frame[:0], []byte(c.doc)), msg...)
		msg = c.frame
	}
	return c.ws.WriteMessage(websocket.BinaryMessage, msg)
}

// Run runs sc against t and measures it.
func Run(ctx context.Context, t Target, sc Scenario) (Result, error) {
	res := Result{Target: t.Name, Scenario: sc}
	if sc.Rooms < 1 || sc.Clients < 2 || sc.Updates < 1 {
		return res, errors.New("syncbench: need at least 1 room, 2 clients and 1 update")
	}
	if sc.Timeout == 0 {
		sc.Timeout = 2 * time.Minute
	}
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 4096}
	var clients []*client
	defer func() {
		for _, c := range clients {
			c.ws.Close()
		}
	}()
	for r := 0; r < sc.Rooms; r++ {
		u, doc, err := t.RoomURL(ctx, r)
		if err != nil {
			return res, fmt.Errorf("room %d: %w", r, err)
		}
		for i := 0; i < sc.Clients; i++ {
			ws, resp, err := dialer.DialContext(ctx, u, nil)
			if err != nil {
				return res, fmt.Errorf("connect to room %d: %w", r, err)
			}
			resp.Body.Close()
			c := &client{idx: len(clients), ws: ws, doc: doc, ydoc: yjs.NewDoc(), sent: make([]atomic.Int64, sc.Updates)}
			clients = append(clients, c)
			if t.Dialect == Hocuspocus {
				// Auth: type 2, token 0, token "", provider version.
				auth := ysync.AppendVarUint(nil, 2)
				auth = ysync.AppendVarUint(auth, 0)
				auth = ysync.AppendVarBytes(auth, nil)
				if err := c.write(t.Dialect, auth); err != nil {
					return res, err
				}
			}
		}
	}

	res.Expected = int64(sc.Rooms * sc.Updates * sc.Clients * (sc.Clients - 1))
	var delivered atomic.Int64
	done := make(chan struct{})
	var latMu sync.Mutex
	lats := make([]time.Duration, 0, res.Expected)
	var readers sync.WaitGroup
	for _, c := range clients {
		readers.Add(1)
		go func() {
			defer readers.Done()
			local := make([]time.Duration, 0, sc.Updates*sc.Clients)
			defer func() {
				latMu.Lock()
				lats = append(lats, local...)
				latMu.Unlock()
			}()
			for {
				_, frame, err := c.ws.ReadMessage()
				if err != nil {
					return
				}
				now := time.Now().UnixNano()
				scanMarkers(frame, func(src, u int) {
					if src == c.idx || src >= len(clients) || u >= sc.Updates {
						return
					}
					if sent := clients[src].sent[u].Load(); sent > 0 {
						local = append(local, time.Duration(now-sent))
					}
					if delivered.Add(1) == res.Expected {
						close(done)
					}
				})
			}
		}()
	}
	// Let handshakes, auth and initial sync settle before measuring.
	time.Sleep(300 * time.Millisecond)

	cpu0, _ := procCPU(t.PID)
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	var writers sync.WaitGroup
	for _, c := range clients {
		writers.Add(1)
		go func() {
			defer writers.Done()
			var out [][]byte
			un := c.ydoc.OnUpdate(func(u []byte, _ any) { out = append(out, u) })
			defer un()
			text := c.ydoc.GetText("bench")
			var msg []byte
			for u := 0; u < sc.Updates; u++ {
				if u > 0 && sc.Interval > 0 {
					time.Sleep(sc.Interval)
				}
				text.Insert(text.Len(), "~"+strconv.Itoa(c.idx)+"."+strconv.Itoa(u)+"~", nil)
				c.sent[u].Store(time.Now().UnixNano())
				for _, upd := range out {
					msg = ysync.AppendUpdate(msg[:0], upd)
					if c.write(t.Dialect, msg) != nil {
						return
					}
				}
				out = out[:0]
			}
		}()
	}
	timeout := time.NewTimer(sc.Timeout)
	defer timeout.Stop()
	var err error
	select {
	case <-done:
	case <-timeout.C:
		err = fmt.Errorf("syncbench: timeout after %v", sc.Timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	res.Elapsed = time.Since(start)
	cpu1, cpuErr := procCPU(t.PID)
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	writers.Wait()
	for _, c := range clients {
		c.ws.Close()
	}
	readers.Wait()
	clients = nil

	res.Delivered = delivered.Load()
	res.PerSecond = float64(res.Delivered) / res.Elapsed.Seconds()
	slices.Sort(lats)
	if n := len(lats); n > 0 {
		res.P50 = lats[n/2]
		res.P99 = lats[min(n-1, n*99/100)]
	}
	res.ClientCPU = time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	if t.PID > 0 && cpuErr == nil {
		res.ServerCPU = cpu1 - cpu0
		if res.Delivered > 0 {
			res.CPUPerDelivery = res.ServerCPU / time.Duration(res.Delivered)
		}
		res.ServerRSS, res.ServerPeakRSS = procRSS(t.PID)
	}
	return res, err
}

// scanMarkers calls fn for every "~client.update~" marker in frame. The
// frame is binary, so a '~' byte may also be part of a length or clock:
// a candidate that does not parse restarts the scan at its closing '~'.
func scanMarkers(frame []byte, fn func(client, update int)) {
	rest := frame
	for {
		i := bytes.IndexByte(rest, '~')
		if i < 0 {
			return
		}
		rest = rest[i+1:]
		j := bytes.IndexByte(rest, '~')
		if j < 0 {
			return
		}
		c, u, ok := parseMarker(rest[:j])
		if !ok {
			rest = rest[j:]
			continue
		}
		fn(c, u)
		rest = rest[j+1:]
	}
}

func parseMarker(b []byte) (client, update int, ok bool) {
	i := bytes.IndexByte(b, '.')
	if i <= 0 || i == len(b)-1 || len(b) > 20 {
		return 0, 0, false
	}
	for _, ch := range b {
		if ch != '.' && (ch < '0' || ch > '9') {
			return 0, 0, false
		}
	}
	c, err1 := strconv.Atoi(string(b[:i]))
	u, err2 := strconv.Atoi(string(b[i+1:]))
	return c, u, err1 == nil && err2 == nil
}

// procCPU returns a process's user+system CPU time from /proc.
func procCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, nil
}

// procRSS returns a process's VmRSS and VmHWM in bytes.
func procRSS(pid int) (rss, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// YapsRooms returns a RoomURL for a yaps server at apiBase (e.g.
// "http://127.0.0.1:4736/api/v1"): each room is a new list, joined with
// its owner code.
func YapsRooms(apiBase string) func(ctx context.Context, i int) (string, string, error) {
	return func(ctx context.Context, i int) (string, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiBase+"/lists", strings.NewReader(fmt.Sprintf(`{"title":"bench %d"}`, i)))
		if err != nil {
			return "", "", err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		var out struct {
			Ref       string `json:"ref"`
			OwnerCode string `json:"ownerCode"`
		}
		if resp.StatusCode != http.StatusCreated {
			return "", "", fmt.Errorf("POST /lists: status %d", resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return "", "", err
		}
		ws := "ws" + strings.TrimPrefix(apiBase, "http")
		return ws + "/lists/" + out.Ref + "/sync?k=" + out.OwnerCode, "", nil
	}
}

// Peer is a running npm peer server.
type Peer struct {
	Target
	cmd *exec.Cmd
}

// StartPeer starts interop/sync/peer-server.mjs (kind "ywebsocket" or
// "hocuspocus") with node from interopDir, waits until it listens and
// returns it as a Target.
func StartPeer(ctx context.Context, node, interopDir, kind string) (*Peer, error) {
	cmd := exec.Command(node, filepath.Join(interopDir, "sync", "peer-server.mjs"), kind, "0")
	cmd.Dir = interopDir
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if port, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- port
			}
		}
	}()
	var port string
	select {
	case port = <-ready:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("syncbench: %s did not start", kind)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, ctx.Err()
	}
	p := &Peer{cmd: cmd}
	p.PID = cmd.Process.Pid
	base := "ws://127.0.0.1:" + port
	switch kind {
	case "ywebsocket":
		p.Name = "@y/websocket-server"
		p.Dialect = YWebsocket
		p.RoomURL = func(_ context.Context, i int) (string, string, error) {
			return fmt.Sprintf("%s/room-%d", base, i), "", nil
		}
	case "hocuspocus":
		p.Name = "@hocuspocus/server"
		p.Dialect = Hocuspocus
		p.RoomURL = func(_ context.Context, i int) (string, string, error) {
			return base, fmt.Sprintf("room-%d", i), nil
		}
	default:
		p.Stop()
		return nil, fmt.Errorf("syncbench: unknown peer %q", kind)
	}
	return p, nil
}

// Stop kills the peer server.
func (p *Peer) Stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}
