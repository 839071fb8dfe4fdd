package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBenchPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	cases := []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of 4 is the 2nd", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"median of 5 is the 3rd", ms(1, 2, 3, 4, 5), 0.5, 3 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p100 is the max", ms(hundred...), 1, 100 * time.Millisecond},
		{"tiny q is the min", ms(hundred...), 0.0001, 1 * time.Millisecond},
	}
	for _, c := range cases {
		if got := percentile(c.in, c.q); got != c.want {
			t.Errorf("%s: percentile(q=%v) = %v, want %v", c.name, c.q, got, c.want)
		}
	}
}

func TestBenchParseProcStat(t *testing.T) {
	// A real line, with a command name holding spaces and parentheses.
	line := "4242 (yaps (x) serve) S 1 4242 4242 0 -1 4194560 1234 0 0 0 " +
		"350 120 0 0 20 0 12 0 99999 1234567 890 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 470 {
		t.Fatalf("utime+stime = %d ticks, want 470", got)
	}
	if d := ticksToDuration(got); d != 4700*time.Millisecond {
		t.Fatalf("ticksToDuration(470) = %v, want 4.7s", d)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 12 13"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q): no error", bad)
		}
	}
}

func TestBenchProcCPUSelf(t *testing.T) {
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("procCPU of a missing pid: no error")
	}
	if _, err := procCPU(0); err == nil {
		t.Error("procCPU(0): no error")
	}
}

func TestBenchSummarize(t *testing.T) {
	st := loadStats{elapsed: 2 * time.Second, errors: 1}
	for i := 100; i >= 1; i-- { // unsorted on purpose
		st.latencies = append(st.latencies, time.Duration(i)*time.Millisecond)
	}
	r := summarize("yaps-sqlite", "get-list", 16, st, 50*time.Millisecond)
	if r.Requests != 100 || r.Errors != 1 || r.RPS != 50 {
		t.Errorf("requests/errors/rps = %d/%d/%v, want 100/1/50", r.Requests, r.Errors, r.RPS)
	}
	if r.P50Ms != 50 || r.P99Ms != 99 || r.MaxMs != 100 || r.MeanMs != 50.5 {
		t.Errorf("p50/p99/max/mean = %v/%v/%v/%v", r.P50Ms, r.P99Ms, r.MaxMs, r.MeanMs)
	}
	if r.CPUUsPerReq != 500 || r.ServerCPU != 0.05 {
		t.Errorf("cpu µs/req = %v, server cpu = %v, want 500, 0.05", r.CPUUsPerReq, r.ServerCPU)
	}
	if st.latencies[0] != 100*time.Millisecond {
		t.Error("summarize reordered its input")
	}
	if r := summarize("pocketbase", "get-list", 1, loadStats{}, -1); r.CPUUsPerReq != -1 || r.RPS != 0 {
		t.Errorf("empty, unmeasured: %+v", r)
	}
}

func TestBenchCompareAndOutput(t *testing.T) {
	rs := []httpResult{
		{Type: "result", Target: "yaps-sqlite", Scenario: "list-yaps", RPS: 3000, P50Ms: 2, P99Ms: 9.5, CPUUsPerReq: 310, DBUsPerReq: -1},
		{Type: "result", Target: "yaps-postgres", Scenario: "list-yaps", RPS: 1000, P50Ms: 5, P99Ms: 30, CPUUsPerReq: -1, DBUsPerReq: 123},
		{Type: "result", Target: "pocketbase", Scenario: "list-yaps", RPS: 1000, P50Ms: 4, P99Ms: 20, CPUUsPerReq: 900, DBUsPerReq: -1},
		{Type: "result", Target: "yaps-sqlite", Scenario: "get-list", RPS: 9000, P99Ms: 3, DBUsPerReq: -1},
	}
	cs := compareResults(rs)
	if len(cs) != 2 {
		t.Fatalf("got %d comparisons, want 2 (no peer row for get-list): %+v", len(cs), cs)
	}
	if c := cs[0]; c.Target != "yaps-sqlite" || c.Throughput != 3 || !c.Met {
		t.Errorf("sqlite comparison: %+v", c)
	}
	if c := cs[1]; c.Target != "yaps-postgres" || c.Throughput != 1 || c.Met {
		t.Errorf("postgres comparison: %+v", c)
	}

	var buf bytes.Buffer
	writeResultTable(&buf, rs)
	out := buf.String()
	for _, want := range []string{"req/s", "CPU µs/req", "yaps-sqlite", "3000", "9.50 ms", "30.0 ms", "n/a", "310", "of which pg", "123", " - "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != len(rs)+1 {
		t.Errorf("table has %d lines, want %d:\n%s", n, len(rs)+1, out)
	}
	buf.Reset()
	writeCompareTable(&buf, cs)
	if out := buf.String(); !strings.Contains(out, "3.00×") || !strings.Contains(out, "yes") || !strings.Contains(out, "no") {
		t.Errorf("compare table:\n%s", out)
	}

	buf.Reset()
	writeJSONLine(&buf, rs[0])
	var back map[string]any
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back["type"] != "result" || back["target"] != "yaps-sqlite" || back["rps"] != 3000.0 || back["p99Ms"] != 9.5 {
		t.Errorf("JSON line: %s", buf.String())
	}
	if !strings.HasSuffix(buf.String(), "}\n") || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("not one JSON line: %q", buf.String())
	}
}

