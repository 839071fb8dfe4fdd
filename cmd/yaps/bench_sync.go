package main

// `yaps bench sync`: the sync load benchmark of issue 4. R rooms × C clients,
// each client sending U small Yjs updates over the y-websocket protocol,
// against `yaps serve` (SQLite, every update persisted before it is relayed)
// and the npm peers @y/websocket-server and @hocuspocus/server (in memory),
// each started as a subprocess on a free loopback port, one at a time. It
// reports delivered updates per second, p50/p99 delivery latency, the
// server's CPU per delivered update (its CPU-time clock, procCPU) and its
// RSS (VmHWM, VmRSS from /proc/PID/status), and measures N idle connections
// per server. See docs/benchmarks.md, section "Sync".
//
// Every client is a real Yjs client (yaps/yjs): it does the sync handshake
// (answers the server's step 1 with a step 2, sends its own step 1 and waits
// for the step 2), creates one task yap that is valid under the list schema
// (RULINGS R9), then types "~<client>.<n>~" markers into the yap's content
// Y.Text, one insert per update. A receiver does not apply what it receives;
// it finds the markers in the update frames (every server relays them inside
// a sync update message, possibly merged with others), which keeps the load
// generator cheap. A delivery is one update reaching one other client of its
// room; a run delivers R × C × (C-1) × U.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

func init() {
	benchCommands["sync"] = command{
		summary: "sync load test: rooms × clients × updates and idle connections, yaps vs @y/websocket-server and @hocuspocus/server",
		run:     runBenchSync,
	}
}

// Sync bench target names.
const (
	syncTargetYaps       = "yaps"
	syncTargetYWebsocket = "y-websocket"
	syncTargetHocuspocus = "hocuspocus"
)

// syncDialect is how a server frames y-protocols messages.
type syncDialect int

const (
	// dialectYWebsocket: one message per binary frame, the room in the URL
	// (yaps, @y/websocket-server).
	dialectYWebsocket syncDialect = iota
	// dialectHocuspocus: every message is prefixed with varString(document
	// name), several documents may share a socket, and each document must
	// be authenticated first (auth message type 2, subtype 0 = token). The
	// server answers a step 1 with a SyncReply (type 4, a sync message that
	// must not trigger another step 1) and acknowledges every update with a
	// SyncStatus (type 8). @hocuspocus/server does not speak plain
	// y-websocket: a frame without the name prefix is read as a document
	// name and the socket never gets past authentication.
	dialectHocuspocus
)

// y-protocols message types; Hocuspocus adds its own above 3.
const (
	ymsgSync           = 0
	ymsgAwareness      = 1
	ymsgAuth           = 2
	ymsgQueryAwareness = 3
	hpMsgSyncReply     = 4
	hpMsgSyncStatus    = 8

	ysyncStep1  = 0
	ysyncStep2  = 1
	ysyncUpdate = 2
)

// syncWorkload is R rooms × C clients × U updates.
type syncWorkload struct{ Rooms, Clients, Updates int }

func (w syncWorkload) String() string {
	return fmt.Sprintf("%dx%dx%d", w.Rooms, w.Clients, w.Updates)
}

// deliveries is the number of deliveries a complete run makes.
func (w syncWorkload) deliveries() int64 {
	return int64(w.Rooms) * int64(w.Clients) * int64(w.Clients-1) * int64(w.Updates)
}

func parseSyncWorkload(s string) (syncWorkload, error) {
	f := strings.Split(strings.ReplaceAll(s, "×", "x"), "x")
	if len(f) != 3 {
		return syncWorkload{}, fmt.Errorf("workload %q: want ROOMSxCLIENTSxUPDATES", s)
	}
	var n [3]int
	for i, p := range f {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 {
			return syncWorkload{}, fmt.Errorf("workload %q: %q is not a positive number", s, p)
		}
		n[i] = v
	}
	w := syncWorkload{n[0], n[1], n[2]}
	if w.Clients < 2 {
		return w, fmt.Errorf("workload %q: a room needs at least 2 clients", s)
	}
	return w, nil
}

// --- wire format -------------------------------------------------------

func appendVarUint(dst []byte, n uint64) []byte {
	for n >= 0x80 {
		dst = append(dst, byte(n)|0x80)
		n >>= 7
	}
	return append(dst, byte(n))
}

