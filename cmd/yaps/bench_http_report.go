package main

// The load loop and the pure parts of `yaps bench http`: percentiles, /proc
// stat parsing, results, comparison and output formatting.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// loadStats is the raw outcome of one load phase.
type loadStats struct {
	latencies []time.Duration // of successful (2xx) requests
	errors    int             // transport errors and non-2xx answers
	elapsed   time.Duration   // wall time from start until the last worker stopped
	firstErr  string

	// Open loop only (scheduled > 0).
	start     time.Time       // time zero of the schedule
	intended  []time.Duration // intended start of latencies[i], from start (one phase only)
	scheduled int             // requests due within the phase
	late      int             // sent openLateAfter or more after their intended start
	waited    int             // of those, found all connections busy when due
	unsent    int             // due but not sent by the end of the phase (not in late)
}

// noteErr keeps msg as the phase's first error, unless it has one.
func (st *loadStats) noteErr(msg string) {
	if st.firstErr == "" {
		st.firstErr = msg
	}
}

// statusErr describes a request answered with a status other than 2xx.
func statusErr(req *http.Request, status int) string {
	return fmt.Sprintf("%s %s: status %d", req.Method, req.URL.Path, status)
}

// end returns the outcome of a load phase run under ctx: an error when ctx
// ended by other than cancellation, or when no request could even be built.
func (st loadStats) end(ctx context.Context) (loadStats, error) {
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return st, err
	}
	if st.firstErr != "" && len(st.latencies) == 0 && st.errors == 0 {
		return st, errors.New(st.firstErr) // request construction failed
	}
	return st, nil
}

// doer sends one request and reads the whole answer; each load worker has
// its own.
type doer interface {
	do(req *http.Request) (status int, err error)
}

// stdDoer is net/http's client (Transport with a connection pool).
type stdDoer struct{ c *http.Client }

