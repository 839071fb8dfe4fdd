package yjs_test

// Interop tests against real Yjs (interop/yjs/*.mjs, run with node).
//
// They need node and interop/node_modules. Without them the tests skip, unless
// YAPS_TEST_INTEROP=1 is set, in which case they fail.
//
// Comparison rules (shared with interop/yjs/lib.mjs): documents are compared
// through their toJSON values with binary as {"$bin": base64}, BigInt as
// {"$bigint": "digits"} and other numbers as doubles compared numerically (an
// integral float equals the same integer). Text roots are also compared by
// delta, with embedded Y types as {"$type": toJSON}.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// ---------- environment ----------

type interopEnv struct {
	dir string // interop/ (holds node_modules and yjs/*.mjs)
}

var (
	envOnce   sync.Once
	envResult *interopEnv
	envReason string
)

func needInterop(t testing.TB) *interopEnv {
	t.Helper()
	envOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			envReason = err.Error()
			return
		}
		dir := filepath.Join(wd, "..", "..", "interop")
		if _, err := exec.LookPath("node"); err != nil {
			envReason = "node not found in PATH"
			return
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "yjs", "package.json")); err != nil {
			envReason = "interop/node_modules missing (run npm ci in interop/): " + err.Error()
			return
		}
		envResult = &interopEnv{dir: dir}
	})
	if envResult == nil {
		if os.Getenv("YAPS_TEST_INTEROP") == "1" {
			t.Fatalf("YAPS_TEST_INTEROP=1 but the Yjs interop environment is unusable: %s", envReason)
		}
		t.Skipf("skipping Yjs interop test: %s (set YAPS_TEST_INTEROP=1 to make this a failure)", envReason)
	}
	return envResult
}

// node runs a script under interop/ and returns its stdout.
func (e *interopEnv) node(t testing.TB, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = e.dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node %s\nstderr:\n%s", strings.Join(args, " "), stderr.String())
	return out
}

// ---------- generated Yjs cases ----------

type expectedDoc struct {
	Seed    int64                 `json:"seed"`
	Roots   map[string]string     `json:"roots"`
	JSON    map[string]any        `json:"json"`
	Deltas  map[string]any        `json:"deltas"`
	SV      map[string]uint64     `json:"sv"`
	Pending bool                  `json:"pending"`
	Peers   []expectedPeerSummary `json:"peers"`
}

type expectedPeerSummary struct {
	JSON   map[string]any    `json:"json"`
	Deltas map[string]any    `json:"deltas"`
	SV     map[string]uint64 `json:"sv"`
}

type yjsCase struct {
	name        string
	dir         string
	updatePaths []string
	updates     [][]byte
	merged      []byte
	full        []byte
	peers       [][]byte
	want        expectedDoc
}

func iopDecodeJSON(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	require.NoError(t, dec.Decode(v), "decoding %.200s", b)
}

func iopReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// generateCases runs gen.mjs and loads the cases it wrote.
func generateCases(t testing.TB, env *interopEnv, seed, n, steps int) []yjsCase {
	t.Helper()
	out := t.TempDir()
	env.node(t, "yjs/gen.mjs", "--out", out, "--seed", strconv.Itoa(seed), "--cases", strconv.Itoa(n), "--steps", strconv.Itoa(steps))
	dirs, err := filepath.Glob(filepath.Join(out, "case-*"))
	require.NoError(t, err)
	require.Len(t, dirs, n)
	cases := make([]yjsCase, 0, n)
	for _, dir := range dirs {
		c := yjsCase{name: filepath.Base(dir), dir: dir}
		files, err := filepath.Glob(filepath.Join(dir, "updates", "*.bin"))
		require.NoError(t, err)
		sort.Strings(files)
		c.updatePaths = files
		for _, f := range files {
			c.updates = append(c.updates, iopReadFile(t, f))
		}
		c.merged = iopReadFile(t, filepath.Join(dir, "merged.bin"))
		c.full = iopReadFile(t, filepath.Join(dir, "full.bin"))
		iopDecodeJSON(t, iopReadFile(t, filepath.Join(dir, "expected.json")), &c.want)
		for k := range c.want.Peers {
			c.peers = append(c.peers, iopReadFile(t, filepath.Join(dir, fmt.Sprintf("peer-%d.bin", k))))
		}
		require.NotEmpty(t, c.updates, "case %s has no updates", c.name)
		cases = append(cases, c)
	}
	return cases
}

func iopEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// ---------- canonical comparison ----------

// iopNum is a canonical number: "i:<int64>" for integral values that fit an
// int64, "f:<shortest float>" otherwise. Using a distinct type keeps numbers
// and strings apart.
type iopNum string

func iopCanonFloat(f float64) iopNum {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 && !math.IsInf(f, 0) {
		return iopNum("i:" + strconv.FormatInt(int64(f), 10))
	}
	return iopNum("f:" + strconv.FormatFloat(f, 'g', -1, 64))
}

// canon maps a Go engine value or a decoded (UseNumber) expected value to a
// canonical form that require.Equal can compare.
func iopCanon(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case bool, string:
		return x
	case json.Number: // Yjs numbers are doubles (BigInts come as {"$bigint": ...})
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return iopNum("bad:" + string(x))
		}
		return iopCanonFloat(f)
	case yjs.BigInt:
		return map[string]any{"$bigint": strconv.FormatInt(int64(x), 10)}
	case []byte:
		return map[string]any{"$bin": base64.StdEncoding.EncodeToString(x)}
	case *yjs.Doc:
		return map[string]any{"$doc": x.GUID()}
	case float64:
		return iopCanonFloat(x)
	case float32:
		return iopCanonFloat(float64(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == any(yjs.Undefined) {
				continue // JSON.stringify drops undefined properties
			}
			out[k] = iopCanon(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = iopCanon(e)
		}
		return out
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return iopCanonFloat(float64(rv.Int())) // a JavaScript number is a double
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return iopCanonFloat(float64(rv.Uint()))
	case reflect.Struct:
		if rv.NumField() == 0 { // yjs.Undefined
			return nil
		}
	}
	return fmt.Sprintf("<unexpected %T %v>", v, v)
}

