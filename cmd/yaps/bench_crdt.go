package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// benchCommands holds the `yaps bench` subcommands. Other files add theirs
// from init():
//
//	func init() { benchCommands["http"] = command{summary: "...", run: runBenchHTTP} }
var benchCommands = map[string]command{}

func init() {
	benchCommands["crdt"] = command{
		summary: "replay an editing trace into the Go Yjs engine and time apply/encode/decode",
		run:     runBenchCRDT,
	}
	register("bench", "run benchmarks (yaps bench <name> -h)", runBench)
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	names := make([]string, 0, len(benchCommands))
	for n := range benchCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	usage := func() {
		fmt.Fprintln(stderr, "usage: yaps bench <name> [flags]")
		for _, n := range names {
			fmt.Fprintf(stderr, "  %-8s %s\n", n, benchCommands[n].summary)
		}
	}
	if len(args) == 0 {
		usage()
		return fmt.Errorf("bench: name a benchmark: yaps bench <name>, with <name> one of %s (listed above; yaps bench <name> -h for its flags)", strings.Join(names, ", "))
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		return nil
	}
	c, ok := benchCommands[args[0]]
	if !ok {
		usage()
		return fmt.Errorf("bench: unknown benchmark %q", args[0])
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// editTrace is the josephg/editing-traces format: positions and deletion
// lengths count Unicode code points (not UTF-16 units, not bytes).
type editTrace struct {
	Kind         string `json:"kind"`
	StartContent string `json:"startContent"`
	EndContent   string `json:"endContent"`
	NumAgents    int    `json:"numAgents"`
	Txns         []struct {
		Patches []tracePatch `json:"patches"`
		Parents []int        `json:"parents"` // concurrent traces only
		Agent   int          `json:"agent"`   // concurrent traces only
	} `json:"txns"`
}

type tracePatch struct {
	Pos, Del int
	Ins      string
}

func (p *tracePatch) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) != 3 {
		return fmt.Errorf("trace patch has %d fields, want [pos, del, ins]", len(raw))
	}
	if err := json.Unmarshal(raw[0], &p.Pos); err != nil {
		return fmt.Errorf("trace patch pos: %w", err)
	}
	if err := json.Unmarshal(raw[1], &p.Del); err != nil {
		return fmt.Errorf("trace patch del: %w", err)
	}
	if err := json.Unmarshal(raw[2], &p.Ins); err != nil {
		return fmt.Errorf("trace patch ins: %w", err)
	}
	if p.Pos < 0 || p.Del < 0 {
		return fmt.Errorf("trace patch has negative position or length")
	}
	return nil
}

// loadTrace reads a trace file, gzipped or plain JSON.
func loadTrace(path string) (*editTrace, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("trace %s: %w", path, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("trace %s: %w", path, err)
		}
	}
	var tr editTrace
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	if tr.Kind == "concurrent" {
		if tr.NumAgents <= 0 {
			return nil, fmt.Errorf("trace %s: concurrent trace without numAgents", path)
		}
		for i, t := range tr.Txns {
			if t.Agent < 0 || t.Agent >= tr.NumAgents {
				return nil, fmt.Errorf("trace %s: txn %d: agent %d out of range", path, i, t.Agent)
			}
			for _, p := range t.Parents {
				if p < 0 || p >= i {
					return nil, fmt.Errorf("trace %s: txn %d: parent %d is not an earlier txn", path, i, p)
				}
			}
		}
	} else if tr.Kind != "" {
		return nil, fmt.Errorf("trace %s: unknown trace kind %q", path, tr.Kind)
	}
	if tr.StartContent != "" {
		return nil, fmt.Errorf("trace %s: traces with startContent are not supported", path)
	}
	return &tr, nil
}