func TestBenchHTTPFlags(t *testing.T) {
	ok := benchHTTPConfig{targets: []string{"pocketbase"}, scenarios: []string{"get-list"}, concurrency: 1, duration: time.Second, seed: 10, pageSize: 50, rounds: 1, maxInflight: 256}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(c *benchHTTPConfig){
		func(c *benchHTTPConfig) { c.rate = 500; c.scenarios = []string{"mixed"} },
		func(c *benchHTTPConfig) { c.targets, c.url, c.pid, c.pgDB = []string{"yaps"}, "http://x", 1, "yaps" },
	} {
		c := ok
		f(&c)
		if err := c.validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := []func(c *benchHTTPConfig){
		func(c *benchHTTPConfig) { c.targets = []string{"mysql"} },
		func(c *benchHTTPConfig) { c.scenarios = []string{"delete-everything"} },
		func(c *benchHTTPConfig) { c.url = "http://x"; c.targets = []string{"yaps", "pocketbase"} },
		func(c *benchHTTPConfig) { c.pageSize = 201 },
		func(c *benchHTTPConfig) { c.duration = 0 },
		func(c *benchHTTPConfig) { c.concurrency = 0 },
		func(c *benchHTTPConfig) { c.duration = 2 * time.Hour },
		func(c *benchHTTPConfig) { c.rounds = 0 },
		func(c *benchHTTPConfig) { c.clientProcs = -1 },
		func(c *benchHTTPConfig) { c.rate = -1 },
		func(c *benchHTTPConfig) { c.rate = math.NaN() },
		func(c *benchHTTPConfig) { c.maxInflight = 0 },
		func(c *benchHTTPConfig) { c.pgDB = "yaps" },                              // without --url
		func(c *benchHTTPConfig) { c.pgDB, c.url = "yaps", "http://x" },           // without --pid
		func(c *benchHTTPConfig) { c.pgDB, c.url, c.pid = "yaps", "http://x", 1 }, // pocketbase
	}
	for i, f := range bad {
		c := ok
		f(&c)
		if err := c.validate(); err == nil {
			t.Errorf("case %d: no error for %+v", i, c)
		}
	}
	if got := benchSplit(" a, ,b,"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("benchSplit = %q", got)
	}
}

func TestBenchDBDelta(t *testing.T) {
	a := map[int]time.Duration{1: 100, 2: 50, 3: 70} // 3 vanished: lost
	b := map[int]time.Duration{1: 130, 2: 50, 4: 20} // 4 is new: counts fully
	if got := dbDelta(a, b); got != 50 {
		t.Errorf("dbDelta = %v, want 50", got)
	}
	if got := dbDelta(nil, nil); got != 0 {
		t.Errorf("dbDelta(nil, nil) = %v", got)
	}
}

// TestBenchHTTPAgainstFake runs the whole command (--url mode) for a moment
// against a minimal in-process stand-in for the Yaps API, to check the
// plumbing: setup, probe, scenarios, JSON lines. No timing assertions.
func TestBenchHTTPAgainstFake(t *testing.T) {
	var (
		mu    sync.Mutex
		lists = map[string]int{} // ref -> yap count
		procs = map[int]bool{}   // GOMAXPROCS seen while serving creates
	)
	auth := func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer yap_") {
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
			return false
		}
		return true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/lists", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ref := fmt.Sprintf("l%d", len(lists))
		lists[ref] = 0
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"ref":%q,"ownerCode":"yap_%s","list":{}}`, ref, ref)
	})
	mux.HandleFunc("POST /api/v1/lists/{ref}/yaps", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		if !auth(w, r) || json.NewDecoder(r.Body).Decode(&body) != nil || body["kind"] != "task" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		lists[r.PathValue("ref")]++
		procs[runtime.GOMAXPROCS(0)] = true // the server shares the generator's process here
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"x"}`)
	})
	mux.HandleFunc("GET /api/v1/lists/{ref}/yaps", func(w http.ResponseWriter, r *http.Request) {
		if !auth(w, r) {
			return
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		mu.Lock()
		n := min(limit, lists[r.PathValue("ref")])
		mu.Unlock()
		// Over net/http's 2 KiB buffer without a Content-Length: a chunked
		// answer, which the raw client must read to the end too.
		io.WriteString(w, `{"yaps":[`+strings.TrimSuffix(strings.Repeat(`{},`, n), ",")+`],"nextCursor":null`+strings.Repeat(" ", 4096)+`}`)
	})
	mux.HandleFunc("GET /api/v1/lists/{ref}", func(w http.ResponseWriter, r *http.Request) {
		if auth(w, r) {
			io.WriteString(w, `{"list":{},"role":"owner"}`)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The load generator runs with --client-procs Go processors (default
	// 1) and gives the process its own number back afterwards.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	for _, tc := range []struct {
		client, procs string
		want          int
	}{
		{"--std-client=false", "", 1},
		{"--std-client=true", "--client-procs=0", 3},
	} {
		client := tc.client
		mu.Lock()
		clear(procs)
		mu.Unlock()
		var stdout, stderr bytes.Buffer
		args := []string{
			"--targets", "yaps", "--url", srv.URL + "/api/v1", "--json", client,
			"-c", "2", "-d", "300ms", "--warmup", "0", "--seed", "60", "--page", "50",
		}
		if tc.procs != "" {
			args = append(args, tc.procs)
		}
		err := runBenchHTTP(context.Background(), args, &stdout, &stderr)
		if err != nil {
			t.Fatalf("%s: %v\n%s", client, err, stderr.String())
		}
		mu.Lock()
		if len(procs) != 1 || !procs[tc.want] {
			t.Errorf("%s %s: GOMAXPROCS while loading %v, want only %d", client, tc.procs, procs, tc.want)
		}
		mu.Unlock()
		if n := runtime.GOMAXPROCS(0); n != 3 {
			t.Errorf("%s %s: GOMAXPROCS %d after the run, want 3 back", client, tc.procs, n)
		}
		if want := fmt.Sprintf("%d CPUs", min(runtime.NumCPU(), 3)); !strings.Contains(stderr.String(), want) {
			t.Errorf("%s %s: header does not say %q:\n%s", client, tc.procs, want, stderr.String())
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var r httpResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: bad JSON line %q: %v", client, line, err)
			}
			if r.Requests == 0 || r.Errors != 0 || r.CPUUsPerReq != -1 {
				t.Errorf("%s %s: requests %d, errors %d, cpu %v (want >0, 0, -1 without --pid)", client, r.Scenario, r.Requests, r.Errors, r.CPUUsPerReq)
			}
			got = append(got, r.Scenario)
		}
		if want := "create-yap,create-yap-shared,list-yaps,get-list"; strings.Join(got, ",") != want {
			t.Errorf("%s: scenarios %v, want %s", client, got, want)
		}
		if !strings.Contains(stderr.String(), "req/s") {
			t.Errorf("%s: no table on stderr:\n%s", client, stderr.String())
		}
	}
	// Open loop, with the mixed scenario: 200 req/s for 300 ms is 60
	// requests scheduled per scenario.
	mu.Lock()
	mixedRef := fmt.Sprintf("l%d", len(lists)+1) // setup creates the read list, then the mixed one
	mu.Unlock()
	var stdout, stderr bytes.Buffer
	err := runBenchHTTP(context.Background(), []string{
		"--targets", "yaps", "--url", srv.URL + "/api/v1", "--json", "--rate", "200", "--max-inflight", "8",
		"--scenarios", "create-yap,mixed", "-c", "2", "-d", "300ms", "--warmup", "0", "--seed", "60", "--page", "50",
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("open loop: %v\n%s", err, stderr.String())
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r httpResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("open loop: bad JSON line %q: %v", line, err)
		}
		o := r.Open
		if r.Mode != "open" || o == nil || o.OfferedRPS != 200 || o.MaxInflight != 8 || r.Concurrency != 8 || o.Scheduled != 60 {
			t.Errorf("open loop %s: mode %q, concurrency %d, open %+v", r.Scenario, r.Mode, r.Concurrency, o)
		} else if r.Requests == 0 || r.Errors != 0 || r.Requests+o.Unsent != 60 {
			t.Errorf("open loop %s: requests %d, errors %d, unsent %d (want all 60 accounted for)", r.Scenario, r.Requests, r.Errors, o.Unsent)
		}
		got = append(got, r.Scenario)
	}
	if strings.Join(got, ",") != "create-yap,mixed" {
		t.Errorf("open loop: scenarios %v", got)
	}
	for _, want := range []string{"OPEN LOOP at 200 req/s", "offered", "late", "achieved"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("open loop: stderr lacks %q:\n%s", want, stderr.String())
		}
	}

	mu.Lock()
	defer mu.Unlock()
	// The mixed list holds the seed plus the mixed scenario's writes.
	if n := lists[mixedRef]; n <= 60 {
		t.Errorf("mixed list holds %d yaps, want the 60 seeded and some written", n)
	}
	if lists["l0"] != 60 { // the first run's read list
		t.Errorf("read list holds %d yaps, want the 60 seeded", lists["l0"])
	}
}

func TestBenchRawConnReconnects(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("close") != "" {
			w.Header().Set("Connection", "close")
		}
		n.Add(1)
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	}))
	defer srv.Close()
	rc := &rawConn{}
	defer rc.close()
	post := func(q string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/x"+q, strings.NewReader(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if status, err := rc.do(req); err != nil || status != http.StatusCreated {
			t.Fatalf("do%s: status %d, err %v", q, status, err)
		}
	}
	post("")
	post("?close=1") // the server asks to close: the next request redials
	if rc.c != nil {
		t.Error("connection kept after Connection: close")
	}
	post("")
	srv.CloseClientConnections() // a kept-alive connection dies while idle
	post("")                     // retried once on a fresh connection, body replayed
	if got := n.Load(); got != 4 {
		t.Errorf("server saw %d requests, want 4", got)
	}
}