// jsonReady turns an engine value into plain JSON with the shared
// normalisation ({"$bin"}, {"$bigint"}, {"$doc"}, undefined properties
// dropped), keeping numbers as numbers, for a JSON round trip.
func jsonReady(v any) any {
	switch x := v.(type) {
	case []byte:
		return map[string]any{"$bin": base64.StdEncoding.EncodeToString(x)}
	case yjs.BigInt:
		return map[string]any{"$bigint": strconv.FormatInt(int64(x), 10)}
	case *yjs.Doc:
		return map[string]any{"$doc": x.GUID()}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != any(yjs.Undefined) {
				out[k] = jsonReady(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if e != any(yjs.Undefined) {
				out[i] = jsonReady(e)
			}
		}
		return out
	}
	return v
}

// toJSONOf returns the Yjs toJSON value of a shared type.
func toJSONOf(v any) any {
	switch x := v.(type) {
	case *yjs.Map:
		return x.ToJSON()
	case *yjs.Array:
		return x.ToJSON()
	case *yjs.Text:
		return x.ToJSON()
	case *yjs.XmlFragment:
		return x.ToJSON()
	case *yjs.XmlElement:
		return x.ToJSON()
	case *yjs.XmlText:
		return x.ToJSON()
	}
	return fmt.Sprintf("<unexpected embed %T>", v)
}

// iopCanonViaJSON canonicalises a value by a JSON round trip (for deltas, which
// hold no binary).
func iopCanonViaJSON(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	iopDecodeJSON(t, b, &out)
	return iopCanon(out)
}

// iopView is what the tests compare between engines.
type iopView struct {
	JSON   any
	Deltas any
	SV     map[string]uint64
}

// iopTypeRoots types the roots of d like the given root map (name -> Yjs type).
func iopTypeRoots(d *yjs.Doc, roots map[string]string) {
	for name, typ := range roots {
		switch typ {
		case "map":
			d.GetMap(name)
		case "array":
			d.GetArray(name)
		case "text":
			d.GetText(name)
		case "xmlfragment":
			d.GetXmlFragment(name)
		}
	}
}

// goView reads the document of the Go engine. Its own client id is dropped
// from the state vector: applying remote changes may make an engine emit
// formatting-cleanup ops of its own, which real Yjs would do too.
func goView(t testing.TB, d *yjs.Doc, roots map[string]string, dropOwn bool) iopView {
	t.Helper()
	iopTypeRoots(d, roots)
	v := iopView{JSON: iopCanon(d.ToJSON()), SV: map[string]uint64{}}
	deltas := map[string]any{}
	for name, typ := range roots {
		if typ == "text" {
			delta := d.GetText(name).ToDelta()
			if delta == nil {
				delta = []yjs.Delta{} // an empty text's delta is [] in Yjs
			}
			for i, op := range delta {
				switch op.Insert.(type) {
				case string, map[string]any:
				default: // a Y type embedded in the text
					delta[i].Insert = map[string]any{"$type": jsonReady(toJSONOf(op.Insert))}
				}
			}
			deltas[name] = delta
		}
	}
	v.Deltas = iopCanonViaJSON(t, deltas)
	for c, clock := range d.StateVector() {
		if dropOwn && c == d.ClientID() {
			continue
		}
		v.SV[strconv.FormatUint(c, 10)] = clock
	}
	return v
}

func expectedView(json map[string]any, deltas map[string]any, sv map[string]uint64) iopView {
	if deltas == nil {
		deltas = map[string]any{}
	}
	if sv == nil {
		sv = map[string]uint64{}
	}
	return iopView{JSON: iopCanon(json), Deltas: iopCanon(deltas), SV: sv}
}

// ---------- node apply.mjs batches ----------

type applyJob struct {
	Files []string          `json:"files"`
	Roots map[string]string `json:"roots"`
	// Cleanup lets Yjs run its formatting cleanup (new local ops) after
	// applying, as a normal Yjs doc does; by default the doc only integrates.
	Cleanup bool `json:"cleanup,omitempty"`
	// Encode makes Yjs write encodeStateAsUpdate of the result to this file.
	Encode string `json:"encode,omitempty"`
}

type applyResult struct {
	Error   string            `json:"error"`
	Roots   map[string]string `json:"roots"`
	JSON    map[string]any    `json:"json"`
	Deltas  map[string]any    `json:"deltas"`
	SV      map[string]uint64 `json:"sv"`
	Pending bool              `json:"pending"`
	Client  string            `json:"client"`
}

// applyInYjs runs every job through real Yjs (one node process).
func applyInYjs(t testing.TB, env *interopEnv, jobs []applyJob) []applyResult {
	t.Helper()
	dir := t.TempDir()
	spec, err := json.Marshal(jobs)
	require.NoError(t, err)
	specPath := filepath.Join(dir, "jobs.json")
	require.NoError(t, os.WriteFile(specPath, spec, 0o644))
	out := env.node(t, "yjs/apply.mjs", "--batch", specPath)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, len(jobs))
	res := make([]applyResult, len(jobs))
	for i, l := range lines {
		iopDecodeJSON(t, []byte(l), &res[i])
	}
	return res
}

// iopFiles writes numbered update files into a temp dir.
type iopFiles struct {
	mu  sync.Mutex
	dir string
	n   int
}

// path returns a fresh file name in the directory (for Yjs to write).
func (w *iopFiles) path(t testing.TB) string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return filepath.Join(w.dir, fmt.Sprintf("y%06d.bin", w.n))
}

func (w *iopFiles) write(t testing.TB, b []byte) string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	p := filepath.Join(w.dir, fmt.Sprintf("u%06d.bin", w.n))
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// yjsCheck is one document Go produced, to be verified by real Yjs.
type yjsCheck struct {
	what string
	job  applyJob
	want iopView
	// goBytes, if set, must equal Yjs's encodeStateAsUpdate (job.Encode).
	goBytes []byte
}

type yjsChecks struct {
	mu     sync.Mutex
	checks []yjsCheck
}

func (c *yjsChecks) add(what string, files []string, roots map[string]string, want iopView) {
	c.addJob(what, applyJob{Files: files, Roots: roots}, want)
}

func (c *yjsChecks) addJob(what string, job applyJob, want iopView) {
	c.addCheck(yjsCheck{what: what, job: job, want: want})
}

func (c *yjsChecks) addCheck(ch yjsCheck) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, ch)
}

