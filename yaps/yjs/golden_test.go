package yjs_test

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// goldenCase is written by interop/yjs/golden.mjs from real Yjs.
type goldenCase struct {
	Name                  string            `json:"name"`
	Roots                 map[string]string `json:"roots"`
	Full                  []byte            `json:"full"`
	Updates               [][]byte          `json:"updates"`
	JSON                  map[string]any    `json:"json"`
	StateVectorFromUpdate []byte            `json:"stateVectorFromUpdate"`
	Meta                  []updateMeta      `json:"meta"` // of Full, each of Updates, then Diff
	Merged                []byte            `json:"merged"`
	DiffStateVector       []byte            `json:"diffStateVector"`
	Diff                  []byte            `json:"diff"`
	MergedDiff            []byte            `json:"mergedDiff"`
	Ops                   [][]any           `json:"ops"`
	ClientID              uint64            `json:"clientID"`
	Peers                 *struct {
		Clients []uint64   `json:"clients"`
		Steps   [][]any    `json:"steps"`
		Updates [][][]byte `json:"updates"`
	} `json:"peers"`
	GC *bool `json:"gc"`
}

// updateMeta is Y.parseUpdateMeta's result, client -> clock.
type updateMeta struct {
	From map[uint64]uint64 `json:"from"`
	To   map[uint64]uint64 `json:"to"`
}

func (c *goldenCase) gc() bool { return c.GC == nil || *c.GC }

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	path := "testdata/golden.json"
	if p := os.Getenv("YJS_GOLDEN"); p != "" { // a wider sweep from golden.mjs
		path = p
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &g))
	require.NotEmpty(t, g.Cases)
	return g.Cases
}

// view renders a document's roots like golden.mjs: binary as {$bin},
// subdocuments as {$doc}, numbers as float64.
func gView(doc *yjs.Doc, roots map[string]string) map[string]any {
	out := map[string]any{}
	for name, kind := range roots {
		var v any
		switch kind {
		case "map":
			v = doc.GetMap(name).ToJSON()
		case "array":
			v = doc.GetArray(name).ToJSON()
		case "text":
			v = doc.GetText(name).String()
		case "xml":
			v = doc.GetXmlFragment(name).String()
		}
		out[name] = gNormalize(v)
	}
	return out
}

func gNormalize(v any) any {
	switch x := v.(type) {
	case []byte:
		return map[string]any{"$bin": base64.StdEncoding.EncodeToString(x)}
	case *yjs.Doc:
		return map[string]any{"$doc": x.GUID()}
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = gNormalize(el)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, el := range x {
			out[k] = gNormalize(el)
		}
		return out
	}
	return v
}

func TestGoldenDecodeReencode(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			doc := yjs.NewDoc(yjs.WithGC(c.gc()))
			require.NoError(t, doc.ApplyUpdate(c.Full, nil))
			require.Equal(t, c.JSON, gView(doc, c.Roots))
			again, err := doc.EncodeStateAsUpdate(nil)
			require.NoError(t, err)
			require.Equal(t, c.Full, again, "re-encoding must reproduce Yjs bytes")

			sv, err := yjs.EncodeStateVectorFromUpdate(c.Full)
			require.NoError(t, err)
			require.Equal(t, c.StateVectorFromUpdate, sv)
			require.Equal(t, c.StateVectorFromUpdate, doc.EncodeStateVector())
		})
	}
}

func TestGoldenParseUpdateMeta(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			updates := append([][]byte{c.Full}, c.Updates...)
			if c.Diff != nil {
				updates = append(updates, c.Diff)
			}
			require.Len(t, c.Meta, len(updates))
			for i, u := range updates {
				from, to, err := yjs.ParseUpdateMeta(u)
				require.NoError(t, err)
				require.Equal(t, c.Meta[i], updateMeta{From: from, To: to}, "update %d", i)
			}
		})
	}
}