func appendVarBytes(dst, b []byte) []byte {
	return append(appendVarUint(dst, uint64(len(b))), b...)
}

func readVarUint(b []byte) (uint64, []byte, error) {
	var n uint64
	for i := 0; i < len(b) && i < 8; i++ {
		n |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return n, b[i+1:], nil
		}
	}
	return 0, nil, errors.New("bad varuint")
}

func readVarBytes(b []byte) ([]byte, []byte, error) {
	n, rest, err := readVarUint(b)
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(rest)) {
		return nil, nil, errors.New("length past the end of the frame")
	}
	return rest[:n], rest[n:], nil
}

// syncFrame frames one y-protocols message for dialect d.
func syncFrame(d syncDialect, doc string, msg []byte) []byte {
	if d != dialectHocuspocus {
		return msg
	}
	return append(appendVarBytes(make([]byte, 0, len(doc)+len(msg)+2), []byte(doc)), msg...)
}

// syncMessage builds a sync message (step 1, step 2 or update).
func syncMessage(syncType uint64, payload []byte) []byte {
	b := make([]byte, 0, len(payload)+6)
	b = appendVarUint(b, ymsgSync)
	b = appendVarUint(b, syncType)
	return appendVarBytes(b, payload)
}

// hocuspocusAuth is the auth message a Hocuspocus client sends first for
// each document: type 2, subtype 0 (token), the token.
func hocuspocusAuth(token string) []byte {
	b := appendVarUint(nil, ymsgAuth)
	b = appendVarUint(b, 0)
	return appendVarBytes(b, []byte(token))
}

// wireMsg is one received message. For sync messages (Hocuspocus SyncReply
// included) Type is ymsgSync and Payload the state vector or update; other
// types are reported with no payload.
type wireMsg struct {
	Doc      string
	Type     uint64
	SyncType uint64
	Payload  []byte
}

func parseSyncFrame(d syncDialect, frame []byte) (wireMsg, error) {
	var m wireMsg
	rest := frame
	if d == dialectHocuspocus {
		doc, r, err := readVarBytes(rest)
		if err != nil {
			return m, fmt.Errorf("document name: %w", err)
		}
		m.Doc, rest = string(doc), r
	}
	t, rest, err := readVarUint(rest)
	if err != nil {
		return m, fmt.Errorf("message type: %w", err)
	}
	m.Type = t
	if d == dialectHocuspocus && t == hpMsgSyncReply {
		m.Type = ymsgSync
	}
	if m.Type != ymsgSync {
		return m, nil
	}
	if m.SyncType, rest, err = readVarUint(rest); err != nil {
		return m, fmt.Errorf("sync type: %w", err)
	}
	if m.SyncType > ysyncUpdate {
		return m, fmt.Errorf("unknown sync type %d", m.SyncType)
	}
	if m.Payload, _, err = readVarBytes(rest); err != nil {
		return m, fmt.Errorf("sync payload: %w", err)
	}
	return m, nil
}

// --- markers -----------------------------------------------------------

// appendMarker appends "~client.n~". Update 0 is the one that creates the
// client's yap (setup); 1..U are measured.
func appendMarker(dst []byte, client, n int) []byte {
	dst = append(dst, '~')
	dst = strconv.AppendInt(dst, int64(client), 10)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '~')
}

// scanMarkers calls fn for every "~client.n~" in b. b is a binary update, so
// a '~' may also be a length or clock byte: a candidate that does not parse
// restarts the scan at its closing '~'.
func scanMarkers(b []byte, fn func(client, n int)) {
	for {
		i := bytes.IndexByte(b, '~')
		if i < 0 {
			return
		}
		b = b[i+1:]
		j := bytes.IndexByte(b, '~')
		if j < 0 {
			return
		}
		if c, n, ok := parseMarker(b[:j]); ok {
			fn(c, n)
			b = b[j+1:]
		} else {
			b = b[j:]
		}
	}
}

func parseMarker(b []byte) (client, n int, ok bool) {
	dot := bytes.IndexByte(b, '.')
	if dot <= 0 || dot == len(b)-1 || len(b) > 15 {
		return 0, 0, false
	}
	num := func(p []byte) (int, bool) {
		v := 0
		for _, ch := range p {
			if ch < '0' || ch > '9' {
				return 0, false
			}
			v = v*10 + int(ch-'0')
		}
		return v, true
	}
	c, ok1 := num(b[:dot])
	u, ok2 := num(b[dot+1:])
	return c, u, ok1 && ok2
}