// unitPatches converts the trace's code point positions to the UTF-16 units
// Y.Text counts. Without astral characters (outside the BMP) both agree; with
// them every patch is converted against a mirror of the document (slow, exact).
func (tr *editTrace) unitPatches() ([][]tracePatch, error) {
	astral := hasAstral(tr.EndContent)
	for _, t := range tr.Txns {
		for _, p := range t.Patches {
			astral = astral || hasAstral(p.Ins)
		}
	}
	out := make([][]tracePatch, len(tr.Txns))
	if astral && tr.Kind == "concurrent" {
		return nil, errors.New("concurrent traces with characters outside the BMP are not supported")
	}
	if !astral {
		for i, t := range tr.Txns {
			out[i] = t.Patches
		}
		return out, nil
	}
	var doc []rune
	units := func(rs []rune) int {
		n := 0
		for _, r := range rs {
			n += utf16Width(r)
		}
		return n
	}
	for i, t := range tr.Txns {
		conv := make([]tracePatch, len(t.Patches))
		for j, p := range t.Patches {
			if p.Pos+p.Del > len(doc) {
				return nil, fmt.Errorf("trace txn %d patch %d: range [%d,%d) beyond document length %d", i, j, p.Pos, p.Pos+p.Del, len(doc))
			}
			conv[j] = tracePatch{Pos: units(doc[:p.Pos]), Del: units(doc[p.Pos : p.Pos+p.Del]), Ins: p.Ins}
			ins := []rune(p.Ins)
			doc = append(doc[:p.Pos], append(ins, doc[p.Pos+p.Del:]...)...)
		}
		out[i] = conv
	}
	return out, nil
}

func hasAstral(s string) bool {
	for _, r := range s {
		if r > 0xFFFF {
			return true
		}
	}
	return false
}

func utf16Width(r rune) int {
	if r > 0xFFFF && r <= utf8.MaxRune {
		return 2
	}
	return 1
}

// crdtBenchResult is the one JSON line `yaps bench crdt` prints. heap_mb is
// the peak heap in use during the replay (heap objects, sampled every 256
// transactions and at the end) above the baseline before it; live_mb is the
// heap still held after the replay, measured after a forced GC. Both use the
// same definitions as interop/bench/crdt.mjs.
type crdtBenchResult struct {
	Engine   string  `json:"engine"`
	Ops      int     `json:"ops"`
	ApplyMS  float64 `json:"apply_ms"`
	EncodeMS float64 `json:"encode_ms"`
	DecodeMS float64 `json:"decode_ms"`
	Bytes    int     `json:"bytes"`
	HeapMB   float64 `json:"heap_mb"`
	LiveMB   float64 `json:"live_mb"`
}