func TestGoldenIncrementalShuffled(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			seeds := uint64(8)
			if len(c.Updates) > 100 {
				seeds = 3 // fully shuffled long histories are slow (pending sets)
			}
			for seed := uint64(0); seed < seeds; seed++ {
				r := rand.New(rand.NewPCG(seed, 1))
				updates := append([][]byte(nil), c.Updates...)
				updates = append(updates, c.Updates[r.IntN(len(c.Updates))]) // a duplicate
				if seed > 0 {
					r.Shuffle(len(updates), func(i, j int) { updates[i], updates[j] = updates[j], updates[i] })
				}
				doc := yjs.NewDoc(yjs.WithGC(c.gc()))
				for _, u := range updates {
					require.NoError(t, doc.ApplyUpdate(u, nil))
				}
				require.Equal(t, c.JSON, gView(doc, c.Roots), "seed %d", seed)
				full, err := doc.EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				require.Equal(t, c.Full, full, "seed %d", seed)
			}
		})
	}
}

func TestGoldenMergeDiff(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		if c.Merged == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			merged, err := yjs.MergeUpdates(c.Updates)
			require.NoError(t, err)
			require.Equal(t, c.Merged, merged, "MergeUpdates must match Y.mergeUpdates")
			diff, err := yjs.DiffUpdate(c.Full, c.DiffStateVector)
			require.NoError(t, err)
			require.Equal(t, c.Diff, diff, "DiffUpdate must match Y.diffUpdate")
			mdiff, err := yjs.DiffUpdate(merged, c.DiffStateVector)
			require.NoError(t, err)
			require.Equal(t, c.MergedDiff, mdiff)

			doc := yjs.NewDoc()
			require.NoError(t, doc.ApplyUpdate(merged, nil))
			require.Equal(t, c.JSON, gView(doc, c.Roots))
		})
	}
}

// TestGoldenLocalOps replays the scripted edits locally and expects the
// exact bytes Yjs produced, update by update.
func TestGoldenLocalOps(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		if c.Ops == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			doc := yjs.NewDoc(yjs.WithClientID(c.ClientID), yjs.WithGC(c.gc()))
			var updates [][]byte
			var opOf []int // index of the op that produced each update
			op := 0
			doc.OnUpdate(func(u []byte, _ any) {
				updates = append(updates, u)
				opOf = append(opOf, op)
			})
			for i := range c.Ops {
				op = i
				gApplyOp(t, doc, c.Roots, c.Ops[i])
			}
			require.Equal(t, c.JSON, gView(doc, c.Roots))
			require.Equal(t, len(c.Updates), len(updates))
			for i := range updates {
				require.Equal(t, c.Updates[i], updates[i], "update %d (op %d: %v)", i, opOf[i], c.Ops[opOf[i]])
			}
			full, err := doc.EncodeStateAsUpdate(nil)
			require.NoError(t, err)
			require.Equal(t, c.Full, full)
		})
	}
}

func gNum(v any) int { return int(v.(float64)) }

func gAttrs(v any) map[string]any {
	if v == nil {
		return nil
	}
	return gFromJSON(v).(map[string]any)
}

// fromJSON turns integral JSON numbers into int64 so they are written as
// integers, like JavaScript numbers.
func gFromJSON(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	case []any:
		for i := range x {
			x[i] = gFromJSON(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = gFromJSON(x[k])
		}
	}
	return v
}

// TestGoldenPeers replays peers that edit and sync in a scripted order: each
// peer must emit exactly the updates its Yjs counterpart emitted, including
// integrations of remote updates and formatting cleanups.
func TestGoldenPeers(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		if c.Peers == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			var docs []*yjs.Doc
			got := make([][][]byte, len(c.Peers.Clients))
			for i, id := range c.Peers.Clients {
				d := yjs.NewDoc(yjs.WithClientID(id))
				i := i
				d.OnUpdate(func(u []byte, _ any) { got[i] = append(got[i], u) })
				docs = append(docs, d)
			}
			for si, step := range c.Peers.Steps {
				switch step[0] {
				case "sync":
					a, b := docs[gNum(step[1])], docs[gNum(step[2])]
					u, err := a.EncodeStateAsUpdate(b.EncodeStateVector())
					require.NoError(t, err)
					require.NoError(t, b.ApplyUpdate(u, nil))
				case "op":
					gApplyOp(t, docs[gNum(step[1])], c.Roots, step[2].([]any))
				}
				for i := range docs {
					for k := 0; k < min(len(got[i]), len(c.Peers.Updates[i])); k++ {
						require.Equal(t, c.Peers.Updates[i][k], got[i][k], "peer %d update %d after step %d %v", i, k, si, step)
					}
				}
			}
			for i := range docs {
				require.Equal(t, len(c.Peers.Updates[i]), len(got[i]), "peer %d", i)
				require.Equal(t, c.JSON, gView(docs[i], c.Roots))
			}
		})
	}
}

