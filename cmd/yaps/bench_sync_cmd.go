package main

// The `yaps bench sync` command: flags, the run over targets × workloads,
// the idle-connection measurement and the report. See bench_sync.go.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gorilla/websocket"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

func runBenchSync(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench sync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targets := fs.String("targets", "yaps,y-websocket,hocuspocus", "servers to run, comma-separated: yaps, y-websocket, hocuspocus")
	workloads := fs.String("workloads", "1x20x100,50x4x50", "workloads ROOMSxCLIENTSxUPDATES, comma-separated (replaced by -R/-C/-U when any is set)")
	rooms := fs.Int("R", 0, "rooms (a single custom workload with -C and -U)")
	clients := fs.Int("C", 0, "clients per room")
	updates := fs.Int("U", 0, "updates per client")
	window := fs.Int("window", 1, "updates a client may have in flight (sent, not yet delivered to every other client of its room); 0 = no limit (burst)")
	interval := fs.Duration("interval", 0, "minimum time between two updates of one client (0: as fast as the window allows)")
	timeout := fs.Duration("timeout", 3*time.Minute, "limit per phase of a run")
	rounds := fs.Int("rounds", 1, "runs per target and workload, each on a fresh server; the table shows the median by CPU per delivery")
	idle := fs.Int("idle", 10000, "idle connections to hold open per target after the workloads (0: skip)")
	idleRooms := fs.Int("idle-rooms", 100, "rooms the idle connections are spread over")
	idleWait := fs.Duration("idle-wait", 30*time.Second, "how long the idle connections stay open before the steady-state RSS is read")
	idleSync := fs.Bool("idle-sync", true, "idle connections do the sync handshake (false: WebSocket upgrade only, then silent)")
	idleTargets := fs.String("idle-targets", "", "targets for the idle measurement (default: --targets)")
	yapsBin := fs.String("yaps", "", "yaps binary to serve with (default: this executable)")
	node := fs.String("node", "node", "node binary for the npm peers")
	interop := fs.String("interop", "", "the interop directory with node_modules (default: interop/ in the working directory or the nearest parent that has one)")
	jsonOut := fs.Bool("json", false, "print one JSON object per result on stdout and the table on stderr")
	keep := fs.Bool("keep", false, "keep the temporary directory (databases, server logs)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	var wls []syncWorkload
	if *rooms != 0 || *clients != 0 || *updates != 0 {
		w := syncWorkload{max(*rooms, 1), *clients, *updates}
		if w.Clients == 0 {
			w.Clients = 4
		}
		if w.Updates == 0 {
			w.Updates = 50
		}
		if w.Clients < 2 || w.Rooms < 1 || w.Updates < 1 {
			return errors.New("bench sync: need -R >= 1, -C >= 2, -U >= 1")
		}
		wls = []syncWorkload{w}
	} else {
		for _, s := range strings.Split(*workloads, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			w, err := parseSyncWorkload(s)
			if err != nil {
				return fmt.Errorf("bench sync: %w", err)
			}
			wls = append(wls, w)
		}
	}
	names := splitList(*targets)
	idleNames := names
	if *idleTargets != "" {
		idleNames = splitList(*idleTargets)
	}
	if *window < 0 || *rounds < 1 {
		return errors.New("bench sync: --window must be >= 0 and --rounds >= 1")
	}

	cfg := syncConfig{yapsBin: *yapsBin, node: *node, interop: *interop, stderr: stderr}
	if cfg.yapsBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench sync: %w", err)
		}
		cfg.yapsBin = exe
	}
	needNode := false
	for _, n := range append(append([]string{}, names...), idleNames...) {
		if n != syncTargetYaps {
			needNode = true
		}
	}
	if needNode {
		if cfg.interop == "" {
			cfg.interop = findSyncInterop()
		}
		if _, err := os.Stat(filepath.Join(cfg.interop, "node_modules", "@hocuspocus", "server", "package.json")); err != nil {
			return fmt.Errorf("bench sync: no npm peers in %q (run `npm ci` in interop/, or pass --interop)", cfg.interop)
		}
		if _, err := exec.LookPath(cfg.node); err != nil {
			return fmt.Errorf("bench sync: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "yaps-bench-sync-")
	if err != nil {
		return err
	}
	cfg.tmp = tmp
	if *keep {
		fmt.Fprintf(stderr, "bench sync: keeping %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	raiseNoFile(stderr, *idle+1024) // each process holds one end of every connection

	opt := syncOptions{window: *window, interval: *interval, timeout: *timeout}
	mode := fmt.Sprintf("window %d", opt.window)
	if opt.window == 0 {
		mode = "burst (no window)"
	}
	if opt.interval > 0 {
		mode += fmt.Sprintf(", interval %v", opt.interval)
	}
	fmt.Fprintf(stderr, "bench sync: %s; %d round(s); yaps %s\n", mode, *rounds, cfg.yapsBin)

	var results []syncResult
	var paired []pairedLine
	for _, w := range wls {
		// The targets take turns, round by round, in an order reversed
		// every other round: the machine's speed drifts over a run (other
		// tenants of the host), and a target run in a block of its own
		// would get whatever speed that block had.
		runs := map[string][]syncResult{}
		for round := 0; round < *rounds; round++ {
			order := slices.Clone(names)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, name := range order {
				r, err := syncOnce(ctx, cfg, name, w, opt)
				if err != nil {
					fmt.Fprintf(stderr, "bench sync: %s %s: %v\n", name, w, err)
					r.Error = err.Error()
				}
				fmt.Fprintf(stderr, "  %-12s %-10s %8.0f deliveries/s  p50 %7.2f ms  p99 %7.2f ms  %6.1f µs CPU/delivery  peak RSS %5.1f MB  (%d/%d delivered, client CPU %.0f ms)\n",
					r.Target, r.Workload, r.PerSecond, r.P50Ms, r.P99Ms, r.CPUPerDelivUs, r.PeakRSSMB, r.Delivered, r.Expected, r.ClientCPUMs)
				fmt.Fprintf(stderr, "  %-12s update frames received: %d one update verbatim, %d one update re-encoded, %d merged updates\n", "", r.Verbatim, r.Reencoded, r.Merged)
				if r.Unexpected > 0 {
					fmt.Fprintf(stderr, "  warning: %s sent %d update frames without a marker (a compensating update?)\n", name, r.Unexpected)
				}
				runs[name] = append(runs[name], r)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
		for _, name := range names {
			results = append(results, medianSyncResult(runs[name]))
		}
		if *rounds > 1 {
			for _, peer := range []string{syncTargetYWebsocket, syncTargetHocuspocus} {
				if rs := pairedRatios(runs[syncTargetYaps], runs[peer]); len(rs) > 0 {
					paired = append(paired, pairedLine{workload: w.String(), peer: peer, ratios: rs})
				}
			}
		}
	}

	var idles []idleResult
	if *idle > 0 {
		for _, name := range idleNames {
			r, err := idleOnce(ctx, cfg, name, *idle, *idleRooms, *idleSync, *idleWait, *timeout)
			if err != nil {
				fmt.Fprintf(stderr, "bench sync: idle %s: %v\n", name, err)
				r.Error = err.Error()
			}
			fmt.Fprintf(stderr, "  %-12s %d idle connections: RSS %.1f MB after %v (%.1f MB 3 s after connecting, peak %.1f MB, %.1f MB before; %.1f KB per connection), connected in %.1f s\n",
				r.Target, r.Conns, r.RSSMB, *idleWait, r.EarlyRSSMB, r.PeakRSSMB, r.BaseRSSMB, r.KBPerConn, r.ConnectSec)
			idles = append(idles, r)
		}
	}

	table := stdout
	if *jsonOut {
		table = stderr
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			_ = enc.Encode(r)
		}
		for _, r := range idles {
			_ = enc.Encode(r)
		}
	}
	fmt.Fprintln(table)
	writeSyncTable(table, results, idles, mode, *idleWait)
	for _, l := range paired {
		l.write(table)
	}
	for _, r := range results {
		if r.Error != "" {
			return errors.New("bench sync: some runs failed")
		}
	}
	return nil
}

// syncOnce starts a fresh server, runs one workload and stops it, so each
// row's CPU and RSS belong to that workload alone.
func syncOnce(ctx context.Context, cfg syncConfig, name string, w syncWorkload, opt syncOptions) (syncResult, error) {
	t, err := startSyncTarget(ctx, cfg, name)
	if err != nil {
		return syncResult{Target: name, Workload: w.String()}, err
	}
	defer t.stop()
	return runSyncWorkload(ctx, t, w, opt)
}

// medianSyncResult picks the run with the median CPU per delivery.
func medianSyncResult(runs []syncResult) syncResult {
	ok := runs[:0:0]
	for _, r := range runs {
		if r.Error == "" {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return runs[len(runs)-1]
	}
	sorted := append([]syncResult(nil), ok...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j].CPUPerDelivUs < sorted[j-1].CPUPerDelivUs; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	return sorted[len(sorted)/2]
}

// pairedRatios returns yaps' CPU per delivery over the peer's, round by
// round, for the rounds in which both ran without error. The two ran next
// to each other in each round, so a drift of the machine's speed (other
// tenants of the host) moves both sides of a round's ratio alike, while
// the medians of the table may come from rounds far apart.
func pairedRatios(yapsRuns, peerRuns []syncResult) []float64 {
	var out []float64
	for i := range min(len(yapsRuns), len(peerRuns)) {
		y, p := yapsRuns[i], peerRuns[i]
		if y.Error != "" || p.Error != "" || y.CPUPerDelivUs <= 0 || p.CPUPerDelivUs <= 0 {
			continue
		}
		out = append(out, y.CPUPerDelivUs/p.CPUPerDelivUs)
	}
	return out
}

// pairedLine is one workload's per-round ratios against one peer.
type pairedLine struct {
	workload, peer string
	ratios         []float64
}

// write prints the ratios in round order, their median and how many are
// within the target.
func (l pairedLine) write(w io.Writer) {
	var b strings.Builder
	within := 0
	for i, r := range l.ratios {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.2f", r)
		if r <= 0.5 {
			within++
		}
	}
	fmt.Fprintf(w, "%s, round by round: yaps uses %s× the CPU per delivery of %s (median %.2f×; %d of %d rounds ≤ 0.5×)\n",
		l.workload, b.String(), syncTargetLabel(l.peer), medianFloat(l.ratios), within, len(l.ratios))
}

// medianFloat is the median of v (the mean of the middle two for an even
// count); v is not changed.
func medianFloat(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func syncTargetLabel(name string) string {
	switch name {
	case syncTargetYaps:
		return "yaps (SQLite)"
	case syncTargetYWebsocket:
		return "@y/websocket-server"
	case syncTargetHocuspocus:
		return "@hocuspocus/server"
	}
	return name
}

func writeSyncTable(w io.Writer, results []syncResult, idles []idleResult, mode string, idleWait time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(results) > 0 {
		writeSyncLoadTable(w, tw, results, mode)
	}
	if len(idles) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "idle connections (silent after the sync handshake, or after the upgrade only; server RSS 3 s after the last connected and after %v)\n", idleWait)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "server\tconnections\thandshake\tRSS MB at 3 s\tRSS MB at %v\tpeak RSS MB\tbefore MB\tKB/connection\tconnect s\t\n", idleWait)
		for _, r := range idles {
			hs := "sync"
			if !r.Synced {
				hs = "upgrade only"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
				syncTargetLabel(r.Target), r.Conns, hs, r.EarlyRSSMB, r.RSSMB, r.PeakRSSMB, r.BaseRSSMB, r.KBPerConn, r.ConnectSec)
		}
		tw.Flush()
	}
}

func writeSyncLoadTable(w io.Writer, tw *tabwriter.Writer, results []syncResult, mode string) {
	fmt.Fprintf(w, "sync load (%s; a delivery = one update reaching one other client of its room)\n", mode)
	fmt.Fprintln(tw, "server\tworkload\tdelivered\tdelivered/s\tp50 ms\tp99 ms\tCPU µs/delivery\tCPU µs/update\tpeak RSS MB\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.0f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t\n",
			syncTargetLabel(r.Target), r.Workload, r.Delivered, r.Expected, r.PerSecond, r.P50Ms, r.P99Ms, r.CPUPerDelivUs, r.CPUPerUpdUs, r.PeakRSSMB)
	}
	tw.Flush()
	// yaps against the peers: the target is at most half their
	// CPU per delivered update.
	byKey := map[string]syncResult{}
	for _, r := range results {
		if r.Error == "" {
			byKey[r.Target+" "+r.Workload] = r
		}
	}
	for _, r := range results {
		if r.Target != syncTargetYaps || r.Error != "" || r.CPUPerDelivUs == 0 {
			continue
		}
		for _, peer := range []string{syncTargetYWebsocket, syncTargetHocuspocus} {
			if p, ok := byKey[peer+" "+r.Workload]; ok && p.CPUPerDelivUs > 0 {
				verdict := "meets"
				if r.CPUPerDelivUs > p.CPUPerDelivUs/2 {
					verdict = "misses"
				}
				// Read from /proc, CPU comes in 10 ms ticks: when yaps' CPU is
				// within a few ticks of half the peer's, the ticks decide,
				// not the servers. (The CPU-time clock reads nanoseconds.)
				tick := max(r.CPUResMs, p.CPUResMs)
				if half := p.CPUPerDelivUs / 2 * float64(r.Delivered) / 1e3; math.Abs(r.ServerCPUMs-half) < 3*tick {
					verdict = fmt.Sprintf("too close to judge at %g ms CPU ticks, use a larger workload", tick)
				}
				fmt.Fprintf(w, "%s: yaps uses %.2f× the CPU per delivery of %s (%.1f vs %.1f µs; target ≤ 0.5×: %s)\n",
					r.Workload, r.CPUPerDelivUs/p.CPUPerDelivUs, syncTargetLabel(peer), r.CPUPerDelivUs, p.CPUPerDelivUs, verdict)
			}
		}
	}
}

// findSyncInterop looks for interop/ in the working directory and its
// parents.
func findSyncInterop() string {
	dir, err := os.Getwd()
	if err != nil {
		return "interop"
	}
	for {
		p := filepath.Join(dir, "interop")
		if _, err := os.Stat(filepath.Join(p, "package.json")); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "interop"
		}
		dir = parent
	}
}

// raiseNoFile raises the soft open-files limit towards need (and the hard
// limit); the servers started afterwards inherit it.
func raiseNoFile(stderr io.Writer, need int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if lim.Cur >= uint64(need) {
		return
	}
	lim.Cur = min(max(uint64(need), lim.Cur), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < uint64(need) {
		fmt.Fprintf(stderr, "bench sync: open files limited to %d (need about %d; raise `ulimit -n`)\n", lim.Cur, need)
	}
}

// --- idle connections --------------------------------------------------

type idleResult struct {
	Target     string  `json:"target"`
	Conns      int     `json:"idleConnections"`
	Synced     bool    `json:"synced"`
	BaseRSSMB  float64 `json:"baseRssMB"`
	EarlyRSSMB float64 `json:"rss3sMB"`
	RSSMB      float64 `json:"rssMB"`
	PeakRSSMB  float64 `json:"peakRssMB"`
	KBPerConn  float64 `json:"kbPerConnection"`
	ConnectSec float64 `json:"connectSeconds"`
	Error      string  `json:"error,omitempty"`
}

// idleOnce opens n connections to a fresh server, spread over rooms rooms;
// each does the sync handshake and then only answers pings. The server's
// RSS is read 3 s after the last one synced and again after wait.
func idleOnce(ctx context.Context, cfg syncConfig, name string, n, rooms int, handshake bool, wait, timeout time.Duration) (idleResult, error) {
	res := idleResult{Target: name, Conns: n, Synced: handshake}
	t, err := startSyncTarget(ctx, cfg, name)
	if err != nil {
		return res, err
	}
	defer t.stop()
	type room struct{ url, doc string }
	rs := make([]room, min(rooms, n))
	for i := range rs {
		if rs[i].url, rs[i].doc, err = t.room(ctx, i); err != nil {
			return res, err
		}
	}
	time.Sleep(500 * time.Millisecond)
	base, _ := syncProcMem(t.pid)
	res.BaseRSSMB = toMiB(base)

	dialer := &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512}
	conns := make([]*websocket.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || firstErr.Load() != nil {
					return
				}
				r := rs[i%len(rs)]
				c, err := idleConnect(ctx, dialer, t.dialect, r.url, r.doc, handshake)
				if err != nil {
					err = fmt.Errorf("connection %d: %w", i, err)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return res, *e
	}
	res.ConnectSec = time.Since(start).Seconds()
	// Discard whatever the servers send (pings are answered by gorilla's
	// default handler inside ReadMessage).
	for _, c := range conns {
		go func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	early, _ := syncProcMem(t.pid)
	res.EarlyRSSMB = toMiB(early)
	// Sample every 10 s, so growth over time (GC pacing, pings) shows.
	samples := []string{fmt.Sprintf("3s %.0f", res.EarlyRSSMB)}
	end := time.Now().Add(max(wait-3*time.Second, 0))
	for el := 3 * time.Second; time.Now().Before(end) && ctx.Err() == nil; {
		step := min(10*time.Second-el%(10*time.Second), time.Until(end))
		time.Sleep(step)
		el += step
		r, _ := syncProcMem(t.pid)
		samples = append(samples, fmt.Sprintf("%v %.0f", el.Round(time.Second), toMiB(r)))
	}
	fmt.Fprintf(cfg.stderr, "  %-12s idle RSS MB over time: %s\n", name, strings.Join(samples, ", "))
	rss, hwm := syncProcMem(t.pid)
	res.RSSMB, res.PeakRSSMB = toMiB(rss), toMiB(hwm)
	res.KBPerConn = float64(rss-base) / 1024 / float64(n)
	return res, nil
}

// idleConnect dials and completes the sync handshake: (Hocuspocus auth),
// our step 1, the server's step 2 received, its step 1 answered.
func idleConnect(ctx context.Context, d *websocket.Dialer, dialect syncDialect, url, doc string, handshake bool) (*websocket.Conn, error) {
	ws, resp, err := d.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("%w (status %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	resp.Body.Close()
	if !handshake {
		return ws, nil
	}
	ydoc := yjs.NewDoc()
	write := func(msg []byte) error {
		return ws.WriteMessage(websocket.BinaryMessage, syncFrame(dialect, doc, msg))
	}
	if dialect == dialectHocuspocus {
		if err := write(hocuspocusAuth("")); err != nil {
			ws.Close()
			return nil, err
		}
	}
	if err := write(syncMessage(ysyncStep1, ydoc.EncodeStateVector())); err != nil {
		ws.Close()
		return nil, err
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	gotStep1 := dialect == dialectHocuspocus // Hocuspocus sends its step 1 only as a reply to ours
	gotStep2 := false
	for !gotStep2 || !gotStep1 {
		_, frame, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			return nil, err
		}
		m, err := parseSyncFrame(dialect, frame)
		if err != nil || m.Type != ymsgSync {
			continue
		}
		switch m.SyncType {
		case ysyncStep1:
			gotStep1 = true
			upd, err := ydoc.EncodeStateAsUpdate(m.Payload)
			if err == nil {
				err = write(syncMessage(ysyncStep2, upd))
			}
			if err != nil {
				ws.Close()
				return nil, err
			}
		case ysyncStep2:
			gotStep2 = true
		}
	}
	_ = ws.SetReadDeadline(time.Time{})
	return ws, nil
}