func runBenchCRDT(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench crdt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tracePath := fs.String("trace", "", "editing trace `FILE` (josephg/editing-traces JSON, optionally gzipped)")
	outPath := fs.String("out", "", "write the encoded v1 update to `FILE`")
	clientID := fs.Uint64("client-id", 0, "client `ID` of the replaying doc (0: random, like Yjs); fix it to compare bytes across engines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *tracePath == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("bench crdt: --trace FILE is required (and no positional arguments)")
	}
	tr, err := loadTrace(*tracePath)
	if err != nil {
		return fmt.Errorf("bench crdt: %w", err)
	}
	txns, err := tr.unitPatches()
	if err != nil {
		return fmt.Errorf("bench crdt: %w", err)
	}
	ops := 0
	for _, t := range txns {
		ops += len(t)
	}

	// A sequential trace is held packed while it is replayed: Go's GC lets
	// the heap grow in proportion to what is live, so a trace held as
	// 260,000 small structs (about 25 MB) would add its own headroom of
	// garbage to the engine's peak.
	var packed *packedTrace
	if tr.Kind != "concurrent" {
		packed = packTrace(txns)
		txns, tr.Txns = nil, nil
	}
	base := liveHeap()
	start := time.Now()
	var doc *yjs.Doc
	var text *yjs.Text
	peak := int64(0)
	if packed != nil {
		doc, text, peak, err = replaySequential(ctx, packed, *clientID)
	} else {
		doc, text, peak, err = replayConcurrent(ctx, tr, txns, *clientID)
	}
	if err != nil {
		return fmt.Errorf("bench crdt: %w", err)
	}
	applyDur := time.Since(start)
	peak -= base
	heap := liveHeap() - base
	runtime.KeepAlive(txns) // counted in base, so it must stay live for the difference
	runtime.KeepAlive(packed)
	if got := text.String(); got != tr.EndContent {
		return fmt.Errorf("bench crdt: replayed text differs from endContent (%d vs %d UTF-8 bytes)", len(got), len(tr.EndContent))
	}

	start = time.Now()
	update, err := doc.EncodeStateAsUpdate(nil)
	if err != nil {
		return fmt.Errorf("bench crdt: encode: %w", err)
	}
	encodeDur := time.Since(start)

	start = time.Now()
	doc2 := yjs.NewDoc()
	if err := doc2.ApplyUpdate(update, nil); err != nil {
		return fmt.Errorf("bench crdt: decode: %w", err)
	}
	decoded := doc2.GetText("text").String()
	decodeDur := time.Since(start)
	if decoded != tr.EndContent {
		return fmt.Errorf("bench crdt: decoded text differs from endContent (%d vs %d UTF-8 bytes)", len(decoded), len(tr.EndContent))
	}
	runtime.KeepAlive(doc)

	if *outPath != "" {
		if err := os.WriteFile(*outPath, update, 0o644); err != nil {
			return fmt.Errorf("bench crdt: %w", err)
		}
	}
	res := crdtBenchResult{
		Engine:   "go",
		Ops:      ops,
		ApplyMS:  millis(applyDur),
		EncodeMS: millis(encodeDur),
		DecodeMS: millis(decodeDur),
		Bytes:    len(update),
		HeapMB:   toMB(peak),
		LiveMB:   toMB(heap),
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

// packedTrace holds a sequential trace's patches in a few flat arrays.
type packedTrace struct {
	txnStart []int32 // txn i is patches txnStart[i] to txnStart[i+1]
	pos, del []int32
	insEnd   []int32 // patch j inserts ins[insEnd[j-1]:insEnd[j]]
	ins      string
}

func packTrace(txns [][]tracePatch) *packedTrace {
	n := 0
	var b strings.Builder
	for _, t := range txns {
		n += len(t)
		for _, p := range t {
			b.WriteString(p.Ins)
		}
	}
	pt := &packedTrace{txnStart: make([]int32, 0, len(txns)+1), pos: make([]int32, 0, n),
		del: make([]int32, 0, n), insEnd: make([]int32, 0, n), ins: b.String()}
	end := int32(0)
	for _, t := range txns {
		pt.txnStart = append(pt.txnStart, int32(len(pt.pos)))
		for _, p := range t {
			end += int32(len(p.Ins))
			pt.pos, pt.del, pt.insEnd = append(pt.pos, int32(p.Pos)), append(pt.del, int32(p.Del)), append(pt.insEnd, end)
		}
	}
	pt.txnStart = append(pt.txnStart, int32(len(pt.pos)))
	return pt
}

// replaySequential replays a sequential trace into one doc, one transaction
// per trace txn, and returns the doc and the peak heap seen.
func replaySequential(ctx context.Context, pt *packedTrace, clientID uint64) (*yjs.Doc, *yjs.Text, int64, error) {
	var opts []yjs.Option
	if clientID != 0 {
		opts = append(opts, yjs.WithClientID(clientID))
	}
	doc := yjs.NewDoc(opts...)
	text := doc.GetText("text")
	peak := int64(0)
	insStart := int32(0)
	for i := 0; i+1 < len(pt.txnStart); i++ {
		if i&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, 0, err
			}
			peak = max(peak, heapObjects())
		}
		var bad error
		doc.Transact(func(*yjs.Transaction) {
			for j := pt.txnStart[i]; j < pt.txnStart[i+1]; j++ {
				ins := pt.ins[insStart:pt.insEnd[j]]
				insStart = pt.insEnd[j]
				if bad == nil {
					bad = applyPatch(text, int(pt.pos[j]), int(pt.del[j]), ins)
				}
			}
		}, nil)
		if bad != nil {
			return nil, nil, 0, fmt.Errorf("txn %d: %w", i, bad)
		}
	}
	return doc, text, max(peak, heapObjects()), nil
}

