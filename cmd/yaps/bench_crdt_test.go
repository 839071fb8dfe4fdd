package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// synthTrace builds a random sequential editing trace in the editing-traces
// format. Positions count code points, like the real traces; with astral set
// it inserts characters outside the BMP, where code points and UTF-16 differ.
func synthTrace(seed uint64, txns int, astral bool) map[string]any {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"a", "bc", "hello ", "ü", "日本", "\n"}
	if astral {
		words = append(words, "😀", "x𝄞y")
	}
	var doc []rune
	out := make([]any, 0, txns)
	for i := 0; i < txns; i++ {
		var patches []any
		for n := 1 + r.IntN(3); n > 0; n-- {
			pos := r.IntN(len(doc) + 1)
			del := 0
			if pos < len(doc) && r.IntN(3) == 0 {
				del = 1 + r.IntN(min(4, len(doc)-pos))
			}
			ins := ""
			if del == 0 || r.IntN(2) == 0 {
				ins = words[r.IntN(len(words))]
			}
			doc = append(doc[:pos], append([]rune(ins), doc[pos+del:]...)...)
			patches = append(patches, []any{pos, del, ins})
		}
		out = append(out, map[string]any{"time": "2024-01-01T00:00:00Z", "patches": patches})
	}
	return map[string]any{"startContent": "", "endContent": string(doc), "txns": out}
}

func writeTrace(t *testing.T, trace map[string]any, gz bool) string {
	t.Helper()
	b, err := json.Marshal(trace)
	require.NoError(t, err)
	name := "trace.json"
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, err = zw.Write(b)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		b = buf.Bytes()
		name += ".gz"
	}
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestBenchCRDT(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		seed   uint64
		astral bool
		gz     bool
	}{
		{"bmp gzipped", 1, false, true},
		{"bmp plain json", 2, false, false},
		{"astral code points", 3, true, true},
		{"fixed client id", 4, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			trace := synthTrace(tc.seed, 400, tc.astral)
			path := writeTrace(t, trace, tc.gz)
			out := filepath.Join(t.TempDir(), "out.bin")
			args := []string{"bench", "crdt", "--trace", path, "--out", out}
			if tc.name == "fixed client id" {
				args = append(args, "--client-id", "4242")
			}
			stdout, stderr, err := runCmd(t, args...)
			require.NoError(t, err, "stderr: %s", stderr)

			lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
			require.Len(t, lines, 1, "exactly one JSON line")
			var res map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &res))
			for _, k := range []string{"ops", "apply_ms", "encode_ms", "decode_ms", "bytes", "heap_mb", "live_mb"} {
				require.Contains(t, res, k)
			}
			ops := 0
			for _, tx := range trace["txns"].([]any) {
				ops += len(tx.(map[string]any)["patches"].([]any))
			}
			require.InDelta(t, float64(ops), res["ops"], 0)
			require.GreaterOrEqual(t, res["apply_ms"].(float64), 0.0)

			update, err := os.ReadFile(out)
			require.NoError(t, err)
			require.InDelta(t, float64(len(update)), res["bytes"], 0)
			d := yjs.NewDoc()
			require.NoError(t, d.ApplyUpdate(update, nil))
			require.Equal(t, trace["endContent"], d.GetText("text").String())
			if tc.name == "fixed client id" {
				require.Contains(t, d.StateVector(), uint64(4242), "the replay must run as client 4242")
				require.Len(t, d.StateVector(), 1)
			}
		})
	}
}