func TestBenchPermutation(t *testing.T) {
	seen := map[string]bool{}
	after := map[[2]int]int{} // [a, b]: times b ran right after a
	for r := range 6 {
		p := permutation(3, r)
		seen[fmt.Sprint(p)] = true
		for i := 1; i < len(p); i++ {
			after[[2]int{p[i-1], p[i]}]++
		}
	}
	if len(seen) != 6 {
		t.Errorf("6 rounds of 3 targets gave %d distinct orders, want 6: %v", len(seen), seen)
	}
	for a := range 3 {
		for b := range 3 {
			if a != b && after[[2]int{a, b}] != 2 {
				t.Errorf("%d ran right after %d %d times, want 2", b, a, after[[2]int{a, b}])
			}
		}
	}
	if got := fmt.Sprint(permutation(3, 7)); got != fmt.Sprint(permutation(3, 1)) {
		t.Errorf("permutation(3, 7) = %s, want it to wrap to permutation(3, 1)", got)
	}
	if got := permutation(1, 5); len(got) != 1 || got[0] != 0 {
		t.Errorf("permutation(1, 5) = %v", got)
	}
	if got := permutation(0, 0); len(got) != 0 {
		t.Errorf("permutation(0, 0) = %v", got)
	}
}

// TestSpawnPocketBase builds and starts the peer as a plain bench run does
// (no --pocketbase-bin): the build must not land inside the target's data
// directory, as it once did (exec then failed with "permission denied").
func TestSpawnPocketBase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds PocketBase")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := benchHTTPConfig{pbSrc: filepath.Join("..", "..", "bench", "pocketbase"), startTimeout: time.Minute}
	var log bytes.Buffer
	s, err := spawnTarget(ctx, cfg, targetPocketBase, t.TempDir(), &log)
	require.NoError(t, err, log.String())
	defer s.stop(io.Discard)
	res, err := http.Get(s.base + "/api/health")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestBenchOpenSchedule(t *testing.T) {
	cases := []struct {
		rate float64
		dur  time.Duration
		n    int
	}{
		{200, 1500 * time.Millisecond, 300},
		{3, time.Second, 3}, // 0, 333 ms, 667 ms; 1 s is past the end
		{1000, time.Millisecond, 1},
		{0.5, time.Second, 1}, // only request 0 (at 0) is due
		{1e6, 10 * time.Millisecond, 10000},
	}
	for _, c := range cases {
		n, at := openSchedule(c.rate, c.dur)
		if n != c.n {
			t.Errorf("openSchedule(%v, %v): %d requests, want %d", c.rate, c.dur, n, c.n)
		}
		if at(0) != 0 || at(n-1) >= c.dur || at(n) < c.dur {
			t.Errorf("openSchedule(%v, %v): at(0) = %v, at(n-1) = %v, at(n) = %v", c.rate, c.dur, at(0), at(n-1), at(n))
		}
	}
	_, at := openSchedule(200, time.Second)
	for k := 1; k < 200; k++ {
		if d := at(k) - at(k-1); d < 5*time.Millisecond-time.Nanosecond || d > 5*time.Millisecond+time.Nanosecond {
			t.Fatalf("requests %d and %d are %v apart, want 5ms", k-1, k, d)
		}
	}
}