// replayConcurrent replays a concurrent trace: every agent edits its own doc
// (client id base+agent, base = clientID or 1; ids must rise with the agent
// number for Yjs's tie-breaking to reproduce endContent). Before a txn, the
// agent's doc receives the updates of all the txn's ancestors it lacks, in
// trace order; the txn's own edits then run in one transaction. At the end
// agent 0's doc catches up with every txn and is the result.
func replayConcurrent(ctx context.Context, tr *editTrace, txns [][]tracePatch, clientID uint64) (*yjs.Doc, *yjs.Text, int64, error) {
	base := clientID
	if base == 0 {
		base = 1
	}
	n := len(txns)
	docs := make([]*yjs.Doc, tr.NumAgents)
	have := make([][]bool, tr.NumAgents)
	updates := make([][]byte, n)
	var last []byte
	agentDoc := func(a int) *yjs.Doc {
		if docs[a] == nil {
			docs[a] = yjs.NewDoc(yjs.WithClientID(base + uint64(a)))
			docs[a].OnUpdate(func(u []byte, origin any) {
				if origin == "trace" {
					last = u
				}
			})
			have[a] = make([]bool, n)
		}
		return docs[a]
	}
	catchUp := func(a int, roots []int) error {
		d, seen := docs[a], have[a]
		var missing []int
		stack := append([]int(nil), roots...)
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[x] {
				continue
			}
			seen[x] = true
			missing = append(missing, x)
			stack = append(stack, tr.Txns[x].Parents...)
		}
		sort.Ints(missing)
		for _, x := range missing {
			if updates[x] == nil {
				continue // a txn without changes
			}
			if err := d.ApplyUpdate(updates[x], "remote"); err != nil {
				return fmt.Errorf("agent %d applying txn %d: %w", a, x, err)
			}
		}
		return nil
	}
	peak := int64(0)
	for i, patches := range txns {
		if i&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, 0, err
			}
			peak = max(peak, heapObjects())
		}
		a := tr.Txns[i].Agent
		d := agentDoc(a)
		if err := catchUp(a, tr.Txns[i].Parents); err != nil {
			return nil, nil, 0, err
		}
		last = nil
		if err := replayTxnOrigin(d, d.GetText("text"), patches, "trace"); err != nil {
			return nil, nil, 0, fmt.Errorf("txn %d: %w", i, err)
		}
		updates[i] = last
		have[a][i] = true
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	d := agentDoc(0)
	if err := catchUp(0, all); err != nil {
		return nil, nil, 0, err
	}
	return d, d.GetText("text"), max(peak, heapObjects()), nil
}

// replayTxnOrigin applies one trace transaction. A panic of the engine is
// reported as an error (a broken trace, not a crash).
func replayTxnOrigin(doc *yjs.Doc, text *yjs.Text, patches []tracePatch, origin any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	doc.Transact(func(*yjs.Transaction) {
		for _, p := range patches {
			if err = applyPatch(text, p.Pos, p.Del, p.Ins); err != nil {
				return
			}
		}
	}, origin)
	return err
}

// applyPatch applies one trace patch to text, or says why it cannot.
func applyPatch(text *yjs.Text, pos, del int, ins string) error {
	if n := text.Len(); pos+del > n {
		return fmt.Errorf("patch [%d,%d) beyond text length %d", pos, pos+del, n)
	}
	if del > 0 {
		text.Delete(pos, del)
	}
	if ins != "" {
		text.Insert(pos, ins, nil)
	}
	return nil
}

func millis(d time.Duration) float64 {
	return math.Round(float64(d.Microseconds())/10) / 100
}

func toMB(b int64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// heapObjects returns the bytes in heap objects (live or not yet swept),
// cheaply and without stopping the world.
func heapObjects() int64 {
	metrics.Read(heapSample)
	return int64(heapSample[0].Value.Uint64())
}

// liveHeap returns the bytes of live heap objects after a full GC.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