func TestBenchCRDTErrors(t *testing.T) {
	t.Parallel()
	good := synthTrace(9, 50, false)
	wrongEnd := synthTrace(9, 50, false)
	wrongEnd["endContent"] = "definitely not it"
	concurrent := synthTrace(9, 5, false)
	concurrent["kind"] = "concurrent" // but no numAgents
	badParent := concurrentTrace()
	badParent["txns"].([]any)[1].(map[string]any)["parents"] = []any{3}
	badAgent := concurrentTrace()
	badAgent["txns"].([]any)[2].(map[string]any)["agent"] = 5
	unknownKind := synthTrace(9, 5, false)
	unknownKind["kind"] = "sideways"
	outOfRange := synthTrace(9, 5, false)
	outOfRange["txns"] = append(outOfRange["txns"].([]any), map[string]any{"patches": []any{[]any{100000, 0, "x"}}})
	badPatch := synthTrace(9, 5, false)
	badPatch["txns"] = []any{map[string]any{"patches": []any{[]any{0, "x"}}}}

	tests := []struct {
		name string
		args func(t *testing.T) []string
		msg  string
	}{
		{"no trace flag", func(*testing.T) []string { return []string{"bench", "crdt"} }, "--trace"},
		{"missing file", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", filepath.Join(t.TempDir(), "nope.json.gz")}
		}, "nope.json.gz"},
		{"wrong endContent", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, wrongEnd, true)}
		}, "endContent"},
		{"concurrent trace without agents", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, concurrent, true)}
		}, "numAgents"},
		{"parent not earlier", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, badParent, true)}
		}, "parent 3"},
		{"agent out of range", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, badAgent, true)}
		}, "agent 5"},
		{"unknown kind", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, unknownKind, true)}
		}, "sideways"},
		{"position out of range", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, outOfRange, true)}
		}, "beyond"},
		{"malformed patch", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, badPatch, false)}
		}, "patch"},
		{"stray argument", func(t *testing.T) []string {
			return []string{"bench", "crdt", "--trace", writeTrace(t, good, true), "extra"}
		}, "positional"},
		// Says what to do: name one of the benchmarks it lists.
		{"no benchmark", func(*testing.T) []string { return []string{"bench"} }, "bench: name a benchmark: yaps bench <name>, with <name> one of crdt, http, sync"},
		{"unknown benchmark", func(*testing.T) []string { return []string{"bench", "nope"} }, "unknown benchmark"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, _, err := runCmd(t, tc.args(t)...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.msg)
			require.Empty(t, stdout)
		})
	}
}

// concurrentTrace is a small two-agent trace with a fork and a merge:
//
//	0 (a0) "hello world" -> 1 (a0) "!"      \
//	                     -> 2 (a1) ">> "     -> 3 (a1, parents 1,2) "hello"->"HELLO" -> 4 (a0) "?"
func concurrentTrace() map[string]any {
	txn := func(agent int, parents []any, patches ...[]any) map[string]any {
		ps := make([]any, len(patches))
		for i, p := range patches {
			ps[i] = p
		}
		return map[string]any{"agent": agent, "parents": parents, "patches": ps}
	}
	return map[string]any{
		"kind":       "concurrent",
		"numAgents":  2,
		"endContent": ">> HELLO world!?",
		"txns": []any{
			txn(0, []any{}, []any{0, 0, "hello world"}),
			txn(0, []any{0}, []any{11, 0, "!"}),
			txn(1, []any{0}, []any{0, 0, ">> "}),
			txn(1, []any{1, 2}, []any{3, 5, "HELLO"}),
			txn(0, []any{3}, []any{15, 0, "?"}),
		},
	}
}

func TestBenchCRDTConcurrent(t *testing.T) {
	t.Parallel()
	trace := concurrentTrace()
	out := filepath.Join(t.TempDir(), "out.bin")
	stdout, stderr, err := runCmd(t, "bench", "crdt", "--trace", writeTrace(t, trace, true), "--out", out, "--client-id", "10")
	require.NoError(t, err, "stderr: %s", stderr)
	var res map[string]any
	require.NoError(t, json.Unmarshal(stdout, &res))
	require.InDelta(t, 5.0, res["ops"], 0)
	update, err := os.ReadFile(out)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(update, nil))
	require.Equal(t, ">> HELLO world!?", d.GetText("text").String())
	require.Equal(t, map[uint64]uint64{10: 13, 11: 8}, d.StateVector(), "agent a edits as client 10+a")
}

func TestBenchHelpListsCRDT(t *testing.T) {
	t.Parallel()
	_, stderr, err := runCmd(t, "bench", "-h")
	require.NoError(t, err)
	require.Contains(t, string(stderr), "crdt")
	require.Contains(t, benchCommands, "crdt")
}
