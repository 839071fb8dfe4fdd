package main

// `yaps bench http`: an HTTP load generator that compares the Yaps server
// (on SQLite and on Postgres) with PocketBase serving the same records.
//
// The standard run is one command: it starts every target as a subprocess on
// a free loopback port (one target at a time, so they never compete for the
// CPU), seeds a list with 1,000 yaps, warms up, runs each scenario for a fixed
// duration with C closed-loop workers and reports requests/s, p50/p99 latency
// and the server's CPU time per request (the server process's CPU-time
// clock, procCPU, before and after each scenario). With --rate it runs
// an open loop instead: requests due at fixed times, latency from each
// request's intended start (loadOpen). See docs/benchmarks.md, section
// "HTTP".

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver, to create and drop the bench database
)

func init() {
	benchCommands["http"] = command{
		summary: "HTTP load test: yaps on SQLite and Postgres vs PocketBase (create-yap, list-yaps, get-list)",
		run:     runBenchHTTP,
	}
}

// Target names.
const (
	targetYapsSQLite   = "yaps-sqlite"
	targetYapsPostgres = "yaps-postgres"
	targetPocketBase   = "pocketbase"
)

// Scenario names.
const (
	scenarioCreateYap = "create-yap"        // each worker writes to its own list
	scenarioCreateHot = "create-yap-shared" // all workers write to one list
	scenarioListYaps  = "list-yaps"
	scenarioGetList   = "get-list"
	// scenarioMixed reads a list that changes: 90 % list-yaps and 10 %
	// create-yap, all on one list of its own (seeded like the read list).
	scenarioMixed = "mixed"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat. It is
// 100 on every Linux architecture Go supports (the kernel exports a fixed
// USER_HZ regardless of CONFIG_HZ).
const clockTicks = 100

type benchHTTPConfig struct {
	targets      []string
	scenarios    []string
	concurrency  int
	duration     time.Duration
	warmup       time.Duration
	seed         int
	pageSize     int
	jsonOut      bool
	yapsBin      string
	pbBin        string
	pbSrc        string
	postgres     string
	url          string
	pid          int
	keep         bool
	rounds       int
	stdClient    bool
	clientProcs  int // GOMAXPROCS of the load generator while it loads
	nice         int
	pbLogs       bool
	startTimeout time.Duration
	rate         float64 // open loop: requests per second (0: closed loop)
	maxInflight  int     // open loop: bound on requests in flight (connections)
	pgDB         string  // with --url: the server's Postgres database, for backend CPU
}

func runBenchHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yaps bench http", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg benchHTTPConfig
	targets := fs.String("targets", targetYapsSQLite+","+targetYapsPostgres+","+targetPocketBase,
		"comma-separated targets: yaps-sqlite, yaps-postgres, pocketbase")
	scenarios := fs.String("scenarios", scenarioCreateYap+","+scenarioCreateHot+","+scenarioListYaps+","+scenarioGetList,
		"comma-separated scenarios: create-yap (one list per worker), create-yap-shared (one list for all workers, a fresh one after every 5,000 creates), list-yaps, get-list, mixed (90% list-yaps and 10% create-yap on one list; not in the default)")
	fs.IntVar(&cfg.concurrency, "c", 16, "concurrent closed-loop workers")
	fs.DurationVar(&cfg.duration, "d", 10*time.Second, "measured duration of each scenario")
	fs.IntVar(&cfg.rounds, "rounds", 6, "split each scenario's duration into this many rounds, interleaving the targets (1: one block per target)")
	fs.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "warm-up duration before each scenario (not measured)")
	fs.IntVar(&cfg.seed, "seed", 1000, "yaps seeded into the list that list-yaps and get-list read")
	fs.IntVar(&cfg.pageSize, "page", 50, "page size of list-yaps")
	fs.BoolVar(&cfg.jsonOut, "json", false, "write JSON lines to stdout (the table goes to stderr)")
	fs.StringVar(&cfg.yapsBin, "yaps-bin", "", "yaps binary to spawn as BIN serve ... (default: this executable)")
	fs.StringVar(&cfg.pbBin, "pocketbase-bin", "", "PocketBase bench binary (default: build it from --pocketbase-src)")
	fs.StringVar(&cfg.pbSrc, "pocketbase-src", "bench/pocketbase", "directory of the PocketBase bench module (its own go.mod)")
	fs.StringVar(&cfg.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"Postgres server for yaps-postgres: the bench creates a fresh database there and drops it afterwards")
	fs.StringVar(&cfg.url, "url", "", "bench an already running server instead of spawning one (needs exactly one of --targets: yaps or pocketbase; yaps URL includes the prefix, e.g. http://127.0.0.1:4736/api/v1)")
	fs.IntVar(&cfg.pid, "pid", 0, "with --url: the server's PID, for CPU per request (0: not measured)")
	fs.BoolVar(&cfg.pbLogs, "pocketbase-logs", false, "keep PocketBase's request log (a SQLite row per request, on in a stock install); off by default, which makes the peer faster")
	fs.BoolVar(&cfg.stdClient, "std-client", false, "load with net/http's client instead of the leaner built-in HTTP/1.1 client (costs the shared CPU more per request)")
	fs.IntVar(&cfg.clientProcs, "client-procs", 1, "Go processors (GOMAXPROCS) the load generator uses while it loads; 0 keeps the process's. One leaves the other CPUs to the servers and costs the shared CPU less per request (create-yap on Postgres, 2 CPUs: 42-45 against 52-56 µs with 2)")
	fs.IntVar(&cfg.nice, "nice", 0, "run the load generator, the servers and the bench database's Postgres backends at this nice value; negative values (need root or CAP_SYS_NICE) let other work on a shared machine disturb the measurement less")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory (databases, server logs)")
	fs.DurationVar(&cfg.startTimeout, "start-timeout", 60*time.Second, "how long to wait for a spawned server to become healthy")
	fs.Float64Var(&cfg.rate, "rate", 0, "open loop: send this many requests per second (all connections together) at fixed intended start times and measure each latency from its intended start; 0: closed loop with -c workers")
	fs.IntVar(&cfg.maxInflight, "max-inflight", 256, "open loop: most requests in flight at once (one connection each); a request due while all are busy waits and counts as late")
	fs.StringVar(&cfg.pgDB, "postgres-db", "", "with --url and --pid: the Postgres database the server uses, on the server of --postgres; its backends' CPU is counted as the server's (column \"of which pg\") and Postgres's background processes are reported apart")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench http: unexpected arguments %q", fs.Args())
	}
	cfg.targets = benchSplit(*targets)
	cfg.scenarios = benchSplit(*scenarios)
	if err := cfg.validate(); err != nil {
		return err
	}

	if cfg.nice != 0 {
		// Threads and child processes inherit the nice value of the
		// thread that creates them, so the servers started below get it
		// too.
		if err := renice(os.Getpid(), cfg.nice); err != nil {
			fmt.Fprintf(stderr, "bench: --nice %d: %v (continuing at the default priority)\n", cfg.nice, err)
			cfg.nice = 0
		}
	}

	cpus := numCPU()
	if cfg.clientProcs > 0 {
		// The servers run in processes of their own, so this bounds the
		// load generator (and its setup: seeding, warm-up) alone. Restored
		// for a caller in the same process (tests).
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.clientProcs))
	}

	tmp, err := os.MkdirTemp("", "yaps-bench-http-")
	if err != nil {
		return err
	}
	if cfg.keep {
		fmt.Fprintf(stderr, "bench: temporary files in %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}

	table := stdout
	var jsonW io.Writer
	if cfg.jsonOut {
		table, jsonW = stderr, stdout
	}

	var (
		live    []*liveTarget
		failed  []string
		results []httpResult
	)
	defer func() {
		for _, t := range live {
			t.close(stderr)
		}
	}()
	for _, name := range cfg.targets {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(stderr, "bench: %s: starting\n", name)
		t, err := startTarget(ctx, cfg, name, tmp, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", name, err)
			failed = append(failed, name)
			continue
		}
		live = append(live, t)
	}
	rounds := min(cfg.rounds, max(1, int(cfg.duration/(500*time.Millisecond))))
	done := map[string]bool{}
	for _, s := range cfg.scenarios {
		if ctx.Err() != nil {
			break
		}
		for _, t := range live {
			if cfg.warmup > 0 {
				if _, err := t.load(ctx, cfg, s, cfg.warmup); err != nil {
					return err
				}
				waitQuiet(ctx, t.pid, quietMax)
			}
		}
		// Interleave the targets in rounds, so load from other processes on
		// the machine spreads over all of them instead of hitting whichever
		// ran at the wrong moment. Round r uses the r-th permutation of the
		// targets: with 3 targets and 6 rounds every order runs once, so
		// each target goes first, last and after each other equally often
		// (after-effects of one target, e.g. Postgres checkpoints, hit all).
		slice := cfg.duration / time.Duration(rounds)
		for r := range rounds {
			for _, k := range permutation(len(live), r) {
				if err := live[k].slice(ctx, cfg, s, slice); err != nil {
					return err
				}
			}
		}
		if ctx.Err() != nil {
			break // interrupted: report only the scenarios that completed
		}
		done[s] = true
		for _, t := range live {
			r := t.result(s, cfg)
			fmt.Fprintf(stderr, "bench: %-13s %-17s %7.0f req/s  p50 %s  p99 %s  CPU %s µs/req  errors %d\n",
				t.name, s, r.RPS, fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtCPU(r.CPUUsPerReq), r.Errors)
			if o := r.Open; o != nil {
				fmt.Fprintf(stderr, "bench: %-13s %-17s open loop: achieved %.0f of %g req/s offered; of %d scheduled, %d sent late (≥ %s after their intended start; %d of them waited for one of the %d connections), %d not sent by the end\n",
					t.name, s, r.RPS, o.OfferedRPS, o.Scheduled, o.Late, openLateAfter, o.WaitedForConn, o.MaxInflight, o.Unsent)
			}
			if r.PGBgUsPerReq >= 0 {
				fmt.Fprintf(stderr, "bench: %-13s %-17s Postgres background processes (shared, not in CPU µs/req): %.3f s, %s µs/req\n",
					t.name, s, r.PGBgCPU, fmtCPU(r.PGBgUsPerReq))
			}
			if e := t.acc[s].st.firstErr; r.Errors > 0 && e != "" {
				fmt.Fprintf(stderr, "bench: %s %s: first error: %s\n", t.name, s, e)
			}
		}
	}
	for _, t := range live {
		for _, s := range cfg.scenarios {
			if done[s] && t.acc[s] != nil {
				r := t.result(s, cfg)
				results = append(results, r)
				if jsonW != nil {
					writeJSONLine(jsonW, r)
				}
			}
		}
	}
	comps := compareResults(results)
	if jsonW != nil {
		for _, c := range comps {
			writeJSONLine(jsonW, c)
		}
	}
	if cfg.rate > 0 {
		fmt.Fprintf(table, "\nyaps bench http: OPEN LOOP at %g req/s offered (at most %d in flight, latency from each request's intended start, create-yap spread over %d lists), %s per scenario and target in %d interleaved rounds (after %s warm-up), list-yaps reads %d of %d yaps, %d CPUs\n\n",
			cfg.rate, cfg.maxInflight, cfg.concurrency, cfg.duration, rounds, cfg.warmup, cfg.pageSize, cfg.seed, cpus)
	} else {
		fmt.Fprintf(table, "\nyaps bench http: %d workers, %s per scenario and target in %d interleaved rounds (after %s warm-up), list-yaps reads %d of %d yaps, %d CPUs\n\n",
			cfg.concurrency, cfg.duration, rounds, cfg.warmup, cfg.pageSize, cfg.seed, cpus)
	}
	writeResultTable(table, results)
	for _, note := range tableNotes(cfg, results) {
		fmt.Fprintln(table, note)
	}
	if len(comps) > 0 {
		fmt.Fprintln(table)
		writeCompareTable(table, comps)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench http: failed targets: %s", strings.Join(failed, ", "))
	}
	return nil
}

func (c *benchHTTPConfig) validate() error {
	if len(c.targets) == 0 || len(c.scenarios) == 0 {
		return errors.New("bench http: need at least one target and one scenario")
	}
	for _, s := range c.scenarios {
		switch s {
		case scenarioCreateYap, scenarioCreateHot, scenarioListYaps, scenarioGetList, scenarioMixed:
		default:
			return fmt.Errorf("bench http: unknown scenario %q", s)
		}
	}
	if c.url != "" {
		if len(c.targets) != 1 {
			return errors.New("bench http: --url needs exactly one target (yaps or pocketbase)")
		}
		switch c.targets[0] {
		case "yaps", targetYapsSQLite, targetYapsPostgres, targetPocketBase:
		default:
			return fmt.Errorf("bench http: unknown target %q", c.targets[0])
		}
	} else {
		for _, t := range c.targets {
			switch t {
			case targetYapsSQLite, targetYapsPostgres, targetPocketBase:
			default:
				return fmt.Errorf("bench http: unknown target %q", t)
			}
		}
	}
	if c.clientProcs < 0 {
		return errors.New("bench http: --client-procs must be >= 0")
	}
	if c.rounds < 1 {
		return errors.New("bench http: --rounds must be >= 1")
	}
	if c.concurrency < 1 || c.duration <= 0 || c.warmup < 0 || c.seed < 1 || c.pageSize < 1 || c.pageSize > 200 {
		return errors.New("bench http: need -c >= 1, -d > 0, --warmup >= 0, --seed >= 1, 1 <= --page <= 200")
	}
	if c.duration > time.Hour || c.warmup > time.Hour {
		return errors.New("bench http: durations are bounded to 1h")
	}
	if !(c.rate >= 0 && c.rate <= 1e6) { // also rejects NaN
		return errors.New("bench http: need 0 <= --rate <= 1e6")
	}
	if c.maxInflight < 1 || c.maxInflight > 100000 {
		return errors.New("bench http: need 1 <= --max-inflight <= 100000")
	}
	if c.pgDB != "" {
		if c.url == "" || c.pid <= 0 {
			return errors.New("bench http: --postgres-db needs --url and --pid (spawned yaps-postgres counts its own database's backends)")
		}
		if c.targets[0] == targetPocketBase {
			return errors.New("bench http: --postgres-db is for a yaps server")
		}
	}
	return nil
}

// benchSplit splits a comma-separated flag value, dropping blanks.
func benchSplit(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ---- targets ----------------------------------------------------------------

// api is what a scenario needs from a target: how to build each request.
type api interface {
	// setup creates the read list (seeded with n yaps) and the write
	// lists: one per worker for create-yap, one shared for
	// create-yap-shared; with mixed, also the list of the mixed scenario
	// (seeded with n yaps as well).
	setup(ctx context.Context, c *http.Client, n, workers int, mixed bool) error
	// request returns the request of scenario s for worker w, iteration i.
	request(s string, w, i int) (*http.Request, error)
	// checkPage validates a list-yaps response body and returns its item count.
	checkPage(body []byte) (int, error)
}

// liveTarget is a started, seeded target and what was measured on it.
type liveTarget struct {
	name   string
	a      api
	pid    int // server process (0: unknown, CPU not measured)
	srv    *server
	pg     *pgScratch        // yaps-postgres: the scratch database (or --postgres-db), for backend CPU
	client *http.Client      // setup and probe
	doers  []doer            // one per load worker (open loop: per connection, --max-inflight)
	acc    map[string]*accum // by scenario
	nice   int
	niced  map[int]bool // Postgres backends already reniced
}

// accum sums the rounds of one scenario on one target.
type accum struct {
	st            loadStats
	app, tail, db time.Duration
	client        time.Duration // this process's CPU during the load
	cpuOK         bool
	pgBg          time.Duration // Postgres's shared background processes
	pgBgOK        bool
}

func startTarget(ctx context.Context, cfg benchHTTPConfig, name, tmp string, stderr io.Writer) (_ *liveTarget, err error) {
	t := &liveTarget{name: name, pid: cfg.pid, acc: map[string]*accum{}, nice: cfg.nice, niced: map[int]bool{}}
	defer func() {
		if err != nil {
			t.close(stderr)
		}
	}()
	base := strings.TrimRight(cfg.url, "/")
	if cfg.url == "" {
		if t.srv, err = spawnTarget(ctx, cfg, name, tmp, stderr); err != nil {
			return nil, err
		}
		base, t.pid, t.pg = t.srv.base, t.srv.cmd.Process.Pid, t.srv.pg
	} else if cfg.pgDB != "" {
		if t.pg, err = attachPostgresDB(ctx, cfg.postgres, cfg.pgDB); err != nil {
			return nil, fmt.Errorf("--postgres-db: %w", err)
		}
	}
	if name == targetPocketBase {
		t.a = &pocketBaseAPI{base: base, page: cfg.pageSize}
	} else {
		t.a = &yapsAPI{base: base, page: cfg.pageSize}
	}
	conns := cfg.concurrency
	if cfg.rate > 0 {
		conns = cfg.maxInflight // rawConns dial on first use
	}
	t.client = benchClient(conns)
	for range conns {
		if cfg.stdClient {
			t.doers = append(t.doers, stdDoer{t.client})
		} else {
			t.doers = append(t.doers, &rawConn{})
		}
	}

	t0 := time.Now()
	if err := t.a.setup(ctx, t.client, cfg.seed, cfg.concurrency, slices.Contains(cfg.scenarios, scenarioMixed)); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	fmt.Fprintf(stderr, "bench: %s: seeded %d yaps in %s\n", name, cfg.seed, time.Since(t0).Round(time.Millisecond))
	if err := probe(ctx, t.client, t.a, cfg); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	// Background work the seeding started (e.g. compaction) must not be
	// billed to the first scenario.
	waitQuiet(ctx, t.pid, quietMax)
	t.snapshot(ctx) // renices the Postgres backends (with --nice) before the warm-up
	return t, nil
}

func (t *liveTarget) close(stderr io.Writer) {
	if t.client != nil {
		t.client.CloseIdleConnections()
	}
	for _, d := range t.doers {
		if rc, ok := d.(*rawConn); ok {
			rc.close()
		}
	}
	if t.srv != nil {
		t.srv.stop(stderr) // drops t.pg, which it owns
		t.srv = nil
	} else if t.pg != nil {
		t.pg.drop() // --postgres-db: only closes the admin connection
	}
	t.pg = nil
}

// cpuSnapshot is the CPU time used so far by the server process and by
// each Postgres backend serving the scratch database.
type cpuSnapshot struct {
	app time.Duration
	db  map[int]time.Duration
	ok  bool
}

func (t *liveTarget) snapshot(ctx context.Context) cpuSnapshot {
	app, err := procCPU(t.pid)
	snap := cpuSnapshot{app: app, ok: err == nil}
	if t.pg != nil {
		snap.db = map[int]time.Duration{}
		for _, pid := range t.pg.backends(ctx) {
			if d, err := procCPU(pid); err == nil {
				snap.db[pid] = d
			}
			if t.nice != 0 && t.pg.owned && !t.niced[pid] {
				t.niced[pid] = true
				_ = renice(pid, t.nice)
			}
		}
	}
	return snap
}

// bgSnapshot returns the CPU time used so far by each of Postgres's shared
// background processes; ok is false when none could be read (no Postgres
// target, or Postgres not on this machine).
func (t *liveTarget) bgSnapshot(ctx context.Context) (cpu map[int]time.Duration, ok bool) {
	if t.pg == nil {
		return nil, false
	}
	cpu = map[int]time.Duration{}
	for _, pid := range t.pg.background(ctx) {
		if d, err := procCPU(pid); err == nil {
			cpu[pid] = d
		}
	}
	return cpu, len(cpu) > 0
}

// dbDelta is the CPU the backends used between a and b; a backend that
// appeared in between counts from zero, one that vanished is lost (the
// server's pool keeps its connections, so that is rare).
func dbDelta(a, b map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range b {
		d += t - a[pid]
	}
	return d
}

// slice runs scenario s on t for d and adds the outcome to t.acc[s]. The
// CPU counted runs until the server is idle again, so background work the
// requests caused (and finished after the last answer) is included.
func (t *liveTarget) slice(ctx context.Context, cfg benchHTTPConfig, s string, d time.Duration) error {
	bg0, bgOK0 := t.bgSnapshot(ctx)
	s0 := t.snapshot(ctx)
	c0, _ := procCPU(os.Getpid())
	st, err := t.load(ctx, cfg, s, d)
	if err != nil {
		return fmt.Errorf("%s %s: %w", t.name, s, err)
	}
	c1, _ := procCPU(os.Getpid())
	sEnd := t.snapshot(ctx)
	waitQuiet(ctx, t.pid, quietMax)
	s1 := t.snapshot(ctx)
	if t.pg != nil {
		// Let Postgres finish what the writes left it (WAL writer,
		// checkpointer, autovacuum) before the next target runs. Those
		// processes are shared with anything else using the server, so
		// the wait is short and their CPU is billed to no one.
		t.pg.waitQuiet(ctx, 3*time.Second)
	}
	bg1, bgOK1 := t.bgSnapshot(ctx)

	acc := t.acc[s]
	if acc == nil {
		acc = &accum{cpuOK: true, pgBgOK: true}
		t.acc[s] = acc
	}
	acc.st.latencies = append(acc.st.latencies, st.latencies...)
	acc.st.errors += st.errors
	acc.st.elapsed += st.elapsed
	acc.st.scheduled += st.scheduled
	acc.st.late += st.late
	acc.st.waited += st.waited
	acc.st.unsent += st.unsent
	acc.st.noteErr(st.firstErr)
	if !s0.ok || !sEnd.ok || !s1.ok {
		acc.cpuOK = false
	}
	acc.app += s1.app - s0.app
	acc.tail += s1.app - sEnd.app
	acc.db += dbDelta(s0.db, s1.db)
	acc.client += c1 - c0
	if !bgOK0 || !bgOK1 {
		acc.pgBgOK = false
	}
	acc.pgBg += dbDelta(bg0, bg1)
	return nil
}

// load runs one load phase of scenario s: closed loop with a worker per
// doer, or open loop at --rate over the doers.
func (t *liveTarget) load(ctx context.Context, cfg benchHTTPConfig, s string, d time.Duration) (loadStats, error) {
	if cfg.rate > 0 {
		return loadOpen(ctx, t.doers, t.a, s, d, cfg.rate, cfg.concurrency)
	}
	return load(ctx, t.doers, t.a, s, d)
}

func (t *liveTarget) result(s string, cfg benchHTTPConfig) httpResult {
	acc := t.acc[s]
	cpu := time.Duration(-1)
	if acc.cpuOK {
		cpu = acc.app + acc.db
	}
	conc := cfg.concurrency
	if cfg.rate > 0 {
		conc = cfg.maxInflight
	}
	r := summarize(t.name, s, conc, acc.st, cpu)
	if r.Open != nil {
		r.Open.OfferedRPS, r.Open.MaxInflight = cfg.rate, cfg.maxInflight
	}
	r.TailCPU, r.DBCPU, r.DBUsPerReq, r.PGBgCPU, r.PGBgUsPerReq = -1, -1, -1, -1, -1
	if t.pg != nil && acc.pgBgOK {
		r.PGBgCPU = acc.pgBg.Seconds()
		if r.Requests > 0 {
			r.PGBgUsPerReq = float64(acc.pgBg) / float64(time.Microsecond) / float64(r.Requests)
		}
	}
	if r.Requests > 0 {
		r.ClientUsPerReq = float64(acc.client) / float64(time.Microsecond) / float64(r.Requests)
	}
	if acc.cpuOK {
		r.TailCPU = acc.tail.Seconds()
		if t.pg != nil {
			r.DBCPU = acc.db.Seconds()
			if r.Requests > 0 {
				r.DBUsPerReq = float64(acc.db) / float64(time.Microsecond) / float64(r.Requests)
			}
		}
	}
	return r
}

// quietMax bounds the wait for a server to go idle after a load phase.
const quietMax = 30 * time.Second

// waitQuiet waits until process pid uses at most one clock tick (4% of a
// CPU) in each of two consecutive 250 ms windows, or max has passed.
func waitQuiet(ctx context.Context, pid int, max time.Duration) {
	if pid <= 0 {
		return
	}
	waitQuietFunc(ctx, func() (time.Duration, error) { return procCPU(pid) }, max)
}

// waitQuietFunc waits until cpu (a running total) grows by at most one
// clock tick in each of two consecutive 250 ms windows, or max has passed.
func waitQuietFunc(ctx context.Context, cpu func() (time.Duration, error), max time.Duration) {
	const window = 250 * time.Millisecond
	deadline := time.Now().Add(max)
	prev, err := cpu()
	quiet := 0
	for err == nil && quiet < 2 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(window)
		var cur time.Duration
		if cur, err = cpu(); err != nil {
			return
		}
		if cur-prev <= 10*time.Millisecond { // one clock tick
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
	}
}

// permutation returns the r-th (mod n!) permutation of 0..n-1 in
// lexicographic order.
func permutation(n, r int) []int {
	fact := 1
	for i := 2; i <= n; i++ {
		fact *= i
	}
	r %= max(fact, 1)
	rest := make([]int, n)
	for i := range rest {
		rest[i] = i
	}
	out := make([]int, 0, n)
	for i := n; i > 0; i-- {
		fact /= i
		k := r / fact
		r %= fact
		out = append(out, rest[k])
		rest = append(rest[:k], rest[k+1:]...)
	}
	return out
}

func benchClient(concurrency int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil, // loopback only, never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        concurrency * 2,
		MaxIdleConnsPerHost: concurrency * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true, // neither side pays for gzip
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// probe sends one request of each scenario and checks its answer, so a
// misconfigured target fails loudly instead of benchmarking error pages.
func probe(ctx context.Context, c *http.Client, a api, cfg benchHTTPConfig) error {
	for _, s := range cfg.scenarios {
		req, err := a.request(s, 0, -1)
		if err != nil {
			return err
		}
		status, body, err := do(ctx, c, req)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		if status/100 != 2 {
			return fmt.Errorf("%s: status %d: %s", s, status, truncate(body, 300))
		}
		if s == scenarioListYaps || s == scenarioMixed { // request -1 of mixed is a read
			n, err := a.checkPage(body)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			if n != min(cfg.pageSize, cfg.seed) {
				return fmt.Errorf("%s: got %d items, want %d", s, n, min(cfg.pageSize, cfg.seed))
			}
		}
	}
	return nil
}

func do(ctx context.Context, c *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, body, err
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func postJSON(ctx context.Context, c *http.Client, u, bearer string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	status, rb, err := do(ctx, c, req)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("POST %s: status %d: %s", u, status, truncate(rb, 300))
	}
	if out != nil {
		return json.Unmarshal(rb, out)
	}
	return nil
}

// seedParallel runs fn(i) for i in [0,n) on 8 goroutines.
func seedParallel(ctx context.Context, n int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		ferr error
	)
	for range 8 {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := ferr != nil || i >= n || ctx.Err() != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if ferr == nil {
						ferr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if ferr == nil {
		ferr = ctx.Err()
	}
	return ferr
}

// taskContent is the content of the i-th yap: one line, ~40 characters.
func taskContent(prefix string, w, i int) string {
	return fmt.Sprintf("%s %d-%d buy oat milk #!high #@errands", prefix, w, i)
}

// The shared list of create-yap-shared is a fresh one after every
// sharedListYaps creates (of sharedLists made at setup, then round again):
// one list written for the whole run would reach the document's item limit
// (Yaps, 250,000 structs: about 20,000 tasks) on a fast server, and from
// then on the scenario would measure refusals.
const (
	sharedListYaps = 5000
	sharedLists    = 16
)

// writeList returns the index into a target's write lists (the shared
// ones, then one per worker) of scenario s's create for worker w; shared
// counts the target's shared creates.
func writeList(s string, w, lists int, shared *atomic.Int64) int {
	if s == scenarioCreateHot {
		return int(shared.Add(1)-1) / sharedListYaps % sharedLists
	}
	return sharedLists + w%(lists-sharedLists)
}

// yapsAPI speaks the Yaps API (base includes the prefix, e.g. /api/v1).
// Every request carries the list's owner code: the server hashes it and
// checks the role, as it does for any real client.
type yapsAPI struct {
	base              string
	page              int
	readRef, readCode string
	writeRefs         []string // sharedLists shared lists, then worker w's
	writeCodes        []string
	shared            atomic.Int64 // create-yap-shared's creates so far
	mixedRef          string       // the list of scenario mixed, read and written
	mixedCode         string
}

func (y *yapsAPI) createList(ctx context.Context, c *http.Client, title string) (ref, code string, err error) {
	var out struct {
		Ref       string `json:"ref"`
		OwnerCode string `json:"ownerCode"`
	}
	if err := postJSON(ctx, c, y.base+"/lists", "", map[string]string{"title": title, "kind": "task"}, &out); err != nil {
		return "", "", err
	}
	if out.Ref == "" || out.OwnerCode == "" {
		return "", "", errors.New("POST /lists: no ref or ownerCode in the answer")
	}
	return out.Ref, out.OwnerCode, nil
}

func (y *yapsAPI) setup(ctx context.Context, c *http.Client, n, workers int, mixed bool) error {
	var err error
	if y.readRef, y.readCode, err = y.createList(ctx, c, "bench read list"); err != nil {
		return err
	}
	if mixed {
		if y.mixedRef, y.mixedCode, err = y.createList(ctx, c, "bench mixed list"); err != nil {
			return err
		}
		u := y.base + "/lists/" + url.PathEscape(y.mixedRef) + "/yaps"
		if err := seedParallel(ctx, n, func(i int) error {
			return postJSON(ctx, c, u, y.mixedCode, map[string]string{
				"kind": "task", "content": taskContent("seed", 0, i), "status": "open",
			}, nil)
		}); err != nil {
			return err
		}
	}
	for i := range sharedLists + workers {
		ref, code, err := y.createList(ctx, c, "bench write list "+strconv.Itoa(i))
		if err != nil {
			return err
		}
		y.writeRefs, y.writeCodes = append(y.writeRefs, ref), append(y.writeCodes, code)
	}
	u := y.base + "/lists/" + url.PathEscape(y.readRef) + "/yaps"
	return seedParallel(ctx, n, func(i int) error {
		return postJSON(ctx, c, u, y.readCode, map[string]string{
			"kind": "task", "content": taskContent("seed", 0, i), "status": "open",
		}, nil)
	})
}

func (y *yapsAPI) request(s string, w, i int) (*http.Request, error) {
	var (
		req *http.Request
		err error
	)
	switch s {
	case scenarioMixed:
		if mixedWrite(w, i) {
			body := `{"kind":"task","content":"` + taskContent("mixed", w, i) + `","status":"open"}`
			req, err = http.NewRequest(http.MethodPost, y.base+"/lists/"+y.mixedRef+"/yaps", strings.NewReader(body))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
			}
		} else {
			req, err = http.NewRequest(http.MethodGet, y.base+"/lists/"+y.mixedRef+"/yaps?limit="+strconv.Itoa(y.page), nil)
		}
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+y.mixedCode)
		}
		return req, err
	case scenarioCreateYap, scenarioCreateHot:
		l := writeList(s, w, len(y.writeRefs), &y.shared)
		body := `{"kind":"task","content":"` + taskContent("bench", w, i) + `","status":"open"}`
		req, err = http.NewRequest(http.MethodPost, y.base+"/lists/"+y.writeRefs[l]+"/yaps", strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+y.writeCodes[l])
		}
		return req, err
	case scenarioListYaps:
		req, err = http.NewRequest(http.MethodGet, y.base+"/lists/"+y.readRef+"/yaps?limit="+strconv.Itoa(y.page), nil)
	case scenarioGetList:
		req, err = http.NewRequest(http.MethodGet, y.base+"/lists/"+y.readRef, nil)
	default:
		return nil, fmt.Errorf("unknown scenario %q", s)
	}
	if err == nil {
		req.Header.Set("Authorization", "Bearer "+y.readCode)
	}
	return req, err
}