func (c *yjsChecks) run(t *testing.T, env *interopEnv) {
	t.Helper()
	require.NotEmpty(t, c.checks)
	jobs := make([]applyJob, len(c.checks))
	for i, ch := range c.checks {
		jobs[i] = ch.job
	}
	res := applyInYjs(t, env, jobs)
	for i, ch := range c.checks {
		r := res[i]
		t.Run(ch.what, func(t *testing.T) {
			require.Empty(t, r.Error, "Yjs failed to apply the Go-written update(s)")
			require.False(t, r.Pending, "Yjs has pending (undeliverable) structs after applying Go's update(s)")
			if ch.job.Cleanup {
				delete(r.SV, r.Client) // Yjs's own cleanup ops
			}
			got := expectedView(r.JSON, r.Deltas, r.SV)
			require.Equal(t, ch.want.JSON, got.JSON, "toJSON as seen by Yjs")
			require.Equal(t, ch.want.Deltas, got.Deltas, "text deltas as seen by Yjs")
			require.Equal(t, ch.want.SV, got.SV, "state vector as seen by Yjs")
			if ch.goBytes != nil {
				yjsBytes, err := os.ReadFile(ch.job.Encode)
				require.NoError(t, err)
				require.Equal(t, yjsBytes, ch.goBytes, "EncodeStateAsUpdate must be byte-identical to Yjs's encodeStateAsUpdate after the same updates")
			}
		})
	}
}

// ---------- helpers ----------

func iopApplyAll(t testing.TB, d *yjs.Doc, updates [][]byte) {
	t.Helper()
	for i, u := range updates {
		require.NoError(t, d.ApplyUpdate(u, "remote"), "update %d", i)
	}
}

// iopShuffled returns the updates in a random order with some of
// them repeated.
func iopShuffled(r *rand.Rand, updates [][]byte) [][]byte {
	out := append([][]byte(nil), updates...)
	for _, u := range updates {
		if r.IntN(3) == 0 {
			out = append(out, u)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// iopOwnClient is the client id of every Go doc that only applies Yjs cases; it
// is far from the ids gen.mjs draws, so it never collides.
const iopOwnClient = 1<<53 - 3

// ---------- tests ----------

// TestInteropYjsCases: Go decodes and applies Yjs-written updates, in order,
// shuffled with duplicates, merged, and as full/partial states, and reaches
// the same document and state vector as Yjs; Go's own encodings (full state,
// diffs, merges) are accepted by Yjs with the same result.
func TestInteropYjsCases(t *testing.T) {
	t.Parallel()
	env := needInterop(t)
	// YAPS_INTEROP_CASES / YAPS_INTEROP_SEED / YAPS_INTEROP_STEPS widen the
	// search locally; the defaults keep the test to a few seconds.
	cases := generateCases(t, env, iopEnvInt("YAPS_INTEROP_SEED", 1000), iopEnvInt("YAPS_INTEROP_CASES", 12), iopEnvInt("YAPS_INTEROP_STEPS", 60))
	files := &iopFiles{dir: t.TempDir()}
	checks := &yjsChecks{}

	t.Run("go", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				checkYjsCase(t, c, files, checks)
			})
		}
	})
	t.Run("yjs", func(t *testing.T) { checks.run(t, env) })
}

// checkYjsCase runs one generated case. Two oracles:
//
//   - want: the document Yjs gets by integrating all updates without any
//     formatting cleanup (as gen.mjs recorded it). State vectors always match
//     it (cleanup only deletes). Any encoding Go produces must give exactly
//     want when real Yjs integrates it the same way.
//   - parity: whatever sequence of updates Go applies, a normal Yjs doc (with
//     its formatting cleanup) applying the same sequence must end up exactly
//     like the Go doc. Cleanup may legitimately delete format marks, so this is
//     compared against real Yjs rather than against want.
func checkYjsCase(t *testing.T, c yjsCase, files *iopFiles, checks *yjsChecks) {
	want := expectedView(c.want.JSON, c.want.Deltas, c.want.SV)
	roots := c.want.Roots
	r := rand.New(rand.NewPCG(uint64(c.want.Seed), 7))

	newDoc := func() *yjs.Doc { return yjs.NewDoc(yjs.WithClientID(iopOwnClient)) }
	// apply applies the updates in Go, checks the state vector against want,
	// and queues the parity check with real Yjs.
	// Go's encoding of the result must be byte-identical to Yjs's (cleanup
	// only deletes, so neither doc's own client id shows up in it).
	apply := func(t *testing.T, what string, paths []string, updates [][]byte, sv map[string]uint64) *yjs.Doc {
		t.Helper()
		d := newDoc()
		iopApplyAll(t, d, updates)
		got := goView(t, d, roots, true)
		require.Equal(t, sv, got.SV, "state vector")
		enc, err := d.EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		checks.addCheck(yjsCheck{
			what:    c.name + "/" + what,
			job:     applyJob{Files: paths, Roots: roots, Cleanup: true, Encode: files.path(t)},
			want:    got,
			goBytes: enc,
		})
		return d
	}
	write := func(t *testing.T, updates [][]byte) []string {
		paths := make([]string, len(updates))
		for i, u := range updates {
			paths[i] = files.write(t, u)
		}
		return paths
	}

	t.Run("in-order", func(t *testing.T) {
		apply(t, "in-order", c.updatePaths, c.updates, want.SV)
	})
	t.Run("shuffled-duplicated", func(t *testing.T) {
		for round := 0; round < 3; round++ {
			order := iopShuffled(r, c.updates)
			apply(t, fmt.Sprintf("shuffled-%d", round), write(t, order), order, want.SV)
		}
	})
	t.Run("merged", func(t *testing.T) {
		apply(t, "merged", []string{filepath.Join(c.dir, "merged.bin")}, [][]byte{c.merged}, want.SV)
	})
	t.Run("full", func(t *testing.T) {
		apply(t, "full", []string{filepath.Join(c.dir, "full.bin")}, [][]byte{c.full}, want.SV)
	})
	t.Run("peers", func(t *testing.T) {
		for k, p := range c.peers {
			pw := c.want.Peers[k]
			apply(t, fmt.Sprintf("peer-%d", k), []string{filepath.Join(c.dir, fmt.Sprintf("peer-%d.bin", k))}, [][]byte{p}, pw.SV)
		}
	})
	t.Run("state-vector-from-update", func(t *testing.T) {
		sv, err := yjs.EncodeStateVectorFromUpdate(c.merged)
		require.NoError(t, err)
		m, err := yjs.DecodeStateVector(sv)
		require.NoError(t, err)
		got := map[string]uint64{}
		for k, v := range m {
			got[strconv.FormatUint(k, 10)] = v
		}
		require.Equal(t, want.SV, got)
	})

	// Go-written encodings: real Yjs integrating them must see want.
	t.Run("go-encodings", func(t *testing.T) {
		pure := func(what string, paths []string, w iopView) {
			checks.addJob(c.name+"/"+what, applyJob{Files: paths, Roots: roots}, w)
		}
		d := newDoc()
		iopApplyAll(t, d, [][]byte{c.merged})
		enc, err := d.EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		// Go's doc may hold its own cleanup deletions: Yjs must see exactly Go's doc.
		pure("encode-state", []string{files.write(t, enc)}, goView(t, d, roots, false))
		apply(t, "encode-state-parity", []string{files.write(t, enc)}, [][]byte{enc}, want.SV)

		merged, err := yjs.MergeUpdates(c.updates)
		require.NoError(t, err)
		pure("merge-updates", []string{files.write(t, merged)}, want)
		apply(t, "merge-updates-parity", []string{files.write(t, merged)}, [][]byte{merged}, want.SV)

		mergedShuffled, err := yjs.MergeUpdates(iopShuffled(r, c.updates))
		require.NoError(t, err)
		pure("merge-shuffled", []string{files.write(t, mergedShuffled)}, want)

		// first half merged + DiffUpdate(everything, sv(first half))
		half, err := yjs.MergeUpdates(c.updates[:len(c.updates)/2])
		require.NoError(t, err)
		halfSV, err := yjs.EncodeStateVectorFromUpdate(half)
		require.NoError(t, err)
		diff, err := yjs.DiffUpdate(c.merged, halfSV)
		require.NoError(t, err)
		pure("diff-update", []string{files.write(t, half), files.write(t, diff)}, want)
		apply(t, "diff-update-parity", write(t, [][]byte{diff, half}), [][]byte{diff, half}, want.SV)

		// EncodeStateAsUpdate against a peer's state vector completes that peer.
		if len(c.peers) > 0 {
			pd := newDoc()
			iopApplyAll(t, pd, [][]byte{c.peers[0]})
			full := newDoc()
			iopApplyAll(t, full, [][]byte{c.merged})
			delta, err := full.EncodeStateAsUpdate(pd.EncodeStateVector())
			require.NoError(t, err)
			paths := []string{filepath.Join(c.dir, "peer-0.bin"), files.write(t, delta)}
			pure("encode-against-sv", paths, want)
			apply(t, "encode-against-sv-parity", paths, [][]byte{c.peers[0], delta}, want.SV)
		}
	})
}