// urlAPI is an api that sends GET url for every request.
type urlAPI struct{ url string }

func (u urlAPI) setup(context.Context, *http.Client, int, int, bool) error { return nil }
func (u urlAPI) request(string, int, int) (*http.Request, error) {
	return http.NewRequest(http.MethodGet, u.url, nil)
}
func (u urlAPI) checkPage([]byte) (int, error) { return 0, nil }

// stallServer answers at once, except that request number trigger (from
// 1) makes the whole server stall for stall: it and every request that
// arrives before the stall ends are answered only after it.
type stallServer struct {
	trigger int32
	stall   time.Duration
	n       atomic.Int32
	mu      sync.Mutex
	from    time.Time // the stall; zero until it happened
	until   time.Time
}

func (s *stallServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := s.n.Add(1)
	s.mu.Lock()
	if k == s.trigger {
		s.from = time.Now()
		s.until = s.from.Add(s.stall)
	}
	until := s.until
	s.mu.Unlock()
	if d := time.Until(until); d > 0 {
		time.Sleep(d)
	}
	io.WriteString(w, "ok")
}

func (s *stallServer) window() (from, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from, s.until
}

func rawDoers(n int) []doer {
	ds := make([]doer, n)
	for i := range ds {
		ds[i] = &rawConn{}
	}
	return ds
}

