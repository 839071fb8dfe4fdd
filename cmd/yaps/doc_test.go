package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// writeDocUpdates builds a small document with a few transactions and writes
// each transaction's update to its own file, in order.
func writeDocUpdates(t *testing.T) (files []string, dir string) {
	t.Helper()
	dir = t.TempDir()
	d := yjs.NewDoc(yjs.WithClientID(77))
	d.OnUpdate(func(u []byte, _ any) {
		p := filepath.Join(dir, fmt.Sprintf("u%02d.bin", len(files)))
		require.NoError(t, os.WriteFile(p, u, 0o644))
		files = append(files, p)
	})
	d.Transact(func(*yjs.Transaction) {
		m := d.GetMap("meta")
		m.Set("title", "groceries")
		m.Set("count", int64(3))
		m.Set("ratio", 0.5)
		m.Set("blob", []byte{1, 2, 3})
		m.Set("big", yjs.BigInt(9223372036854775807))
		nested := yjs.NewMap()
		nested.Set("ok", true)
		m.Set("nested", nested)
	}, nil)
	d.Transact(func(*yjs.Transaction) {
		d.GetArray("items").Push("milk", int64(2), nil)
	}, nil)
	d.Transact(func(*yjs.Transaction) {
		d.GetText("notes").Insert(0, "hello wörld 😀", map[string]any{"bold": true})
	}, nil)
	d.Transact(func(*yjs.Transaction) {
		d.GetText("notes").Delete(0, 6)
		d.GetArray("items").Delete(2, 1)
	}, nil)
	require.Len(t, files, 4)
	return files, dir
}

func runCmd(t *testing.T, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = run(context.Background(), args, &out, &errb)
	return out.Bytes(), errb.Bytes(), err
}

func TestDocJSON(t *testing.T) {
	t.Parallel()
	files, _ := writeDocUpdates(t)
	meta := map[string]any{
		"title": "groceries", "count": float64(3), "ratio": 0.5,
		"blob":   map[string]any{"$bin": "AQID"},
		"big":    map[string]any{"$bigint": "9223372036854775807"},
		"nested": map[string]any{"ok": true},
	}
	full := map[string]any{"meta": meta, "items": []any{"milk", float64(2)}, "notes": "wörld 😀"}
	tests := []struct {
		name   string
		args   []string
		nFiles int // apply only the first nFiles updates (0: all)
		want   map[string]any
	}{
		{"typed roots", []string{"--map", "meta", "--array", "items", "--text", "notes"}, 0, full},
		{"inferred roots", nil, 0, full},
		{"pretty", []string{"--pretty"}, 0, full},
		{"prefix", nil, 2, map[string]any{"meta": meta, "items": []any{"milk", float64(2), nil}}},
		{"extra empty root", []string{"--array", "empty"}, 1, map[string]any{"meta": meta, "empty": []any{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			use := files
			if tc.nFiles > 0 {
				use = files[:tc.nFiles]
			}
			args := append(append([]string{"doc", "json"}, tc.args...), use...)
			stdout, stderr, err := runCmd(t, args...)
			require.NoError(t, err, "stderr: %s", stderr)
			var got map[string]any
			require.NoError(t, json.Unmarshal(stdout, &got), "stdout: %s", stdout)
			require.Equal(t, tc.want, got)
			if tc.name == "pretty" {
				require.Contains(t, string(stdout), "\n  \"items\"")
			}
		})
	}
}

func TestDocMerge(t *testing.T) {
	t.Parallel()
	files, dir := writeDocUpdates(t)
	stdout, stderr, err := runCmd(t, append([]string{"doc", "merge"}, files...)...)
	require.NoError(t, err, "stderr: %s", stderr)
	require.NotEmpty(t, stdout)
	merged := filepath.Join(dir, "merged.bin")
	require.NoError(t, os.WriteFile(merged, stdout, 0o644))

	seq, _, err := runCmd(t, append([]string{"doc", "json"}, files...)...)
	require.NoError(t, err)
	one, _, err := runCmd(t, "doc", "json", merged)
	require.NoError(t, err)
	require.JSONEq(t, string(seq), string(one), "merged update must give the same document")

	// merging the merge with a part of its inputs changes nothing
	again, _, err := runCmd(t, "doc", "merge", merged, files[1])
	require.NoError(t, err)
	againPath := filepath.Join(dir, "again.bin")
	require.NoError(t, os.WriteFile(againPath, again, 0o644))
	two, _, err := runCmd(t, "doc", "json", againPath)
	require.NoError(t, err)
	require.JSONEq(t, string(seq), string(two))
}

func TestDocErrors(t *testing.T) {
	t.Parallel()
	files, dir := writeDocUpdates(t)
	garbage := filepath.Join(dir, "garbage.bin")
	require.NoError(t, os.WriteFile(garbage, []byte{0xff, 0xff, 0xff, 0xff, 0xff}, 0o644))
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"no subcommand", []string{"doc"}, "missing subcommand"},
		{"unknown subcommand", []string{"doc", "frobnicate"}, "unknown subcommand"},
		{"json without files", []string{"doc", "json"}, "no update files"},
		{"merge without files", []string{"doc", "merge"}, "no update files"},
		{"missing file", []string{"doc", "json", filepath.Join(dir, "nope.bin")}, "nope.bin"},
		{"merge missing file", []string{"doc", "merge", filepath.Join(dir, "nope.bin")}, "nope.bin"},
		{"corrupt update", []string{"doc", "json", files[0], garbage}, "garbage.bin"},
		{"corrupt merge input", []string{"doc", "merge", garbage}, "doc merge"},
		{"conflicting root types", []string{"doc", "json", "--map", "x", "--text", "x", files[0]}, "both"},
		{"bad flag", []string{"doc", "json", "--bogus", files[0]}, "bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, _, err := runCmd(t, tc.args...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.msg)
			if tc.name != "no subcommand" {
				require.Empty(t, stdout, "nothing on stdout on error")
			}
		})
	}
}