// ---------- Go-side random edits ----------

var goRoots = map[string]string{"m": "map", "a": "array", "t": "text", "x": "xmlfragment"}

var goKeys = []string{"k", "key", "ü", "😀", "x", "y", "", "a.b"}
var goWords = []string{"a", "hello", " ", "wörld", "日本語", "😀", "x\ny", "ab😀cd", "Ω"}

func goString(r *rand.Rand) string {
	var b strings.Builder
	for n := 1 + r.IntN(3); n > 0; n-- {
		b.WriteString(goWords[r.IntN(len(goWords))])
	}
	return b.String()
}

func goPrimitive(r *rand.Rand, depth int) any {
	n := 10
	if depth > 1 {
		n = 8
	}
	switch r.IntN(n) {
	case 0:
		return int64(r.IntN(2000) - 1000)
	case 1:
		return []float64{0.5, -2.5, 0.1, 1e21, 3.141592653589793, 1 << 31, -1e-7, 1.7976931348623157e308}[r.IntN(8)]
	case 2:
		return yjs.BigInt([]int64{0, -1, 1 << 40, math.MaxInt64, math.MinInt64, 9007199254740993}[r.IntN(6)])
	case 3:
		return r.IntN(2) == 0
	case 4:
		return nil
	case 5:
		return goString(r)
	case 6:
		return []int64{0, 1, -1, 1<<31 - 1, -(1 << 31), 1 << 31, 1<<53 - 1, -(1<<53 - 1)}[r.IntN(8)]
	case 7:
		return r.Float64()*1000 - 500
	case 8:
		m := map[string]any{}
		for i := r.IntN(3); i > 0; i-- {
			m[goKeys[r.IntN(len(goKeys))]] = goPrimitive(r, depth+1)
		}
		return m
	default:
		a := []any{}
		for i := r.IntN(3); i > 0; i-- {
			a = append(a, goPrimitive(r, depth+1))
		}
		return a
	}
}

func goContent(r *rand.Rand, depth int) any {
	switch x := r.IntN(10); {
	case x == 0 && r.IntN(5) == 0:
		opts := []yjs.Option{yjs.WithGUID(fmt.Sprintf("go-sub-%d", r.IntN(1e6)))}
		if r.IntN(3) == 0 {
			opts = append(opts, yjs.WithGC(false))
		}
		return yjs.NewDoc(opts...)
	case x == 0:
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	case x <= 2 && depth < 4:
		switch r.IntN(4) {
		case 3:
			e := yjs.NewXmlElement([]string{"p", "div"}[r.IntN(2)])
			e.SetAttribute("id", goString(r))
			return e
		case 0:
			m := yjs.NewMap()
			m.Set(goKeys[r.IntN(len(goKeys))], goPrimitive(r, 0))
			return m
		case 1:
			a := yjs.NewArray()
			a.Push(goPrimitive(r, 0))
			return a
		default:
			return yjs.NewText(goString(r))
		}
	}
	return goPrimitive(r, depth)
}

type goType struct {
	v     any
	depth int
}

// xmlContainer is what XmlFragment and XmlElement have in common.
type xmlContainer interface {
	Len() int
	Get(index int) any
	Insert(index int, nodes ...any)
	Delete(index, length int)
}

func goTypes(d *yjs.Doc) []goType {
	var out []goType
	var visit func(v any, depth int)
	visit = func(v any, depth int) {
		switch x := v.(type) {
		case *yjs.Map:
			out = append(out, goType{x, depth})
			for _, k := range x.Keys() {
				if c, ok := x.Get(k); ok {
					visit(c, depth+1)
				}
			}
		case *yjs.Array:
			out = append(out, goType{x, depth})
			for i := 0; i < x.Len(); i++ {
				visit(x.Get(i), depth+1)
			}
		case *yjs.Text, *yjs.XmlText:
			out = append(out, goType{x, depth})
		case xmlContainer:
			out = append(out, goType{x, depth})
			for i := 0; i < x.Len(); i++ {
				visit(x.Get(i), depth+1)
			}
		}
	}
	visit(d.GetMap("m"), 0)
	visit(d.GetArray("a"), 0)
	visit(d.GetText("t"), 0)
	visit(d.GetXmlFragment("x"), 0)
	return out
}

