package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
	ok := benchHTTPConfig{targets: []string{"pocketbase"}, scenarios: []string{"get-list"}, concurrency: 1, duration: time.Second, seed: 10, pageSize: 50, rounds: 1}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
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

	for _, client := range []string{"--std-client=false", "--std-client=true"} {
		var stdout, stderr bytes.Buffer
		err := runBenchHTTP(context.Background(), []string{
			"--targets", "yaps", "--url", srv.URL + "/api/v1", "--json", client,
			"-c", "2", "-d", "300ms", "--warmup", "0", "--seed", "60", "--page", "50",
		}, &stdout, &stderr)
		if err != nil {
			t.Fatalf("%s: %v\n%s", client, err, stderr.String())
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
	mu.Lock()
	defer mu.Unlock()
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