// gBuildXML mirrors golden.mjs buildXml; attributes are set in sorted key
// order, which is the order the script uses.
func gBuildXML(spec any) any {
	if s, ok := spec.(string); ok {
		return yjs.NewXmlText(s)
	}
	m := spec.(map[string]any)
	el := yjs.NewXmlElement(m["name"].(string))
	if attrs, ok := m["attrs"].(map[string]any); ok {
		keys := make([]string, 0, len(attrs))
		for k := range attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			el.SetAttribute(k, attrs[k])
		}
	}
	if children, ok := m["children"].([]any); ok {
		var nodes []any
		for _, c := range children {
			nodes = append(nodes, gBuildXML(c))
		}
		el.Insert(0, nodes...)
	}
	return el
}

// gBuildType mirrors golden.mjs buildType (map keys in sorted order, which
// is the order the script writes them in).
func gBuildType(spec any) any {
	m, ok := spec.(map[string]any)
	if !ok {
		return gFromJSON(spec)
	}
	switch {
	case m["map"] != nil:
		out := yjs.NewMap()
		entries := m["map"].(map[string]any)
		keys := make([]string, 0, len(entries))
		for k := range entries {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out.Set(k, gBuildType(entries[k]))
		}
		return out
	case m["array"] != nil:
		out := yjs.NewArray()
		for _, el := range m["array"].([]any) {
			out.Push(gBuildType(el))
		}
		return out
	case m["text"] != nil:
		return yjs.NewText(m["text"].(string))
	}
	return gFromJSON(spec)
}

func gApplyOp(t *testing.T, doc *yjs.Doc, roots map[string]string, op []any) {
	t.Helper()
	kind, name, args := op[0].(string), op[1].(string), op[2:]
	for len(args) < 3 {
		args = append(args, nil)
	}
	switch kind {
	case "text.insert":
		doc.GetText(name).Insert(gNum(args[0]), args[1].(string), gAttrs(args[2]))
	case "text.delete":
		doc.GetText(name).Delete(gNum(args[0]), gNum(args[1]))
	case "text.format":
		doc.GetText(name).Format(gNum(args[0]), gNum(args[1]), gAttrs(args[2]))
	case "text.embed":
		doc.GetText(name).InsertEmbed(gNum(args[0]), gFromJSON(args[1]), gAttrs(args[2]))
	case "text.applyDelta":
		var delta []yjs.Delta
		for _, raw := range args[0].([]any) {
			op := raw.(map[string]any)
			d := yjs.Delta{Insert: gFromJSON(op["insert"]), Attributes: gAttrs(op["attributes"])}
			if v, ok := op["retain"].(float64); ok {
				d.Retain = int(v)
			}
			if v, ok := op["delete"].(float64); ok {
				d.Delete = int(v)
			}
			delta = append(delta, d)
		}
		doc.GetText(name).ApplyDelta(delta)
	case "xml.insert":
		var nodes []any
		for _, spec := range args[1].([]any) {
			nodes = append(nodes, gBuildXML(spec))
		}
		doc.GetXmlFragment(name).Insert(gNum(args[0]), nodes...)
	case "xml.delete":
		doc.GetXmlFragment(name).Delete(gNum(args[0]), gNum(args[1]))
	case "map.setType":
		doc.GetMap(name).Set(args[0].(string), gBuildType(args[1]))
	case "array.insertType":
		doc.GetArray(name).Insert(gNum(args[0]), gBuildType(args[1]))
	case "map.set":
		doc.GetMap(name).Set(args[0].(string), gFromJSON(args[1]))
	case "map.delete":
		doc.GetMap(name).Delete(args[0].(string))
	case "array.insert":
		doc.GetArray(name).Insert(gNum(args[0]), gFromJSON(args[1]).([]any)...)
	case "array.delete":
		doc.GetArray(name).Delete(gNum(args[0]), gNum(args[1]))
	default:
		t.Fatalf("unknown op %s", kind)
	}
}