func closeDoers(ds []doer) {
	for _, d := range ds {
		d.(*rawConn).close()
	}
}

func countAtLeast(lat []time.Duration, min time.Duration) int {
	n := 0
	for _, d := range lat {
		if d >= min {
			n++
		}
	}
	return n
}

// TestBenchOpenLoopShowsStall: a server that stalls for 200 ms once. The
// closed loop's p99 hides it (only the requests in flight wait); the open
// loop charges the stall to every request scheduled during it.
func TestBenchOpenLoopShowsStall(t *testing.T) {
	const stall = 200 * time.Millisecond

	// Closed loop, 2 workers.
	cs := &stallServer{trigger: 20, stall: stall}
	csrv := httptest.NewServer(cs)
	defer csrv.Close()
	cd := rawDoers(2)
	defer closeDoers(cd)
	st, err := load(context.Background(), cd, urlAPI{csrv.URL}, "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if from, _ := cs.window(); from.IsZero() {
		t.Fatalf("closed loop: the server never stalled (%d requests)", len(st.latencies))
	}
	// Each worker has one request in flight, so at most 2 see the stall.
	if n := countAtLeast(st.latencies, stall*3/4); n < 1 || n > 2 {
		t.Errorf("closed loop: %d requests took >= %v, want 1 or 2 (one per worker at most)", n, stall*3/4)
	}
	r := summarize("fake", "x", 2, st, -1)
	if r.Mode != "closed" || r.Open != nil {
		t.Errorf("closed loop: mode %q, open %+v", r.Mode, r.Open)
	}
	if len(st.latencies) >= 300 && r.P99Ms >= ms(stall*3/4) {
		t.Errorf("closed loop: p99 %.1f ms over %d requests; the stall should hide below it", r.P99Ms, len(st.latencies))
	}
	t.Logf("closed loop: %d requests, p99 %.2f ms, max %.1f ms", r.Requests, r.P99Ms, r.MaxMs)

	// Open loop, 200 req/s for 1.5 s: the stall starts at request 20,
	// about 100 ms in.
	ss := &stallServer{trigger: 20, stall: stall}
	osrv := httptest.NewServer(ss)
	defer osrv.Close()
	od := rawDoers(64)
	defer closeDoers(od)
	st, err = loadOpen(context.Background(), od, urlAPI{osrv.URL}, "x", 1500*time.Millisecond, 200, 16)
	if err != nil {
		t.Fatal(err)
	}
	from, until := ss.window()
	if from.IsZero() {
		t.Fatal("open loop: the server never stalled")
	}
	if st.scheduled != 300 || len(st.latencies)+st.errors+st.unsent != st.scheduled {
		t.Errorf("open loop: scheduled %d, answered %d, errors %d, unsent %d; want 300 scheduled, all accounted for",
			st.scheduled, len(st.latencies), st.errors, st.unsent)
	}
	if st.unsent > 30 {
		t.Errorf("open loop: %d of 300 requests unsent against a fast server", st.unsent)
	}
	// Every request due during the stall is answered after it ends, and
	// its latency counts from when it was due.
	during := 0
	for i, lat := range st.latencies {
		due := st.start.Add(st.intended[i])
		if due.Before(from) || due.After(until) {
			continue
		}
		during++
		if min := until.Sub(due); lat < min {
			t.Errorf("open loop: request due %v into the stall took %v, less than the %v left of it", due.Sub(from), lat, min)
		}
	}
	if during < 20 { // 40 are due in 200 ms at 200/s
		t.Errorf("open loop: %d answered requests were due during the stall, want >= 20", during)
	}
	if n := countAtLeast(st.latencies, stall); n < 1 {
		t.Error("open loop: no request took the whole stall (the trigger was due before it began)")
	}
	r = summarize("fake", "x", 64, st, -1)
	if r.Mode != "open" || r.Open == nil || r.Open.Scheduled != 300 {
		t.Errorf("open loop: mode %q, open %+v", r.Mode, r.Open)
	}
	// About 20 of 300 requests were due in the first half of the stall
	// and took >= 100 ms: well over 1 %.
	if r.P99Ms < ms(stall/2) {
		t.Errorf("open loop: p99 %.1f ms, want >= %v (the stall)", r.P99Ms, stall/2)
	}
	t.Logf("open loop: %d requests, %d due during the stall, p99 %.1f ms, max %.1f ms, late %d, unsent %d",
		r.Requests, during, r.P99Ms, r.MaxMs, st.late, st.unsent)
}