func (d stdDoer) do(req *http.Request) (int, error) {
	resp, err := d.c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// rawConn is a lean HTTP/1.1 keep-alive client on one connection, in the
// manner of wrk: it writes the request and parses the answer on the
// calling goroutine (net/http's Transport hands every request through two
// connection goroutines), so the load generator, which shares the machine
// with the server, needs less CPU per request. Parsing is net/http's
// (http.ReadResponse: Content-Length and chunked bodies).
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

func (rc *rawConn) do(req *http.Request) (int, error) {
	for attempt := 0; ; attempt++ {
		reused := rc.c != nil
		if !reused {
			c, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
			if err != nil {
				return 0, err
			}
			rc.c = c
			if rc.br == nil {
				rc.br, rc.bw = bufio.NewReaderSize(c, 32<<10), bufio.NewWriterSize(c, 8<<10)
			} else {
				rc.br.Reset(c)
				rc.bw.Reset(c)
			}
		}
		status, err := rc.roundTrip(req)
		if err == nil {
			return status, nil
		}
		rc.close()
		// A kept-alive connection the server closed while idle: retry
		// once on a fresh one, as net/http does. Only bodies that can be
		// replayed (GetBody) are retried.
		if !reused || attempt > 0 {
			return 0, err
		}
		if req.Body != nil {
			if req.GetBody == nil {
				return 0, err
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return 0, err
			}
			req.Body = body
		}
	}
}

func (rc *rawConn) roundTrip(req *http.Request) (int, error) {
	_ = rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := req.Write(rc.bw); err != nil {
		return 0, err
	}
	if err := rc.bw.Flush(); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(rc.br, req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if resp.Close {
		rc.close()
	}
	return resp.StatusCode, nil
}

// load runs scenario s with one closed-loop worker per doer for dur: each
// worker sends a request, reads the whole answer, records the latency and
// sends the next one. Only 2xx answers count as requests; the rest are
// errors.
func load(ctx context.Context, doers []doer, a api, s string, dur time.Duration) (loadStats, error) {
	conc := len(doers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		st       loadStats
		perWork  = make([][]time.Duration, conc)
		errCount = make([]int, conc)
	)
	start := time.Now()
	deadline := start.Add(dur)
	for w := range conc {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for i := 0; ; i++ {
				if ctx.Err() != nil || !time.Now().Before(deadline) {
					break
				}
				req, err := a.request(s, w, i)
				if err != nil {
					mu.Lock()
					st.noteErr(err.Error())
					mu.Unlock()
					cancel()
					break
				}
				req = req.WithContext(ctx)
				t0 := time.Now()
				status, err := doers[w].do(req)
				d := time.Since(t0)
				switch {
				case err != nil:
					if ctx.Err() != nil {
						break
					}
					errCount[w]++
					mu.Lock()
					st.noteErr(err.Error())
					mu.Unlock()
					time.Sleep(10 * time.Millisecond) // don't spin on a dead server
				case status/100 != 2:
					errCount[w]++
					mu.Lock()
					st.noteErr(statusErr(req, status))
					mu.Unlock()
				default:
					lat = append(lat, d)
				}
			}
			perWork[w] = lat
		})
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	for w := range conc {
		st.latencies = append(st.latencies, perWork[w]...)
		st.errors += errCount[w]
	}
	return st.end(ctx)
}

// openLateAfter is how long after its intended start a request may be sent
// and still count as on time. Below it, the load generator's own timer and
// scheduling jitter (one sleep per request, on a machine it shares with
// the server) would mark requests late that the server did not delay; the
// latency counts the delay either way.
const openLateAfter = 2 * time.Millisecond

// openSchedule returns how many requests are due within dur at rate per
// second, and the intended start (from time zero) of request k: k/rate,
// evenly spaced.
func openSchedule(rate float64, dur time.Duration) (n int, at func(k int) time.Duration) {
	at = func(k int) time.Duration { return time.Duration(float64(k) * float64(time.Second) / rate) }
	n = int(math.Ceil(dur.Seconds() * rate))
	for n > 0 && at(n-1) >= dur {
		n--
	}
	for at(n) < dur {
		n++
	}
	return n, at
}

// loadOpen runs scenario s as an open loop for dur: request k is due at
// k/rate after the start whatever happened to the earlier ones, and is
// sent on one of the doers (at most len(doers) in flight, each doer one
// connection, the most recently freed reused first). A request due while
// every doer is busy waits for one; one not sent by the end of dur is
// not sent at all (unsent). Latency runs from the intended start, so a
// server stall shows in every request scheduled during it, and a request
// sent late carries its delay. Request k goes as request k/lists of
// worker k%lists, so create-yap writes to the same lists as in the closed
// loop. The phase ends when the requests in flight at dur have answered.
func loadOpen(ctx context.Context, doers []doer, a api, s string, dur time.Duration, rate float64, lists int) (loadStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n, at := openSchedule(rate, dur)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards st and free
		st   = loadStats{scheduled: n, latencies: make([]time.Duration, 0, n), intended: make([]time.Duration, 0, n)}
		free = slices.Clone(doers)
		slot = make(chan struct{}, len(doers)) // one token per request in flight
	)
	start := time.Now()
	deadline := start.Add(dur)
	st.start = start
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sent := 0
	for k := 0; k < n && ctx.Err() == nil; k++ {
		due := at(k)
		if wait := time.Until(start.Add(due)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		got, waited := false, false
		select {
		case slot <- struct{}{}:
			got = true
		default:
			// Every connection is busy: wait for one, but not past the
			// end of the phase.
			waited = true
			timer.Reset(max(time.Until(deadline), 0))
			select {
			case slot <- struct{}{}:
				got = true
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if got && (ctx.Err() != nil || !time.Now().Before(deadline)) {
			<-slot
			got = false
		}
		if !got {
			break // interrupted or past the end: this request and the rest stay unsent
		}
		w, i := k%lists, k/lists
		mu.Lock()
		d := free[len(free)-1]
		free = free[:len(free)-1]
		mu.Unlock()
		sent++
		wg.Go(func() {
			defer func() { <-slot }()
			intended := start.Add(due)
			req, err := a.request(s, w, i)
			if err != nil {
				mu.Lock()
				st.noteErr(err.Error())
				free = append(free, d)
				mu.Unlock()
				cancel()
				return
			}
			req = req.WithContext(ctx)
			late := time.Since(intended) >= openLateAfter
			status, err := d.do(req)
			lat := time.Since(intended)
			mu.Lock()
			defer mu.Unlock()
			free = append(free, d)
			if late {
				st.late++
				if waited {
					st.waited++
				}
			}
			switch {
			case err != nil:
				if ctx.Err() == nil {
					st.errors++
					st.noteErr(err.Error())
				}
			case status/100 != 2:
				st.errors++
				st.noteErr(statusErr(req, status))
			default:
				st.latencies = append(st.latencies, lat)
				st.intended = append(st.intended, due)
			}
		})
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	st.unsent = n - sent
	return st.end(ctx)
}

// httpResult is one target × scenario row; it is also the JSON line.
type httpResult struct {
	Type     string `json:"type"` // "result"
	Target   string `json:"target"`
	Scenario string `json:"scenario"`
	// Mode is "closed" (Concurrency workers, each sending its next request
	// when the last answer is complete, latency from the actual send) or
	// "open" (--rate; Concurrency is --max-inflight; see Open).
	Mode        string  `json:"mode"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	RPS         float64 `json:"rps"`
	P50Ms       float64 `json:"p50Ms"`
	P99Ms       float64 `json:"p99Ms"`
	MeanMs      float64 `json:"meanMs"`
	MaxMs       float64 `json:"maxMs"`
	// CPUUsPerReq is the server's CPU time (user+system of the server
	// process, plus its Postgres backends for yaps-postgres) during the
	// scenario divided by its successful requests; -1 when not measured.
	CPUUsPerReq float64 `json:"cpuUsPerReq"`
	// ServerCPU is that CPU time in seconds; -1 when not measured. It runs
	// from the start of the scenario until the server is idle again after
	// it, so background work the requests caused is included.
	ServerCPU float64 `json:"serverCpuSeconds"`
	// TailCPU is the part of the server process's CPU spent after the
	// last answer; -1 when not measured.
	TailCPU float64 `json:"tailCpuSeconds"`
	// DBCPU is the part of ServerCPU spent in Postgres backends (yaps-postgres
	// only; SQLite runs inside the server process); -1 when not applicable.
	DBCPU      float64 `json:"dbCpuSeconds"`
	DBUsPerReq float64 `json:"dbCpuUsPerReq"`
	// ClientUsPerReq is the load generator's own CPU per request (it shares
	// the machine with the server).
	ClientUsPerReq float64 `json:"clientCpuUsPerReq"`
	// PGBgCPU is the CPU of Postgres's shared background processes
	// (checkpointer, WAL writer, background writer, autovacuum) from the
	// start of each slice until Postgres was idle after it, in seconds;
	// not part of ServerCPU or CPUUsPerReq. They serve every database on
	// the server, so other users' work is in it too. -1 when not measured
	// (no Postgres target).
	PGBgCPU      float64 `json:"pgBackgroundCpuSeconds"`
	PGBgUsPerReq float64 `json:"pgBackgroundCpuUsPerReq"`
	// Open is set in open-loop mode.
	Open *openResult `json:"open,omitempty"`
}

// openResult is how well an open-loop run kept its schedule. Latencies
// (P50Ms...) run from each request's intended start; RPS is the achieved
// rate.
type openResult struct {
	OfferedRPS  float64 `json:"offeredRps"`
	MaxInflight int     `json:"maxInflight"`
	Scheduled   int     `json:"scheduled"` // requests due within the measured time
	// Late were sent openLateAfter (2 ms) or more after their intended
	// start; WaitedForConn of them because all MaxInflight connections
	// were busy when they were due.
	Late          int `json:"late"`
	WaitedForConn int `json:"waitedForConnection"`
	// Unsent were due but not sent by the end of the measured time (their
	// latency is unknown and not in the percentiles).
	Unsent int `json:"unsent"`
}

// percentile returns the q-quantile (0 < q <= 1) of sorted by the
// nearest-rank method: the smallest sample with at least q of all samples
// at or below it. It returns 0 for no samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(n)))
	rank = max(1, min(n, rank))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarize turns a load phase into a result row. cpu < 0 means the server
// CPU was not measured.
func summarize(target, scenario string, conc int, st loadStats, cpu time.Duration) httpResult {
	lat := slices.Clone(st.latencies)
	slices.Sort(lat)
	r := httpResult{
		Type: "result", Target: target, Scenario: scenario, Mode: "closed", Concurrency: conc,
		Seconds: st.elapsed.Seconds(), Requests: len(lat), Errors: st.errors,
		P50Ms: ms(percentile(lat, 0.50)), P99Ms: ms(percentile(lat, 0.99)),
		CPUUsPerReq: -1, ServerCPU: -1,
	}
	if st.scheduled > 0 {
		r.Mode = "open"
		r.Open = &openResult{Scheduled: st.scheduled, Late: st.late, WaitedForConn: st.waited, Unsent: st.unsent}
	}
	if st.elapsed > 0 {
		r.RPS = float64(len(lat)) / st.elapsed.Seconds()
	}
	if len(lat) > 0 {
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		r.MeanMs = ms(sum / time.Duration(len(lat)))
		r.MaxMs = ms(lat[len(lat)-1])
	}
	if cpu >= 0 {
		r.ServerCPU = cpu.Seconds()
		if len(lat) > 0 {
			r.CPUUsPerReq = float64(cpu) / float64(time.Microsecond) / float64(len(lat))
		}
	}
	return r
}

// parseProcStat returns utime+stime (in clock ticks) from the contents of
// /proc/PID/stat. The command name (field 2) is in parentheses and may
// itself contain spaces and parentheses, so fields are counted from the
// last ')'.
func parseProcStat(b []byte) (int64, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want >= 13", len(f))
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: utime: %w", err)
	}
	stt, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: stime: %w", err)
	}
	return ut + stt, nil
}

// ticksToDuration converts clock ticks (USER_HZ) to a duration.
func ticksToDuration(t int64) time.Duration {
	return time.Duration(t) * (time.Second / clockTicks)
}

// procCPU returns the CPU time (user+system, all threads) that process pid
// has used so far.
func procCPU(pid int) (time.Duration, error) {
	d, _, err := procCPURes(pid)
	return d, err
}

// procCPURes is procCPU with the resolution of its reading: to the
// nanosecond from the process's CPU-time clock (processCPUClock), else in
// clock ticks from /proc/PID/stat.
func procCPURes(pid int) (cpu, resolution time.Duration, err error) {
	if pid <= 0 {
		return 0, 0, errors.New("no pid")
	}
	if d, err := processCPUClock(pid); err == nil {
		return d, time.Nanosecond, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	t, err := parseProcStat(b)
	if err != nil {
		return 0, 0, err
	}
	return ticksToDuration(t), ticksToDuration(1), nil
}

func numCPU() int { return min(runtime.NumCPU(), runtime.GOMAXPROCS(0)) }

// comparison is one yaps target against PocketBase on one scenario; also a
// JSON line.
type comparison struct {
	Type       string  `json:"type"` // "compare"
	Scenario   string  `json:"scenario"`
	Target     string  `json:"target"`
	Peer       string  `json:"peer"`
	Throughput float64 `json:"throughputRatio"` // target rps / peer rps
	P99Ms      float64 `json:"p99Ms"`
	PeerP99Ms  float64 `json:"peerP99Ms"`
	// Met: at least 2× the peer's throughput at a lower p99 (issue 3).
	// Always false in open-loop mode, where both are offered the same
	// rate and the throughput ratio says whether they kept it.
	Met  bool   `json:"met"`
	Mode string `json:"mode"`
}

// compareResults compares every yaps row with the PocketBase row of the
// same scenario.
func compareResults(rs []httpResult) []comparison {
	peer := map[string]httpResult{}
	for _, r := range rs {
		if r.Target == targetPocketBase {
			peer[r.Scenario] = r
		}
	}
	var out []comparison
	for _, r := range rs {
		p, ok := peer[r.Scenario]
		if r.Target == targetPocketBase || !ok || p.RPS == 0 {
			continue
		}
		c := comparison{
			Type: "compare", Scenario: r.Scenario, Target: r.Target, Peer: targetPocketBase,
			Throughput: r.RPS / p.RPS, P99Ms: r.P99Ms, PeerP99Ms: p.P99Ms, Mode: r.Mode,
		}
		c.Met = c.Throughput >= 2 && r.P99Ms < p.P99Ms && r.Errors == 0 && r.Open == nil
		out = append(out, c)
	}
	return out
}

// fmtMs formats milliseconds with 2 decimals below 10 ms, 1 above.
func fmtMs(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

func fmtCPU(us float64) string {
	if us < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(us, 'f', 0, 64)
}

// writeResultTable writes the result rows. Open-loop rows add the offered
// rate and the late requests (sent late or not at all); when any row has
// Postgres's background CPU, a column shows it apart from CPU µs/req.
func writeResultTable(w io.Writer, rs []httpResult) {
	open, bg := false, false
	for _, r := range rs {
		open = open || r.Open != nil
		bg = bg || r.PGBgUsPerReq >= 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "target\tscenario\treq/s\tp50\tp99\tCPU µs/req\tof which pg\t"
	if open {
		head = "target\tscenario\toffered\treq/s\tp50\tp99\tlate\tCPU µs/req\tof which pg\t"
	}
	if bg {
		head += "pg background µs/req\t"
	}
	fmt.Fprintln(tw, head+"errors\t")
	for _, r := range rs {
		db := "-"
		if r.DBUsPerReq >= 0 {
			db = fmtCPU(r.DBUsPerReq)
		}
		fmt.Fprintf(tw, "%s\t%s\t", r.Target, r.Scenario)
		if open {
			offered, late := "-", "-"
			if o := r.Open; o != nil {
				offered = strconv.FormatFloat(o.OfferedRPS, 'f', -1, 64)
				late = fmt.Sprintf("%d (%.1f%%)", o.Late+o.Unsent, 100*float64(o.Late+o.Unsent)/float64(max(o.Scheduled, 1)))
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t", offered, r.RPS, fmtMs(r.P50Ms), fmtMs(r.P99Ms), late)
		} else {
			fmt.Fprintf(tw, "%.0f\t%s\t%s\t", r.RPS, fmtMs(r.P50Ms), fmtMs(r.P99Ms))
		}
		fmt.Fprintf(tw, "%s\t%s\t", fmtCPU(r.CPUUsPerReq), db)
		if bg {
			pgbg := "-"
			if r.PGBgUsPerReq >= 0 {
				pgbg = fmtCPU(r.PGBgUsPerReq)
			}
			fmt.Fprintf(tw, "%s\t", pgbg)
		}
		fmt.Fprintf(tw, "%d\t\n", r.Errors)
	}
	tw.Flush()
}

// tableNotes explains what the table's columns hold in this run, where
// that is not obvious from the header.
func tableNotes(cfg benchHTTPConfig, rs []httpResult) []string {
	var notes []string
	for _, r := range rs {
		if r.Open != nil {
			notes = append(notes, fmt.Sprintf("open loop: p50/p99 from each request's intended start; req/s is the achieved rate; late = sent ≥ %s after the intended start or not sent at all (JSON: late, waitedForConnection, unsent)", openLateAfter))
			break
		}
	}
	for _, r := range rs {
		if r.PGBgUsPerReq >= 0 {
			notes = append(notes, "pg background: Postgres's checkpointer, WAL writer, background writer and autovacuum during the slices (and until idle after them), shared by every database on that server; not in CPU µs/req")
			break
		}
	}
	if cfg.url != "" && cfg.pid > 0 && cfg.pgDB == "" && len(cfg.targets) == 1 && cfg.targets[0] != targetPocketBase {
		notes = append(notes, "CPU µs/req is the --pid process's only: if this server uses Postgres, its backends' CPU is NOT included (--postgres-db NAME counts that database's backends)")
	}
	return notes
}

func writeCompareTable(w io.Writer, cs []comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "vs pocketbase\tscenario\tthroughput\tp99\tpeer p99\t≥2× and lower p99\t")
	for _, c := range cs {
		verdict := "no"
		if c.Met {
			verdict = "yes"
		}
		if c.Mode == "open" {
			verdict = "n/a (open loop)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f×\t%s\t%s\t%s\t\n",
			c.Target, c.Scenario, c.Throughput, fmtMs(c.P99Ms), fmtMs(c.PeerP99Ms), verdict)
	}
	tw.Flush()
}

func writeJSONLine(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}