// textBoundaries lists the UTF-16 offsets of a text (delta) that do not split
// a surrogate pair.
func textBoundaries(delta []yjs.Delta) []int {
	out := []int{0}
	pos := 0
	for _, op := range delta {
		if s, ok := op.Insert.(string); ok {
			for _, r := range s {
				pos += len(utf16.Encode([]rune{r}))
				out = append(out, pos)
			}
			continue
		}
		pos++
		out = append(out, pos)
	}
	return out
}

func goAttrs(r *rand.Rand) map[string]any {
	switch r.IntN(6) {
	case 0:
		return map[string]any{"bold": true}
	case 1:
		return map[string]any{"italic": true}
	case 2:
		return map[string]any{"color": []string{"red", "blue"}[r.IntN(2)]}
	case 3:
		return map[string]any{"bold": nil, "size": int64(12)}
	}
	return nil
}

// goRandomEdit performs one random edit on a random live type of d.
func goRandomEdit(r *rand.Rand, d *yjs.Doc) {
	types := goTypes(d)
	gt := types[r.IntN(len(types))]
	switch x := gt.v.(type) {
	case *yjs.Map:
		keys := x.Keys()
		if len(keys) > 0 && r.IntN(4) == 0 {
			x.Delete(keys[r.IntN(len(keys))])
		} else {
			x.Set(goKeys[r.IntN(len(goKeys))], goContent(r, gt.depth))
		}
	case *yjs.Array:
		n := x.Len()
		if n > 0 && r.IntN(10) < 3 {
			i := r.IntN(n)
			x.Delete(i, min(n-i, 1+r.IntN(3)))
		} else {
			vals := make([]any, 1+r.IntN(3))
			for i := range vals {
				vals[i] = goContent(r, gt.depth)
			}
			x.Insert(r.IntN(n+1), vals...)
		}
	case *yjs.Text:
		editText(r, x.ToDelta(), x.Insert, x.Delete, x.Format, func(at int, attrs map[string]any) {
			x.InsertEmbed(at, map[string]any{"image": "go.png"}, attrs)
		}, goAttrs)
	case *yjs.XmlText:
		xmlAttrs := func(r *rand.Rand) map[string]any {
			// true-valued only, see randXmlTextAttrs in interop/yjs/lib.mjs
			return []map[string]any{nil, nil, {"b": true}, {"i": true}, {"u": true}, {"b": nil}}[r.IntN(6)]
		}
		editText(r, x.ToDelta(), x.Insert, x.Delete, x.Format, nil, xmlAttrs)
	case xmlContainer:
		n := x.Len()
		el, isElement := x.(*yjs.XmlElement)
		switch op := r.IntN(5); {
		case n > 0 && op == 0:
			i := r.IntN(n)
			x.Delete(i, min(n-i, 1+r.IntN(2)))
		case isElement && op == 1:
			attrs := el.Attributes()
			if len(attrs) > 0 && r.IntN(3) == 0 {
				keys := make([]string, 0, len(attrs))
				for k := range attrs {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				el.RemoveAttribute(keys[r.IntN(len(keys))])
			} else {
				el.SetAttribute([]string{"id", "class", "data-x"}[r.IntN(3)], goString(r))
			}
		case op == 2 && gt.depth < 4:
			e := yjs.NewXmlElement([]string{"p", "div", "span"}[r.IntN(3)])
			if r.IntN(2) == 0 {
				e.SetAttribute("k", goString(r))
			}
			x.Insert(r.IntN(n+1), e)
		default:
			x.Insert(r.IntN(n+1), yjs.NewXmlText(goString(r)))
		}
	}
}

// editText makes one random edit on a text, never splitting a surrogate pair.
func editText(r *rand.Rand, delta []yjs.Delta,
	insert func(int, string, map[string]any), del func(int, int), format func(int, int, map[string]any),
	embed func(int, map[string]any), attrs func(*rand.Rand) map[string]any) {
	b := textBoundaries(delta)
	at := b[r.IntN(len(b))]
	span := func() int {
		var ends []int
		for _, e := range b {
			if e > at && e <= at+5 {
				ends = append(ends, e)
			}
		}
		if len(ends) == 0 {
			return 0
		}
		return ends[r.IntN(len(ends))] - at
	}
	switch op := r.IntN(6); {
	case op <= 1:
		if n := span(); n > 0 {
			del(at, n)
		}
	case op == 2:
		if n := span(); n > 0 {
			a := attrs(r)
			if a == nil {
				a = map[string]any{"i": true}
			}
			format(at, n, a)
		}
	case op == 3 && embed != nil:
		embed(at, attrs(r))
	default:
		insert(at, goString(r), attrs(r))
	}
}

// TestInteropGoEdits: several Go docs edit concurrently and sync partially;
// real Yjs applies their updates (one per transaction, as emitted by
// OnUpdate) and Go's full-state encoding, and sees the same document.
func TestInteropGoEdits(t *testing.T) {
	t.Parallel()
	env := needInterop(t)
	files := &iopFiles{dir: t.TempDir()}
	checks := &yjsChecks{}
	t.Run("go", func(t *testing.T) {
		base := iopEnvInt("YAPS_INTEROP_SEED", 0)
		for seed := base; seed < base+iopEnvInt("YAPS_INTEROP_GO_SEEDS", 12); seed++ {
			t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
				t.Parallel()
				r := rand.New(rand.NewPCG(uint64(seed), 99))
				var docs []*yjs.Doc
				var updates []string
				var raw [][]byte
				for i := 0; i < 2+r.IntN(3); i++ {
					id := uint64(r.Uint32())
					if r.IntN(5) == 0 {
						id = r.Uint64N(1 << 53)
					}
					d := yjs.NewDoc(yjs.WithClientID(id), yjs.WithGC(r.IntN(5) != 0))
					d.OnUpdate(func(u []byte, origin any) {
						if origin != "remote" {
							updates = append(updates, files.write(t, u))
							raw = append(raw, u)
						}
					})
					docs = append(docs, d)
				}
				sync := func(from, to *yjs.Doc) {
					u, err := from.EncodeStateAsUpdate(to.EncodeStateVector())
					require.NoError(t, err)
					require.NoError(t, to.ApplyUpdate(u, "remote"))
				}
				for step := 0; step < 80; step++ {
					d := docs[r.IntN(len(docs))]
					d.Transact(func(*yjs.Transaction) {
						for n := 1 + r.IntN(3); n > 0; n-- {
							goRandomEdit(r, d)
						}
					}, "local")
					if r.IntN(3) == 0 {
						a, b := docs[r.IntN(len(docs))], docs[r.IntN(len(docs))]
						if a != b {
							sync(a, b)
						}
					}
				}
				for round := 0; round < 3; round++ {
					for _, a := range docs {
						for _, b := range docs {
							if a != b {
								sync(a, b)
							}
						}
					}
				}
				want := goView(t, docs[0], goRoots, false)
				for i, d := range docs[1:] {
					require.Equal(t, want, goView(t, d, goRoots, false), "Go docs diverged: doc %d vs doc 0", i+1)
				}
				checks.add(fmt.Sprintf("seed-%d/updates", seed), updates, goRoots, want)

				// Go's updates shuffled and duplicated: a fresh Go doc and a
				// normal Yjs doc applying the same order agree, bytes included.
				order := iopShuffled(r, raw)
				shuffled := yjs.NewDoc(yjs.WithClientID(iopOwnClient))
				iopApplyAll(t, shuffled, order)
				got := goView(t, shuffled, goRoots, true)
				require.Equal(t, want.SV, got.SV, "state vector after shuffled delivery")
				enc, err := shuffled.EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				paths := make([]string, len(order))
				for i, u := range order {
					paths[i] = files.write(t, u)
				}
				checks.addCheck(yjsCheck{
					what:    fmt.Sprintf("seed-%d/shuffled", seed),
					job:     applyJob{Files: paths, Roots: goRoots, Cleanup: true, Encode: files.path(t)},
					want:    got,
					goBytes: enc,
				})
				full, err := docs[0].EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				// A fresh Go doc and a fresh Yjs doc that apply Go's full state
				// re-encode it to the same bytes. (Not necessarily to `full`
				// itself: a doc built edit by edit may hold structs that a doc
				// integrating everything at once merges.)
				fresh := yjs.NewDoc()
				require.NoError(t, fresh.ApplyUpdate(full, "remote"))
				again, err := fresh.EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				checks.addCheck(yjsCheck{
					what:    fmt.Sprintf("seed-%d/full", seed),
					job:     applyJob{Files: []string{files.write(t, full)}, Roots: goRoots, Encode: files.path(t)},
					want:    want,
					goBytes: again,
				})
			})
		}
	})
	t.Run("yjs", func(t *testing.T) { checks.run(t, env) })
}

