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
					if st.firstErr == "" {
						st.firstErr = err.Error()
					}
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
					if st.firstErr == "" {
						st.firstErr = err.Error()
					}
					mu.Unlock()
					time.Sleep(10 * time.Millisecond) // don't spin on a dead server
				case status/100 != 2:
					errCount[w]++
					mu.Lock()
					if st.firstErr == "" {
						st.firstErr = fmt.Sprintf("%s %s: status %d", req.Method, req.URL.Path, status)
					}
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
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return st, err
	}
	if st.firstErr != "" && len(st.latencies) == 0 && st.errors == 0 {
		return st, errors.New(st.firstErr) // request construction failed
	}
	return st, nil
}

// httpResult is one target × scenario row; it is also the JSON line.
type httpResult struct {
	Type        string  `json:"type"` // "result"
	Target      string  `json:"target"`
	Scenario    string  `json:"scenario"`
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
		Type: "result", Target: target, Scenario: scenario, Concurrency: conc,
		Seconds: st.elapsed.Seconds(), Requests: len(lat), Errors: st.errors,
		P50Ms: ms(percentile(lat, 0.50)), P99Ms: ms(percentile(lat, 0.99)),
		CPUUsPerReq: -1, ServerCPU: -1,
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
	if pid <= 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	t, err := parseProcStat(b)
	if err != nil {
		return 0, err
	}
	return ticksToDuration(t), nil
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
	Met bool `json:"met"`
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
			Throughput: r.RPS / p.RPS, P99Ms: r.P99Ms, PeerP99Ms: p.P99Ms,
		}
		c.Met = c.Throughput >= 2 && r.P99Ms < p.P99Ms && r.Errors == 0
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

func writeResultTable(w io.Writer, rs []httpResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tscenario\treq/s\tp50\tp99\tCPU µs/req\tof which pg\terrors\t")
	for _, r := range rs {
		db := "-"
		if r.DBUsPerReq >= 0 {
			db = fmtCPU(r.DBUsPerReq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%d\t\n",
			r.Target, r.Scenario, r.RPS, fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtCPU(r.CPUUsPerReq), db, r.Errors)
	}
	tw.Flush()
}

func writeCompareTable(w io.Writer, cs []comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "vs pocketbase\tscenario\tthroughput\tp99\tpeer p99\t≥2× and lower p99\t")
	for _, c := range cs {
		verdict := "no"
		if c.Met {
			verdict = "yes"
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