// TestBenchOpenLoopMaxInflight: a server that needs 50 ms per request,
// offered 200 req/s over 2 connections (capacity 40/s). The open loop
// must say it could not keep up.
func TestBenchOpenLoopMaxInflight(t *testing.T) {
	const service = 50 * time.Millisecond
	var inflight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(service)
		inflight.Add(-1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ds := rawDoers(2)
	defer closeDoers(ds)
	st, err := loadOpen(context.Background(), ds, urlAPI{srv.URL}, "x", time.Second, 200, 16)
	if err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m > 2 {
		t.Errorf("server saw %d requests at once, want <= 2 (--max-inflight)", m)
	}
	sent := len(st.latencies) + st.errors
	// At most 2 in flight for 50 ms each: at most 42 sent within 1 s.
	if st.scheduled != 200 || sent > 42 || sent+st.unsent != 200 {
		t.Errorf("scheduled %d, sent %d, unsent %d; want 200, <= 42, the rest unsent", st.scheduled, sent, st.unsent)
	}
	if st.waited < 1 || st.late < st.waited || st.late < sent-4 {
		t.Errorf("late %d, waited for a connection %d of %d sent: the queue should make nearly all late", st.late, st.waited, sent)
	}
	if n := countAtLeast(st.latencies, service); n != len(st.latencies) {
		t.Errorf("%d of %d latencies below the server's %v", len(st.latencies)-n, len(st.latencies), service)
	}
	// Request k is sent after about 25k ms and was due at 5k ms: the
	// backlog grows, and the latency with it.
	r := summarize("fake", "x", 2, st, -1)
	if r.MaxMs < 300 {
		t.Errorf("max latency %.1f ms, want >= 300 (the backlog's wait counts)", r.MaxMs)
	}
	if r.RPS > 100 {
		t.Errorf("achieved %.0f req/s of 200 offered through 2 connections of 50 ms", r.RPS)
	}
	t.Logf("sent %d of %d, late %d (waited %d), unsent %d, achieved %.0f req/s, p50 %.0f ms, max %.0f ms",
		sent, st.scheduled, st.late, st.waited, st.unsent, r.RPS, r.P50Ms, r.MaxMs)
}

func TestBenchMixedRequests(t *testing.T) {
	y := &yapsAPI{base: "http://h/api/v1", page: 50, readRef: "r", readCode: "yap_r", mixedRef: "m", mixedCode: "yap_m"}
	p := &pocketBaseAPI{base: "http://h", page: 50, readID: "R", mixedID: "M"}
	p.mixedURL, p.listURL = p.pageURL("M"), p.pageURL("R")
	for _, a := range []api{y, p} {
		writes := 0
		for w := range 4 {
			for i := range 100 {
				req, err := a.request(scenarioMixed, w, i)
				if err != nil {
					t.Fatal(err)
				}
				switch req.Method {
				case http.MethodPost:
					writes++
					b, _ := io.ReadAll(req.Body)
					if !strings.Contains(req.URL.Path, "/lists/m/") && !strings.Contains(string(b), `"list":"M"`) {
						t.Fatalf("%T: write not into the mixed list: %s %s", a, req.URL, b)
					}
				case http.MethodGet:
					if !strings.Contains(req.URL.Path, "/lists/m/yaps") && !strings.Contains(req.URL.RawQuery, "M") {
						t.Fatalf("%T: read not of the mixed list: %s", a, req.URL)
					}
					if q := req.URL.Query(); q.Get("limit") != "50" && q.Get("perPage") != "50" {
						t.Fatalf("%T: read not a page of 50: %s", a, req.URL)
					}
				}
				if _, ok := a.(*yapsAPI); ok && req.Header.Get("Authorization") != "Bearer yap_m" {
					t.Fatalf("yaps: mixed request without the mixed list's code: %q", req.Header.Get("Authorization"))
				}
			}
		}
		if writes != 40 {
			t.Errorf("%T: %d of 400 mixed requests are writes, want 40", a, writes)
		}
		if req, _ := a.request(scenarioMixed, 0, -1); req.Method != http.MethodGet {
			t.Errorf("%T: the probe's mixed request is a %s, want a read", a, req.Method)
		}
	}
}

func TestBenchOpenOutput(t *testing.T) {
	rs := []httpResult{
		{Target: "yaps-postgres", Scenario: "mixed", Mode: "open", RPS: 990, P50Ms: 1, P99Ms: 250, CPUUsPerReq: 400, DBUsPerReq: 150, PGBgUsPerReq: 12,
			Open: &openResult{OfferedRPS: 1000, MaxInflight: 256, Scheduled: 1000, Late: 30, WaitedForConn: 5, Unsent: 10}},
		{Target: "pocketbase", Scenario: "mixed", Mode: "open", RPS: 400, P50Ms: 900, P99Ms: 2000, CPUUsPerReq: 900, DBUsPerReq: -1, PGBgUsPerReq: -1,
			Open: &openResult{OfferedRPS: 1000, MaxInflight: 256, Scheduled: 1000, Unsent: 590}},
	}
	var buf bytes.Buffer
	writeResultTable(&buf, rs)
	out := buf.String()
	for _, want := range []string{"offered", "late", "pg background µs/req", "1000", "40 (4.0%)", "590 (59.0%)", "12", "250.0 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	cs := compareResults([]httpResult{
		{Target: "yaps-sqlite", Scenario: "get-list", Mode: "open", RPS: 1000, P99Ms: 1, Open: &openResult{}},
		{Target: "pocketbase", Scenario: "get-list", Mode: "open", RPS: 400, P99Ms: 9, Open: &openResult{}},
	})
	if len(cs) != 1 || cs[0].Met || cs[0].Mode != "open" {
		t.Errorf("open-loop comparison: %+v (never met: the rate is the same for both)", cs)
	}
	buf.Reset()
	writeCompareTable(&buf, cs)
	if !strings.Contains(buf.String(), "n/a (open loop)") {
		t.Errorf("compare table:\n%s", buf.String())
	}

	cfg := benchHTTPConfig{url: "http://x/api/v1", pid: 42, targets: []string{"yaps"}}
	notes := strings.Join(tableNotes(cfg, rs), "\n")
	for _, want := range []string{"intended start", "NOT included", "--postgres-db", "pg background"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	cfg.pgDB = "yaps"
	if notes := strings.Join(tableNotes(cfg, nil), "\n"); notes != "" {
		t.Errorf("notes with --postgres-db and no rows: %q", notes)
	}
}

// TestBenchPostgresAttach checks --postgres-db's database lookup and the
// background process query, on the server of YAPS_TEST_POSTGRES.
func TestBenchPostgresAttach(t *testing.T) {
	dsn := os.Getenv("YAPS_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("YAPS_TEST_POSTGRES not set")
	}
	ctx := context.Background()
	own, err := createPostgresDB(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer own.drop()
	if _, err := attachPostgresDB(ctx, dsn, own.name+"_missing"); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Errorf("attach to a missing database: %v", err)
	}
	att, err := attachPostgresDB(ctx, dsn, own.name)
	if err != nil {
		t.Fatal(err)
	}
	if att.owned {
		t.Error("an attached database is owned (would be dropped)")
	}
	if bg := att.background(ctx); len(bg) == 0 {
		t.Error("no background processes (checkpointer, ...) in pg_stat_activity")
	}
	att.drop() // closes the connection only
	var one int
	if err := own.admin.QueryRowContext(ctx, "SELECT 1 FROM pg_database WHERE datname = $1", own.name).Scan(&one); err != nil {
		t.Errorf("database gone after dropping the attached handle: %v", err)
	}
}

// create-yap-shared moves every target to a fresh shared list after
// sharedListYaps creates (so no run fills one list to its limit), and
// create-yap keeps each worker on a list of its own.
func TestBenchWriteList(t *testing.T) {
	t.Parallel()
	const workers = 4
	lists := sharedLists + workers
	var shared atomic.Int64
	counts := map[int]int{}
	for i := range 3 * sharedListYaps {
		l := writeList(scenarioCreateHot, i%workers, lists, &shared)
		counts[l]++
		require.Equal(t, i/sharedListYaps, l, "create %d", i)
	}
	require.Equal(t, map[int]int{0: sharedListYaps, 1: sharedListYaps, 2: sharedListYaps}, counts)
	shared.Store(sharedLists * sharedListYaps) // past the last: round again
	require.Equal(t, 0, writeList(scenarioCreateHot, 0, lists, &shared))

	for w := range 2 * workers {
		require.Equal(t, sharedLists+w%workers, writeList(scenarioCreateYap, w, lists, &shared))
	}
}