// ---------- mixed Go / Yjs peers ----------

// yjsPeers talks to interop/yjs/peer.mjs.
type yjsPeers struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

type peerResponse struct {
	OK      bool              `json:"ok"`
	Error   string            `json:"error"`
	Updates []string          `json:"updates"`
	JSON    map[string]any    `json:"json"`
	Deltas  map[string]any    `json:"deltas"`
	SV      map[string]uint64 `json:"sv"`
	Pending bool              `json:"pending"`
	Update  string            `json:"update"`
}

func startYjsPeers(t *testing.T, env *interopEnv) *yjsPeers {
	t.Helper()
	cmd := exec.Command("node", "yjs/peer.mjs")
	cmd.Dir = env.dir
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &yjsPeers{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return p
}

func (p *yjsPeers) call(t testing.TB, req map[string]any) peerResponse {
	t.Helper()
	b, err := json.Marshal(req)
	require.NoError(t, err)
	_, err = p.in.Write(append(b, '\n'))
	require.NoError(t, err)
	line, err := p.out.ReadBytes('\n')
	require.NoError(t, err, "reading from peer.mjs")
	var res peerResponse
	iopDecodeJSON(t, line, &res)
	require.True(t, res.OK, "peer.mjs %v: %s", req["op"], res.Error)
	return res
}

func iopDecodeB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// mixedPeer is one participant: a Go doc or a Yjs doc inside peer.mjs.
type mixedPeer struct {
	name string
	doc  *yjs.Doc // nil for Yjs peers
	out  [][]byte // Go peer: updates produced since last drain
}

type iopMessage struct {
	to     int
	due    int
	update []byte
}

// TestInteropMixedPeers: Go and Yjs peers edit the same document while
// updates travel shuffled, duplicated and delayed; everyone converges.
func TestInteropMixedPeers(t *testing.T) {
	t.Parallel()
	env := needInterop(t)
	yp := startYjsPeers(t, env)
	roots := map[string]string{"m": "map", "a": "array", "t": "text", "x": "xmlfragment"}

	base := iopEnvInt("YAPS_INTEROP_SEED", 0)
	for seed := base; seed < base+iopEnvInt("YAPS_INTEROP_MIXED_SEEDS", 6); seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 1234))
			var peers []*mixedPeer
			nGo, nYjs := 1+r.IntN(3), 1+r.IntN(3)
			used := map[uint64]bool{}
			newID := func() uint64 {
				for {
					id := uint64(r.Uint32())
					if !used[id] {
						used[id] = true
						return id
					}
				}
			}
			for i := 0; i < nGo; i++ {
				p := &mixedPeer{name: fmt.Sprintf("go%d-%d", seed, i)}
				p.doc = yjs.NewDoc(yjs.WithClientID(newID()), yjs.WithGC(r.IntN(4) != 0))
				iopTypeRoots(p.doc, roots)
				p.doc.OnUpdate(func(u []byte, origin any) {
					if origin != "remote" {
						p.out = append(p.out, u)
					}
				})
				peers = append(peers, p)
			}
			for i := 0; i < nYjs; i++ {
				p := &mixedPeer{name: fmt.Sprintf("yjs%d-%d", seed, i)}
				yp.call(t, map[string]any{"op": "open", "peer": p.name, "client": newID(), "seed": seed*100 + i + 1, "gc": r.IntN(4) != 0, "roots": roots})
				t.Cleanup(func() { yp.call(t, map[string]any{"op": "close", "peer": p.name}) })
				peers = append(peers, p)
			}

			var queue []iopMessage
			now := 0
			broadcast := func(from int, updates [][]byte) {
				for _, u := range updates {
					for to := range peers {
						if to == from {
							continue
						}
						queue = append(queue, iopMessage{to: to, due: now + r.IntN(6), update: u})
						if r.IntN(5) == 0 { // duplicate
							queue = append(queue, iopMessage{to: to, due: now + r.IntN(12), update: u})
						}
					}
				}
			}
			// deliver applies u at peer i and forwards whatever i produced in response.
			deliver := func(i int, u []byte) {
				p := peers[i]
				if p.doc != nil {
					require.NoError(t, p.doc.ApplyUpdate(u, "remote"), "Go peer %s", p.name)
					out := p.out
					p.out = nil
					broadcast(i, out)
					return
				}
				res := yp.call(t, map[string]any{"op": "apply", "peer": p.name, "update": base64.StdEncoding.EncodeToString(u)})
				var out [][]byte
				for _, s := range res.Updates {
					out = append(out, iopDecodeB64(t, s))
				}
				broadcast(i, out)
			}
			edit := func(i int) {
				p := peers[i]
				if p.doc != nil {
					p.doc.Transact(func(*yjs.Transaction) {
						for n := 1 + r.IntN(3); n > 0; n-- {
							goRandomEdit(r, p.doc)
						}
					}, "local")
					out := p.out
					p.out = nil
					broadcast(i, out)
					return
				}
				res := yp.call(t, map[string]any{"op": "edit", "peer": p.name, "n": 1})
				var out [][]byte
				for _, s := range res.Updates {
					out = append(out, iopDecodeB64(t, s))
				}
				broadcast(i, out)
			}

			for step := 0; step < 120; step++ {
				now++
				edit(r.IntN(len(peers)))
				// deliver a random subset of due messages, in random order
				r.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
				var keep []iopMessage
				var due []iopMessage
				for _, m := range queue {
					if m.due <= now && r.IntN(2) == 0 {
						due = append(due, m)
					} else {
						keep = append(keep, m)
					}
				}
				queue = keep
				for _, m := range due {
					deliver(m.to, m.update)
				}
			}
			// drain: deliver everything (shuffled) until quiet
			for rounds := 0; len(queue) > 0; rounds++ {
				require.Less(t, rounds, 50, "network never went quiet")
				batch := queue
				queue = nil
				r.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
				for _, m := range batch {
					deliver(m.to, m.update)
				}
			}

			views := make([]iopView, len(peers))
			for i, p := range peers {
				var state []byte
				if p.doc != nil {
					views[i] = goView(t, p.doc, roots, false)
					var err error
					state, err = p.doc.EncodeStateAsUpdate(nil)
					require.NoError(t, err)
				} else {
					res := yp.call(t, map[string]any{"op": "state", "peer": p.name})
					require.False(t, res.Pending, "Yjs peer %s has pending structs", p.name)
					views[i] = expectedView(res.JSON, res.Deltas, res.SV)
					state = iopDecodeB64(t, res.Update)
				}
				// a fresh Go doc and a fresh Yjs doc re-encode the peer's state identically
				fresh := yjs.NewDoc()
				require.NoError(t, fresh.ApplyUpdate(state, "remote"))
				goAgain, err := fresh.EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				res := yp.call(t, map[string]any{"op": "reencode", "update": base64.StdEncoding.EncodeToString(state)})
				require.Equal(t, iopDecodeB64(t, res.Update), goAgain, "re-encoding of peer %s's state: Yjs vs Go", p.name)
			}
			for i := 1; i < len(peers); i++ {
				require.Equal(t, views[0], views[i], "peer %s differs from %s", peers[i].name, peers[0].name)
			}
		})
	}
}