// ---------- against real Yjs ----------

// interopDir returns interop/ when node and its node_modules are usable. Like
// the engine's interop tests it skips without them, unless YAPS_TEST_INTEROP=1.
func interopDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop"))
	require.NoError(t, err)
	reason := ""
	if _, err := exec.LookPath("node"); err != nil {
		reason = "node not found in PATH"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "yjs", "package.json")); err != nil {
		reason = "interop/node_modules missing: " + err.Error()
	}
	if reason != "" {
		if os.Getenv("YAPS_TEST_INTEROP") == "1" {
			t.Fatalf("YAPS_TEST_INTEROP=1 but the Yjs interop environment is unusable: %s", reason)
		}
		t.Skipf("skipping Yjs interop test: %s", reason)
	}
	return dir
}

func nodeRun(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node %v: %s", args, stderr.String())
	return out
}

// canonJSON decodes with UseNumber and canonicalises numbers so an
// integral float equals the same integer and big integers stay exact.
func canonJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "%.300s", b)
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				return "i:" + strconv.FormatInt(i, 10)
			}
			f, err := strconv.ParseFloat(string(x), 64)
			require.NoError(t, err)
			if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				return "i:" + strconv.FormatInt(int64(f), 10)
			}
			return "f:" + strconv.FormatFloat(f, 'g', -1, 64)
		case string:
			return "s:" + x
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

// TestDocMatchesYjs: `doc json` prints what real Yjs sees for the same update
// files, and real Yjs reads `doc merge` output as the same document.
func TestDocMatchesYjs(t *testing.T) {
	t.Parallel()
	dir := interopDir(t)
	out := t.TempDir()
	nodeRun(t, dir, "yjs/gen.mjs", "--out", out, "--seed", "77", "--cases", "4", "--steps", "50")
	cases, err := filepath.Glob(filepath.Join(out, "case-*"))
	require.NoError(t, err)
	require.Len(t, cases, 4)
	for _, c := range cases {
		t.Run(filepath.Base(c), func(t *testing.T) {
			t.Parallel()
			var exp struct {
				Roots map[string]string `json:"roots"`
			}
			b, err := os.ReadFile(filepath.Join(c, "expected.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &exp))
			updates, err := filepath.Glob(filepath.Join(c, "updates", "*.bin"))
			require.NoError(t, err)
			require.NotEmpty(t, updates)

			var flags, rootsArg []string
			for name, typ := range exp.Roots {
				flag := map[string]string{"map": "--map", "array": "--array", "text": "--text", "xmlfragment": "--xml"}[typ]
				flags = append(flags, flag, name)
				rootsArg = append(rootsArg, name+":"+typ)
			}
			yjsView := func(files ...string) any {
				args := append([]string{"yjs/apply.mjs", "--cleanup", "--roots", strings.Join(rootsArg, ",")}, files...)
				var res struct {
					JSON json.RawMessage `json:"json"`
				}
				require.NoError(t, json.Unmarshal(nodeRun(t, dir, args...), &res))
				return canonJSON(t, res.JSON)
			}

			stdout, stderr, err := runCmd(t, append(append([]string{"doc", "json"}, flags...), updates...)...)
			require.NoError(t, err, "stderr: %s", stderr)
			inOrder := yjsView(updates...)
			require.Equal(t, inOrder, canonJSON(t, stdout), "doc json vs Yjs, update by update")

			merged, stderr, err := runCmd(t, append([]string{"doc", "merge"}, updates...)...)
			require.NoError(t, err, "stderr: %s", stderr)
			mergedPath := filepath.Join(t.TempDir(), "merged.bin")
			require.NoError(t, os.WriteFile(mergedPath, merged, 0o644))
			stdout, stderr, err = runCmd(t, append(append([]string{"doc", "json"}, flags...), mergedPath)...)
			require.NoError(t, err, "stderr: %s", stderr)
			require.Equal(t, yjsView(mergedPath), canonJSON(t, stdout), "doc json vs Yjs on the merged update")
			require.Equal(t, inOrder, yjsView(mergedPath), "Yjs: merged update vs the updates it merges")
		})
	}
}