func (y *yapsAPI) checkPage(body []byte) (int, error) {
	var page struct {
		Yaps []json.RawMessage `json:"yaps"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return 0, err
	}
	return len(page.Yaps), nil
}

// mixedWrite tells whether request i of worker w in scenario mixed is a
// create-yap (1 in 10 of each worker's requests, staggered across workers)
// rather than a list-yaps. Request -1 (the probe) is a read.
func mixedWrite(w, i int) bool { return i >= 0 && (i+w)%10 == 9 }

// pocketBaseAPI speaks PocketBase's records API against the collections
// that bench/pocketbase creates: "lists" and "yaps" (with a relation field
// "list"), all rules public.
type pocketBaseAPI struct {
	base     string
	page     int
	readID   string
	writeIDs []string     // sharedLists shared lists, then worker w's
	shared   atomic.Int64 // create-yap-shared's creates so far
	listURL  string
	mixedID  string // the list of scenario mixed, read and written
	mixedURL string // its first page
}

func (p *pocketBaseAPI) setup(ctx context.Context, c *http.Client, n, workers int, mixed bool) error {
	var out struct {
		ID string `json:"id"`
	}
	for i := range 1 + sharedLists + workers {
		if err := postJSON(ctx, c, p.base+"/api/collections/lists/records", "", map[string]string{"title": "bench list " + strconv.Itoa(i), "kind": "task"}, &out); err != nil {
			return err
		}
		if i == 0 {
			p.readID = out.ID
		} else {
			p.writeIDs = append(p.writeIDs, out.ID)
		}
	}
	u := p.base + "/api/collections/yaps/records"
	if mixed {
		if err := postJSON(ctx, c, p.base+"/api/collections/lists/records", "", map[string]string{"title": "bench mixed list", "kind": "task"}, &out); err != nil {
			return err
		}
		p.mixedID = out.ID
		p.mixedURL = p.pageURL(p.mixedID)
		if err := seedParallel(ctx, n, func(i int) error {
			return postJSON(ctx, c, u, "", map[string]string{
				"list": p.mixedID, "kind": "task", "content": taskContent("seed", 0, i), "status": "open",
			}, nil)
		}); err != nil {
			return err
		}
	}
	// The same page as Yaps' GET /lists/{ref}/yaps?limit=50: the first 50
	// (--page)
	// yaps of one list in chronological order (created, then id). skipTotal
	// drops PocketBase's extra COUNT(*) query, because Yaps returns no
	// total either (only nextCursor).
	p.listURL = p.pageURL(p.readID)
	return seedParallel(ctx, n, func(i int) error {
		return postJSON(ctx, c, u, "", map[string]string{
			"list": p.readID, "kind": "task", "content": taskContent("seed", 0, i), "status": "open",
		}, nil)
	})
}

// pageURL is the URL of the first page of list id's yaps.
func (p *pocketBaseAPI) pageURL(id string) string {
	q := url.Values{}
	q.Set("filter", "list='"+id+"'")
	q.Set("sort", "created,id")
	q.Set("perPage", strconv.Itoa(p.page))
	q.Set("skipTotal", "1")
	return p.base + "/api/collections/yaps/records?" + q.Encode()
}

func (p *pocketBaseAPI) request(s string, w, i int) (*http.Request, error) {
	switch s {
	case scenarioMixed:
		if !mixedWrite(w, i) {
			return http.NewRequest(http.MethodGet, p.mixedURL, nil)
		}
		body := `{"list":"` + p.mixedID + `","kind":"task","content":"` + taskContent("mixed", w, i) + `","status":"open"}`
		req, err := http.NewRequest(http.MethodPost, p.base+"/api/collections/yaps/records", strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	case scenarioCreateYap, scenarioCreateHot:
		l := writeList(s, w, len(p.writeIDs), &p.shared)
		body := `{"list":"` + p.writeIDs[l] + `","kind":"task","content":"` + taskContent("bench", w, i) + `","status":"open"}`
		req, err := http.NewRequest(http.MethodPost, p.base+"/api/collections/yaps/records", strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	case scenarioListYaps:
		return http.NewRequest(http.MethodGet, p.listURL, nil)
	case scenarioGetList:
		return http.NewRequest(http.MethodGet, p.base+"/api/collections/lists/records/"+p.readID, nil)
	}
	return nil, fmt.Errorf("unknown scenario %q", s)
}

func (p *pocketBaseAPI) checkPage(body []byte) (int, error) {
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return 0, err
	}
	return len(page.Items), nil
}

// ---- spawning servers -------------------------------------------------------

type server struct {
	cmd    *exec.Cmd
	base   string
	log    *os.File
	pg     *pgScratch // dropped after the server stopped
	exited chan struct{}
}

func spawnTarget(ctx context.Context, cfg benchHTTPConfig, target, tmp string, stderr io.Writer) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := filepath.Join(tmp, target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var (
		bin, health, base string
		argv              []string
		pg                *pgScratch
	)
	switch target {
	case targetYapsSQLite, targetYapsPostgres:
		bin = cfg.yapsBin
		if bin == "" {
			if bin, err = os.Executable(); err != nil {
				return nil, err
			}
		}
		db := "sqlite:" + filepath.Join(dir, "yaps.db")
		if target == targetYapsPostgres {
			if pg, err = createPostgresDB(ctx, cfg.postgres); err != nil {
				return nil, fmt.Errorf("postgres: %w", err)
			}
			db = pg.dsn
		}
		argv = []string{"serve", "--addr", addr, "--db", db, "--rate-limit", "off"}
		base = "http://" + addr + "/api/v1"
		health = "http://" + addr + "/healthz"
	case targetPocketBase:
		bin = cfg.pbBin
		if bin == "" {
			// Not tmp/pocketbase: that is the target's data directory
			// (made above), and go build -o would put the binary inside it.
			bin = filepath.Join(tmp, "pocketbase.bin")
			fmt.Fprintf(stderr, "bench: building PocketBase from %s (first build takes minutes)\n", cfg.pbSrc)
			b := exec.CommandContext(ctx, "go", "build", "-C", cfg.pbSrc, "-o", bin, ".")
			b.Stdout, b.Stderr = stderr, stderr
			if err := b.Run(); err != nil {
				return nil, fmt.Errorf("build pocketbase: %w", err)
			}
		}
		argv = []string{"serve", "--http", addr, "--dir", filepath.Join(dir, "pb_data")}
		base = "http://" + addr
		health = base + "/api/health"
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if target == targetPocketBase && !cfg.pbLogs {
		cmd.Env = append(os.Environ(), "YAPS_BENCH_PB_LOGS=off")
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		pg.drop()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{cmd: cmd, base: base, log: logf, pg: pg, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	if err := waitHealthy(ctx, health, cfg.startTimeout, s.exited); err != nil {
		s.stop(stderr)
		return nil, fmt.Errorf("%w; server log:\n%s", err, tailFile(logf.Name(), 2000))
	}
	fmt.Fprintf(stderr, "bench: %s: pid %d on %s\n", target, cmd.Process.Pid, addr)
	return s, nil
}

// stop sends SIGTERM, waits up to 15 s (then SIGKILL) and removes the
// target's database.
func (s *server) stop(stderr io.Writer) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		fmt.Fprintln(stderr, "bench: server did not stop after SIGTERM; killing it")
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.log.Close()
	s.pg.drop()
}

// renice sets the nice value of every thread of process pid (on Linux
// setpriority(PRIO_PROCESS) applies to one thread).
func renice(pid, nice int) error {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return syscall.Setpriority(syscall.PRIO_PROCESS, pid, nice)
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitHealthy(ctx context.Context, u string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer c.CloseIdleConnections()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := c.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("server exited before it became healthy")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not healthy at %s after %s", u, timeout)
		}
	}
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// pgScratch is a database the bench created for one yaps-postgres run
// (owned), or the one --postgres-db names.
type pgScratch struct {
	admin *sql.DB // connected to the server's admin database
	name  string
	dsn   string
	owned bool // created by the bench: dropped at the end, backends reniced with --nice
}

// openAdmin opens one connection's pool to the server of adminDSN; its
// errors never show adminDSN's password.
func openAdmin(adminDSN string) (*sql.DB, error) {
	admin, err := sql.Open("pgx", adminDSN)
	if err != nil {
		return nil, redactErr(err)
	}
	admin.SetMaxOpenConns(1)
	return admin, nil
}

// createPostgresDB creates a fresh database on the server of adminDSN.
// Its errors never show adminDSN's password.
func createPostgresDB(ctx context.Context, adminDSN string) (*pgScratch, error) {
	u, err := url.Parse(adminDSN)
	if err != nil {
		return nil, redactErr(err) // url.Parse quotes the whole DSN
	}
	admin, err := openAdmin(adminDSN)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := fmt.Sprintf("yaps_bench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := admin.ExecContext(cctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, redactErr(err)
	}
	u.Path = "/" + name
	return &pgScratch{admin: admin, name: name, dsn: u.String(), owned: true}, nil
}

// attachPostgresDB connects to the server of adminDSN to find the backends
// of database name, which a running server (--url) uses. The bench neither
// creates nor drops it. Its errors never show adminDSN's password.
func attachPostgresDB(ctx context.Context, adminDSN, name string) (*pgScratch, error) {
	admin, err := openAdmin(adminDSN)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var one int
	if err := admin.QueryRowContext(cctx, "SELECT 1 FROM pg_database WHERE datname = $1", name).Scan(&one); err != nil {
		admin.Close()
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("no database %q on the server of --postgres", name)
		}
		return nil, redactErr(err)
	}
	return &pgScratch{admin: admin, name: name}, nil
}

// pgBackgroundTypes are Postgres's shared background processes: they
// work for every database on the server (WAL, checkpoints, vacuum).
const pgBackgroundTypes = `('checkpointer', 'walwriter', 'background writer', 'autovacuum launcher', 'autovacuum worker')`

// backends returns the PIDs of the server processes serving the scratch
// database (Postgres runs one process per connection). They are only
// readable in /proc when Postgres runs on this machine, which loopback
// implies unless it is in a container; then the DB CPU reads as 0.
func (p *pgScratch) backends(ctx context.Context) []int {
	return p.pids(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", p.name)
}

// background returns the PIDs of Postgres's shared background processes
// (pgBackgroundTypes). An autovacuum worker that starts and exits between
// two calls is not seen.
func (p *pgScratch) background(ctx context.Context) []int {
	return p.pids(ctx, "SELECT pid FROM pg_stat_activity WHERE backend_type IN "+pgBackgroundTypes)
}

func (p *pgScratch) pids(ctx context.Context, query string, args ...any) []int {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := p.admin.QueryContext(cctx, query, args...)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitQuiet waits (at most max) until Postgres's background processes
// and the scratch database's backends are idle.
func (p *pgScratch) waitQuiet(ctx context.Context, max time.Duration) {
	pids := p.pids(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1 OR backend_type IN "+pgBackgroundTypes, p.name)
	waitQuietFunc(ctx, func() (time.Duration, error) {
		var sum time.Duration
		for _, pid := range pids {
			if d, err := procCPU(pid); err == nil {
				sum += d
			}
		}
		return sum, nil
	}, max)
}

// drop removes the database if the bench created it (forcibly closing
// leftover connections) and closes the admin connection.
func (p *pgScratch) drop() {
	if p == nil {
		return
	}
	if p.owned {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = p.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+p.name+" WITH (FORCE)")
	}
	p.admin.Close()
}