// ---------- malformed updates: Go must not accept what Yjs cannot read ----------

func uvarint(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// yjsUnreadable are updates real Yjs 13.6 throws on (or reads differently).
// A server that accepts and stores one of them serves a document that Yjs
// clients cannot load, so the engine must reject them. (Checked against real
// Yjs by TestInteropMutatedUpdates; listed here so they run without node.)
func yjsUnreadable(t testing.TB) map[string][]byte {
	t.Helper()
	d := yjs.NewDoc(yjs.WithClientID(5))
	var base []byte
	d.OnUpdate(func(u []byte, _ any) { base = u })
	d.GetMap("m").Set("kk", "vv")
	// base: 1 client, 1 struct, client 5, clock 0, map item "m"."kk" = "vv", empty delete set
	require.Equal(t, []byte{1, 1, 5, 0}, base[:4])
	require.Equal(t, 1, strings.Count(string(base), "kk"))
	require.Equal(t, 1, strings.Count(string(base), "vv"))
	tooBig := uint64(1) << 60 // > Number.MAX_SAFE_INTEGER: Yjs reads 1152921504606847000
	return map[string][]byte{
		// TextDecoder('utf-8', {fatal: true}) throws on invalid UTF-8
		"invalid utf-8 in a string value": []byte(strings.Replace(string(base), "vv", "\xff\xfe", 1)),
		"invalid utf-8 in a map key":      []byte(strings.Replace(string(base), "kk", "\xc3\x28", 1)),
		// client ids above 2^53-1 lose precision in JavaScript
		"struct client id above 2^53":  concat(base[:2], uvarint(tooBig), base[3:]),
		"delete set client above 2^53": concat([]byte{0, 1}, uvarint(tooBig), []byte{1, 0, 1}),
		// a zero-length delete range makes Yjs throw "Unexpected case"
		"zero-length delete range": {0, 1, 5, 1, 0, 0},
		// JSON.parse("undefined") throws: only ContentJSON reads it
		// (yjs review). Client 1, root "t": an embed, a format mark "b".
		"embed undefined":  {1, 1, 1, 0, 5, 1, 1, 't', 9, 'u', 'n', 'd', 'e', 'f', 'i', 'n', 'e', 'd', 0},
		"format undefined": {1, 1, 1, 0, 6, 1, 1, 't', 1, 'b', 9, 'u', 'n', 'd', 'e', 'f', 'i', 'n', 'e', 'd', 0},
		// a subdocument whose opts are null or undefined: Yjs reads
		// opts.shouldLoad and throws (root "a", guid "g")
		"subdoc opts null":      {1, 1, 1, 0, 9, 1, 1, 'a', 1, 'g', 126, 0},
		"subdoc opts undefined": {1, 1, 1, 0, 9, 1, 1, 'a', 1, 'g', 127, 0},
	}
}

// TestRejectsUpdatesYjsCannotRead: the engine rejects updates real Yjs cannot read.
func TestRejectsUpdatesYjsCannotRead(t *testing.T) {
	t.Parallel()
	for name, u := range yjsUnreadable(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := yjs.NewDoc()
			err := d.ApplyUpdate(u, nil)
			require.Error(t, err, "Yjs cannot read this update (doc after accepting it: %v, sv %v)", d.ToJSON(), d.StateVector())
			_, err = yjs.MergeUpdates([][]byte{u})
			require.Error(t, err, "MergeUpdates must not pass on what Yjs cannot read")
		})
	}
}