// --- statistics --------------------------------------------------------

// syncProcMem returns VmRSS and VmHWM of pid in bytes.
func syncProcMem(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	return parseSyncProcStatus(string(b))
}

func parseSyncProcStatus(s string) (rss, hwm int64) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// --- targets -----------------------------------------------------------

type syncTarget struct {
	name    string
	dialect syncDialect
	pid     int
	// room returns the WebSocket URL of room i and, for Hocuspocus, the
	// document name; for yaps it creates a list and an editor code.
	room func(ctx context.Context, i int) (url, doc string, err error)
	stop func()
}

type syncConfig struct {
	yapsBin, node, interop, tmp string
	stderr                      io.Writer
}

func syncFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// syncSpawn starts a server subprocess logging to tmp/name-N.log.
func syncSpawn(cfg syncConfig, name string, bin string, args ...string) (*exec.Cmd, func(), error) {
	logf, err := os.CreateTemp(cfg.tmp, name+"-*.log")
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(waited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	return cmd, stop, nil
}

// syncWaitTCP waits until addr accepts connections.
func syncWaitTCP(ctx context.Context, addr string, cmd *exec.Cmd) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cmd.ProcessState != nil {
			return errors.New("server exited")
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not start listening", addr)
}

func startSyncTarget(ctx context.Context, cfg syncConfig, name string) (*syncTarget, error) {
	port, err := syncFreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	t := &syncTarget{name: name}
	var cmd *exec.Cmd
	switch name {
	case syncTargetYaps:
		db, err := os.CreateTemp(cfg.tmp, "yaps-*.db")
		if err != nil {
			return nil, err
		}
		db.Close()
		cmd, t.stop, err = syncSpawn(cfg, name, cfg.yapsBin, "serve", "--addr", addr, "--db", "sqlite:"+db.Name(), "--rate-limit", "off",
			// Every benchmark client shares 127.0.0.1; idle rooms hold 100.
			"--sync-conns-per-ip", "100000", "--sync-conns-per-ip-total", "100000")
		if err != nil {
			return nil, err
		}
		api := "http://" + addr + "/api/v1"
		t.room = func(ctx context.Context, i int) (string, string, error) {
			return yapsSyncRoom(ctx, api, i)
		}
	case syncTargetYWebsocket:
		cmd, t.stop, err = syncSpawn(cfg, name, cfg.node, filepath.Join(cfg.interop, "bench", "ws-server.mjs"), strconv.Itoa(port))
		if err != nil {
			return nil, err
		}
		t.room = func(_ context.Context, i int) (string, string, error) {
			return fmt.Sprintf("ws://%s/room-%d", addr, i), "", nil
		}
	case syncTargetHocuspocus:
		cmd, t.stop, err = syncSpawn(cfg, name, cfg.node, filepath.Join(cfg.interop, "bench", "hocuspocus-server.mjs"), strconv.Itoa(port))
		if err != nil {
			return nil, err
		}
		t.dialect = dialectHocuspocus
		t.room = func(_ context.Context, i int) (string, string, error) {
			return "ws://" + addr + "/", fmt.Sprintf("room-%d", i), nil
		}
	default:
		return nil, fmt.Errorf("unknown target %q (want %s, %s or %s)", name, syncTargetYaps, syncTargetYWebsocket, syncTargetHocuspocus)
	}
	t.pid = cmd.Process.Pid
	if err := syncWaitTCP(ctx, addr, cmd); err != nil {
		t.stop()
		return nil, fmt.Errorf("%s: %w (log in %s)", name, err, cfg.tmp)
	}
	if name == syncTargetYaps {
		// The listener opens before the store is ready on a slow start.
		for i := 0; ; i++ {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if i > 300 {
				t.stop()
				return nil, fmt.Errorf("yaps serve on %s is not healthy", addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return t, nil
}

// yapsSyncRoom creates a list and an editor code and returns the list's
// sync URL for that code.
func yapsSyncRoom(ctx context.Context, api string, i int) (string, string, error) {
	var list struct {
		Ref       string `json:"ref"`
		OwnerCode string `json:"ownerCode"`
	}
	if err := syncPostJSON(ctx, api+"/lists", "", fmt.Sprintf(`{"title":"sync bench %d"}`, i), &list); err != nil {
		return "", "", err
	}
	var perm struct {
		Code string `json:"code"`
	}
	if err := syncPostJSON(ctx, api+"/lists/"+list.Ref+"/permissions", list.OwnerCode, `{"role":"editor"}`, &perm); err != nil {
		return "", "", err
	}
	if list.Ref == "" || perm.Code == "" {
		return "", "", errors.New("yaps: no ref or code in the answer")
	}
	return "ws" + strings.TrimPrefix(api, "http") + "/lists/" + list.Ref + "/sync?k=" + perm.Code, "", nil
}

func syncPostJSON(ctx context.Context, url, bearer, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// --- clients -----------------------------------------------------------

// syncClient is one simulated editor.
type syncClient struct {
	idx     int // global index, the marker's client number
	first   int // global index of the room's first client
	dialect syncDialect
	doc     string
	ws      *websocket.Conn
	wmu     sync.Mutex // serializes writes and guards ydoc

	ydoc   *yjs.Doc
	text   *yjs.Text // content of the client's yap
	out    [][]byte  // updates produced by the current transaction
	synced chan struct{}
	once   sync.Once
	err    atomic.Pointer[error]

	// setupSeen counts other clients' setup updates received.
	setupSeen atomic.Int32
	// unexpected counts update frames without any marker (a compensating
	// update, for example).
	unexpected atomic.Int64
	// verbatim and reencoded count measured update frames holding exactly
	// one marker whose payload is / is not the sender's update byte for byte.
	// merged counts those holding several markers.
	verbatim, reencoded, merged atomic.Int64
	// seen[j*(U+1)+n]: marker n of room client j was received (dedup).
	seen []bool
	lats []time.Duration

	sent      []atomic.Int64 // send time of update n, ns since the run's base
	upd       []atomic.Pointer[[]byte]
	remaining []atomic.Int32 // receivers that have not got update n yet
	window    chan struct{}
}

func (c *syncClient) fail(err error) {
	c.err.CompareAndSwap(nil, &err)
}

func (c *syncClient) send(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendLocked(msg)
}

func (c *syncClient) sendLocked(msg []byte) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return c.ws.WriteMessage(websocket.BinaryMessage, syncFrame(c.dialect, c.doc, msg))
}

// syncDial connects a client and starts its handshake: Hocuspocus auth,
// then our step 1. The reader answers the server's step 1 and closes
// synced on the server's step 2.
func syncDial(ctx context.Context, d *websocket.Dialer, url string, c *syncClient) error {
	ws, resp, err := d.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return fmt.Errorf("%w: %d %s", err, resp.StatusCode, bytes.TrimSpace(b))
		}
		return err
	}
	resp.Body.Close()
	c.ws = ws
	c.synced = make(chan struct{})
	if c.dialect == dialectHocuspocus {
		if err := c.send(hocuspocusAuth("")); err != nil {
			return err
		}
	}
	return c.send(syncMessage(ysyncStep1, c.ydoc.EncodeStateVector()))
}

// handshake handles the sync messages of the initial exchange and reports
// whether m was one of them.
func (c *syncClient) handshake(m wireMsg) bool {
	switch m.SyncType {
	case ysyncStep1:
		c.wmu.Lock()
		defer c.wmu.Unlock()
		upd, err := c.ydoc.EncodeStateAsUpdate(m.Payload)
		if err == nil {
			err = c.sendLocked(syncMessage(ysyncStep2, upd))
		}
		if err != nil {
			c.fail(fmt.Errorf("answering step 1: %w", err))
		}
		return true
	case ysyncStep2:
		c.wmu.Lock()
		err := c.ydoc.ApplyUpdate(m.Payload, "server")
		c.wmu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("applying step 2: %w", err))
		}
		c.once.Do(func() { close(c.synced) })
		return true
	}
	return false
}

// createYap makes the client's task yap (root map "yaps", R9 layout) with
// content "~idx.0~" and returns the update.
func (c *syncClient) createYap(now time.Time) []byte {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := fmt.Sprintf("bench-%d", c.idx)
	ts := yaps.FormatTime(now)
	c.out = c.out[:0]
	c.ydoc.Transact(func(*yjs.Transaction) {
		m := yjs.NewMap()
		m.Set("id", id)
		m.Set("kind", "task")
		m.Set("createdAt", ts)
		m.Set("updatedAt", ts)
		m.Set("content", yjs.NewText(string(appendMarker(nil, c.idx, 0))))
		m.Set("status", "open")
		c.ydoc.GetMap("yaps").Set(id, m)
	}, nil)
	if m, ok := c.ydoc.GetMap("yaps").Get(id); ok {
		if t, ok := m.(*yjs.Map).Get("content"); ok {
			c.text, _ = t.(*yjs.Text)
		}
	}
	return slices.Concat(c.out...)
}

// maxSyncContent keeps the yap's content under yaps.MaxContentLen: past
// it, each update also deletes the oldest marker characters.
const maxSyncContent = yaps.MaxContentLen - 40

// typeMarker inserts marker n at the end of the content and returns the
// update(s) of that transaction, framed as sync update messages.
func (c *syncClient) typeMarker(n int) (msgs [][]byte, update []byte) {
	mk := string(appendMarker(nil, c.idx, n))
	c.out = c.out[:0]
	c.ydoc.Transact(func(*yjs.Transaction) {
		if l := c.text.Len(); l+len(mk) > maxSyncContent {
			c.text.Delete(0, l+len(mk)-maxSyncContent)
		}
		c.text.Insert(c.text.Len(), mk, nil)
	}, nil)
	msgs = make([][]byte, len(c.out))
	for i, u := range c.out {
		msgs[i] = syncMessage(ysyncUpdate, u)
	}
	if len(c.out) == 1 {
		update = c.out[0]
	}
	return msgs, update
}

// --- one run -----------------------------------------------------------

// syncSettle is how long after the last delivery the server's CPU is read.
const syncSettle = 500 * time.Millisecond

type syncOptions struct {
	window   int           // in-flight updates per client; 0: no limit
	interval time.Duration // minimum time between a client's updates
	timeout  time.Duration
}

type syncResult struct {
	Target      string  `json:"target"`
	Workload    string  `json:"workload"`
	Rooms       int     `json:"rooms"`
	Clients     int     `json:"clients"`
	Updates     int     `json:"updates"`
	Window      int     `json:"window"`
	Expected    int64   `json:"expected"`
	Delivered   int64   `json:"delivered"`
	Unexpected  int64   `json:"unexpectedUpdates"`
	Verbatim    int64   `json:"relayedVerbatim"`
	Reencoded   int64   `json:"relayedReencoded"`
	Merged      int64   `json:"relayedMerged"`
	ElapsedMs   float64 `json:"elapsedMs"`
	PerSecond   float64 `json:"deliveredPerSecond"`
	P50Ms       float64 `json:"p50Ms"`
	P99Ms       float64 `json:"p99Ms"`
	ServerCPUMs float64 `json:"serverCpuMs"`
	// CPUResMs is the resolution of the CPU readings: 1e-6 from the
	// process's CPU-time clock, 10 from /proc/PID/stat's ticks.
	CPUResMs      float64 `json:"serverCpuResolutionMs"`
	CPUPerDelivUs float64 `json:"serverCpuPerDeliveryUs"`
	CPUPerUpdUs   float64 `json:"serverCpuPerUpdateUs"`
	RSSMB         float64 `json:"rssMB"`
	PeakRSSMB     float64 `json:"peakRssMB"`
	ClientCPUMs   float64 `json:"clientCpuMs"`
	Error         string  `json:"error,omitempty"`
}

func toMiB(b int64) float64 { return float64(b) / (1 << 20) }

// runSyncWorkload runs w against t: connect and sync every client, create
// the yaps (setup, not measured), then send U updates per client and wait
// until every one has reached every other client of its room.
func runSyncWorkload(ctx context.Context, t *syncTarget, w syncWorkload, opt syncOptions) (syncResult, error) {
	res := syncResult{Target: t.name, Workload: w.String(), Rooms: w.Rooms, Clients: w.Clients, Updates: w.Updates,
		Window: opt.window, Expected: w.deliveries()}
	dialer := &websocket.Dialer{HandshakeTimeout: 20 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 4096}
	U := w.Updates
	clients := make([]*syncClient, 0, w.Rooms*w.Clients)
	var readers sync.WaitGroup
	defer func() {
		for _, c := range clients {
			if c.ws != nil {
				c.ws.Close()
			}
		}
		readers.Wait()
	}()

	var (
		base      = time.Now()
		measuring atomic.Bool
		delivered atomic.Int64
		done      = make(chan struct{})
	)
	reader := func(c *syncClient) {
		defer readers.Done()
		for {
			_, frame, err := c.ws.ReadMessage()
			if err != nil {
				if !measuring.Load() || delivered.Load() < res.Expected {
					c.fail(fmt.Errorf("read: %w", err))
				}
				return
			}
			now := int64(time.Since(base))
			m, err := parseSyncFrame(c.dialect, frame)
			if err != nil {
				c.fail(fmt.Errorf("bad frame from server: %w", err))
				return
			}
			if m.Type == ymsgAuth && c.dialect == dialectHocuspocus && len(frame) > 0 {
				// Authenticated (subtype 2) or permission denied (0).
				_, rest, _ := readVarBytes(frame)
				if _, rest, err = readVarUint(rest); err == nil {
					if sub, _, err := readVarUint(rest); err == nil && sub == 0 {
						c.fail(errors.New("hocuspocus: permission denied"))
					}
				}
				continue
			}
			if m.Type == ymsgAuth {
				c.fail(errors.New("server: permission denied"))
				continue
			}
			if m.Type != ymsgSync || c.handshake(m) {
				continue
			}
			found := false
			single, singleN, markers := -1, 0, 0
			scanMarkers(m.Payload, func(src, n int) {
				j := src - c.first
				if j < 0 || j >= w.Clients || n > U {
					return
				}
				found = true
				if markers++; markers == 1 {
					single, singleN = src, n
				} else {
					single = -1
				}
				if src == c.idx {
					return // our own echo
				}
				k := j*(U+1) + n
				if c.seen[k] {
					return
				}
				c.seen[k] = true
				if n == 0 {
					c.setupSeen.Add(1)
					return
				}
				s := clients[src]
				c.lats = append(c.lats, time.Duration(now-s.sent[n].Load()))
				if s.remaining[n].Add(-1) == 0 && s.window != nil {
					s.window <- struct{}{}
				}
				if delivered.Add(1) == res.Expected {
					close(done)
				}
			})
			switch {
			case !found:
				c.unexpected.Add(1)
			case !measuring.Load():
			case markers > 1:
				c.merged.Add(1)
			case single >= 0:
				if u := clients[single].upd[singleN].Load(); u != nil && bytes.Equal(*u, m.Payload) {
					c.verbatim.Add(1)
				} else {
					c.reencoded.Add(1)
				}
			}
		}
	}

	// Connect and sync. Every client exists before any reader starts, so
	// readers may index clients freely.
	for r := 0; r < w.Rooms; r++ {
		for i := 0; i < w.Clients; i++ {
			c := &syncClient{idx: len(clients), first: r * w.Clients, dialect: t.dialect,
				ydoc: yjs.NewDoc(), seen: make([]bool, w.Clients*(U+1)),
				sent: make([]atomic.Int64, U+1), upd: make([]atomic.Pointer[[]byte], U+1), remaining: make([]atomic.Int32, U+1)}
			for n := range c.remaining {
				c.remaining[n].Store(int32(w.Clients - 1))
			}
			if opt.window > 0 {
				c.window = make(chan struct{}, opt.window)
				for range opt.window {
					c.window <- struct{}{}
				}
			}
			c.ydoc.OnUpdate(func(u []byte, origin any) {
				if origin == nil {
					c.out = append(c.out, u)
				}
			})
			clients = append(clients, c)
		}
	}
	for r := 0; r < w.Rooms; r++ {
		url, doc, err := t.room(ctx, r)
		if err != nil {
			return res, fmt.Errorf("room %d: %w", r, err)
		}
		for _, c := range clients[r*w.Clients : (r+1)*w.Clients] {
			c.doc = doc
			if err := syncDial(ctx, dialer, url, c); err != nil {
				return res, fmt.Errorf("connect client %d: %w", c.idx, err)
			}
			readers.Add(1)
			go reader(c)
		}
	}
	firstErr := func() error {
		for _, c := range clients {
			if e := c.err.Load(); e != nil {
				return fmt.Errorf("client %d: %w", c.idx, *e)
			}
		}
		return nil
	}
	waitFor := func(what string, cond func() bool) error {
		deadline := time.Now().Add(opt.timeout)
		for !cond() {
			if err := firstErr(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("timeout waiting for %s", what)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	}
	if err := waitFor("the sync handshakes", func() bool {
		for _, c := range clients {
			select {
			case <-c.synced:
			default:
				return false
			}
		}
		return true
	}); err != nil {
		return res, err
	}

	// Setup: every client creates its yap; wait until all have seen all.
	now := time.Now()
	for _, c := range clients {
		if err := c.send(syncMessage(ysyncUpdate, c.createYap(now))); err != nil {
			return res, fmt.Errorf("client %d: %w", c.idx, err)
		}
	}
	if err := waitFor("the setup updates", func() bool {
		for _, c := range clients {
			if int(c.setupSeen.Load()) < w.Clients-1 {
				return false
			}
		}
		return true
	}); err != nil {
		return res, err
	}
	time.Sleep(200 * time.Millisecond) // let the servers settle (acks, persistence)

	// Measure.
	measuring.Store(true)
	cpu0, res0, cpuErr0 := procCPURes(t.pid)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	stopWriters := make(chan struct{})
	var writers sync.WaitGroup
	for _, c := range clients {
		writers.Add(1)
		go func() {
			defer writers.Done()
			next := time.Now()
			for n := 1; n <= U; n++ {
				if c.window != nil {
					select {
					case <-c.window:
					case <-stopWriters:
						return
					}
				}
				if opt.interval > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					next = next.Add(opt.interval)
				}
				c.wmu.Lock()
				msgs, upd := c.typeMarker(n)
				c.upd[n].Store(&upd)
				c.sent[n].Store(int64(time.Since(base)))
				var err error
				for _, m := range msgs {
					if err = c.sendLocked(m); err != nil {
						break
					}
				}
				c.wmu.Unlock()
				if err != nil {
					c.fail(fmt.Errorf("send: %w", err))
					return
				}
			}
		}()
	}
	var runErr error
	deadline := time.NewTimer(opt.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-deadline.C:
			runErr = fmt.Errorf("timeout after %v: %d of %d deliveries", opt.timeout, delivered.Load(), res.Expected)
			break wait
		case <-ctx.Done():
			runErr = ctx.Err()
			break wait
		case <-tick.C:
			if err := firstErr(); err != nil {
				runErr = err
				break wait
			}
		}
	}
	elapsed := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	// Work a server defers past the last delivery (a debounced store,
	// compaction) still belongs to the run: read its CPU after a pause.
	time.Sleep(syncSettle)
	cpu1, res1, cpuErr1 := procCPURes(t.pid)
	rss, hwm := syncProcMem(t.pid)
	close(stopWriters)
	writers.Wait()
	for _, c := range clients {
		c.ws.Close()
	}
	readers.Wait()

	var lats []time.Duration
	for _, c := range clients {
		lats = append(lats, c.lats...)
		res.Unexpected += c.unexpected.Load()
		res.Verbatim += c.verbatim.Load()
		res.Reencoded += c.reencoded.Load()
		res.Merged += c.merged.Load()
	}
	slices.Sort(lats)
	res.Delivered = delivered.Load()
	res.ElapsedMs = float64(elapsed.Microseconds()) / 1e3
	res.PerSecond = float64(res.Delivered) / elapsed.Seconds()
	res.P50Ms = float64(percentile(lats, 0.50).Microseconds()) / 1e3
	res.P99Ms = float64(percentile(lats, 0.99).Microseconds()) / 1e3
	if cpuErr0 == nil && cpuErr1 == nil {
		cpu := cpu1 - cpu0
		res.ServerCPUMs = float64(cpu.Microseconds()) / 1e3
		res.CPUResMs = float64(max(res0, res1).Nanoseconds()) / 1e6
		if res.Delivered > 0 {
			res.CPUPerDelivUs = float64(cpu.Nanoseconds()) / 1e3 / float64(res.Delivered)
			res.CPUPerUpdUs = float64(cpu.Nanoseconds()) / 1e3 / float64(w.Rooms*w.Clients*U)
		}
	}
	res.RSSMB, res.PeakRSSMB = toMiB(rss), toMiB(hwm)
	res.ClientCPUMs = float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / 1e6
	return res, runErr
}