// TestMapEntryWithoutValue: a map entry whose content holds no value (a format
// mark, found by TestInteropMutatedUpdates) reads as undefined in Yjs: m.has
// is true, m.get is undefined and toJSON leaves the key out.
func TestMapEntryWithoutValue(t *testing.T) {
	t.Parallel()
	// root map "m", key "kk", ContentFormat {b: true}, client 5, no deletes
	update := []byte{1, 1, 5, 0, 0x26, 1, 1, 'm', 2, 'k', 'k', 1, 'b', 4, 't', 'r', 'u', 'e', 0}
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(update, nil))
	require.Equal(t, map[string]any{}, iopCanon(d.GetMap("m").ToJSON()), "Yjs: toJSON() is {} (the value is undefined)")
	if v, ok := d.GetMap("m").Get("kk"); ok {
		require.Equal(t, any(yjs.Undefined), v, "Yjs: m.get('kk') is undefined")
	}
}

// mutate flips, replaces, drops or inserts a few bytes.
func mutate(r *rand.Rand, b []byte) []byte {
	out := append([]byte(nil), b...)
	for n := 1 + r.IntN(3); n > 0; n-- {
		if len(out) == 0 {
			out = append(out, byte(r.IntN(256)))
			continue
		}
		i := r.IntN(len(out))
		switch r.IntN(5) {
		case 0:
			out[i] ^= 1 << r.IntN(8)
		case 1:
			out[i] = byte(r.IntN(256))
		case 2:
			out = append(out[:i], out[i+1:]...)
		case 3:
			out = append(out[:i], append([]byte{byte(r.IntN(256))}, out[i:]...)...)
		default:
			out[i] = byte(r.IntN(4))
		}
	}
	return out
}

// TestInteropMutatedUpdates is a differential test on randomly corrupted real
// Yjs updates: whatever real Yjs rejects, Go rejects; whatever both accept
// gives the same document and state vector; Go may be stricter only where Yjs
// merely parks the input as pending structs.
func TestInteropMutatedUpdates(t *testing.T) {
	t.Parallel()
	env := needInterop(t)
	seeds := seedUpdates(t)
	r := rand.New(rand.NewPCG(2026, 11))
	dir := t.TempDir()
	n := iopEnvInt("YAPS_INTEROP_MUTATIONS", 800)
	inputs := make([][]byte, n)
	jobs := make([]applyJob, n)
	for i := range inputs {
		inputs[i] = mutate(r, seeds[r.IntN(len(seeds))])
		p := filepath.Join(dir, fmt.Sprintf("m%05d.bin", i))
		require.NoError(t, os.WriteFile(p, inputs[i], 0o644))
		jobs[i] = applyJob{Files: []string{p}, Cleanup: true}
	}
	// The crafted inputs go through Yjs too, so their listing stays honest;
	// Go must reject all of them (some Yjs reads, but differently).
	mustReject := map[int]bool{}
	for name, u := range yjsUnreadable(t) {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".bin")
		require.NoError(t, os.WriteFile(p, u, 0o644))
		mustReject[len(inputs)] = true
		inputs = append(inputs, u)
		jobs = append(jobs, applyJob{Files: []string{p}, Cleanup: true})
	}
	res := applyInYjs(t, env, jobs)
	// Report at most a few examples per kind of disagreement, then the counts.
	counts := map[string]int{}
	report := func(kind, format string, args ...any) {
		counts[kind]++
		if counts[kind] <= 3 {
			t.Errorf(format, args...)
		}
	}
	for i, yr := range res {
		d := yjs.NewDoc(yjs.WithClientID(iopOwnClient))
		goErr := d.ApplyUpdate(inputs[i], nil)
		what := fmt.Sprintf("input %s (%x)", filepath.Base(jobs[i].Files[0]), inputs[i])
		switch {
		case mustReject[i]:
			if goErr == nil {
				report("crafted", "%s: crafted input Yjs cannot read (Yjs: %.80q) accepted by Go", what, yr.Error)
			}
			if yr.Error == "" && !strings.Contains(what, "above-2^53") {
				report("crafted", "%s: real Yjs reads this crafted input fine: listing in yjsUnreadable is wrong", what)
			}
		case yr.Error != "":
			if goErr == nil {
				firstLine, _, _ := strings.Cut(yr.Error, "\n")
				report("accepted: "+firstLine, "%s: real Yjs rejects it (%s) but Go accepts it: %v sv %v", what, firstLine, d.ToJSON(), d.StateVector())
			}
		case goErr != nil:
			// Zero-length structs and delete ranges are never written by Yjs;
			// rejecting them is fine even where Yjs happens to tolerate them.
			if !yr.Pending && len(yr.SV) > 0 && !strings.Contains(goErr.Error(), "empty") {
				report("too strict", "%s: Go rejects (%v) an update real Yjs integrates: json %v sv %v", what, goErr, yr.JSON, yr.SV)
			}
		default:
			goJSON := d.ToJSON()
			for k, v := range yr.JSON { // roots Yjs created only for pending structs
				if _, ok := goJSON[k]; !ok && (fmt.Sprint(v) == "[]" || fmt.Sprint(v) == "map[]" || v == "") {
					delete(yr.JSON, k)
					delete(yr.Roots, k)
				}
			}
			delete(yr.SV, yr.Client)
			want := expectedView(yr.JSON, yr.Deltas, yr.SV)
			got := goView(t, d, yr.Roots, true)
			if !reflect.DeepEqual(want, got) {
				report("disagree", "%s: Go and Yjs disagree:\nyjs: %v\ngo:  %v", what, want, got)
			}
		}
	}
	if t.Failed() {
		t.Logf("disagreements by kind: %v", counts)
	}
}

// A map entry whose content is a string shows its last UTF-16 code unit
// (Yjs splits the string into code units): of "😀" the lone low surrogate, which Go
// holds as U+FFFD; it showed the whole character (yjs review).
func TestMapStringEntryLastCodeUnit(t *testing.T) {
	t.Parallel()
	// client 1, root map "t", key "k", ContentString "😀", no deletes
	u := []byte{1, 1, 1, 0, 0x24, 1, 1, 't', 1, 'k', 4, 0xf0, 0x9f, 0x98, 0x80, 0}
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(u, nil))
	v, _ := d.GetMap("t").Get("k")
	require.Equal(t, "\uFFFD", v)
	// ToJSON shows the same value.
	require.Equal(t, "\uFFFD", d.GetMap("t").ToJSON()["k"])
}
