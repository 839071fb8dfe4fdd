package yjs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// syncDocs exchanges full state between all docs.
func syncDocs(t *testing.T, docs ...*yjs.Doc) {
	t.Helper()
	for _, a := range docs {
		for _, b := range docs {
			if a == b {
				continue
			}
			u, err := a.EncodeStateAsUpdate(b.EncodeStateVector())
			require.NoError(t, err)
			require.NoError(t, b.ApplyUpdate(u, "sync"))
		}
	}
}

func TestMapBasics(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	m := doc.GetMap("m")
	m.Set("a", 1)
	m.Set("b", "x")
	m.Set("c", []any{1, 2})
	m.Set("bin", []byte{7})
	m.Set("a", 2)
	m.Delete("b")
	require.False(t, m.Has("b"))
	v, ok := m.Get("a")
	require.True(t, ok)
	require.Equal(t, int64(2), v)
	require.Equal(t, []string{"a", "bin", "c"}, m.Keys())
	require.Equal(t, 3, m.Len())
	require.Equal(t, map[string]any{"a": int64(2), "bin": []byte{7}, "c": []any{int64(1), int64(2)}}, m.ToJSON())
	require.Same(t, doc, m.Doc())
	require.Error(t, m.TrySet("bad", struct{}{}))
}

func TestNestedPrelimTypes(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	inner := yjs.NewMap()
	inner.Set("x", 1)
	list := yjs.NewArray()
	list.Push("a", "b")
	inner.Set("list", list)
	inner.Set("text", yjs.NewText("hello"))
	doc.GetMap("root").Set("inner", inner)

	got, _ := doc.GetMap("root").Get("inner")
	require.Same(t, inner, got)
	require.Same(t, doc, inner.Doc())
	want := map[string]any{"root": map[string]any{"inner": map[string]any{"x": int64(1), "list": []any{"a", "b"}, "text": "hello"}}}
	require.Equal(t, want, doc.ToJSON())

	other := yjs.NewDoc()
	u, err := doc.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	require.NoError(t, other.ApplyUpdate(u, nil))
	require.Equal(t, want, other.ToJSON(), "roots untyped by Get* are inferred")
	n, _ := other.GetMap("root").Get("inner")
	l, _ := n.(*yjs.Map).Get("list")
	l.(*yjs.Array).Push("c")
	require.Equal(t, []any{"a", "b", "c"}, l.(*yjs.Array).ToJSON())
}

func TestArrayOps(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	a := doc.GetArray("a")
	a.Push(1, 2, 3)
	a.Insert(1, "x", []byte{1}, yjs.NewMap())
	a.Delete(0, 1)
	require.Equal(t, 5, a.Len())
	require.Equal(t, "x", a.Get(0))
	require.IsType(t, &yjs.Map{}, a.Get(2))
	require.Equal(t, []any{"x", []byte{1}, map[string]any{}, int64(2), int64(3)}, a.ToJSON())
	require.Error(t, a.TryInsert(10, 1))
	require.Error(t, a.TryDelete(4, 2))
	require.Nil(t, a.Get(99))
}

func TestTextEditingAndFormatting(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	txt := doc.GetText("t")
	txt.Insert(0, "Hello World", nil)
	txt.Format(0, 5, map[string]any{"bold": true})
	txt.Insert(5, "!", nil) // inherits bold
	txt.InsertEmbed(0, map[string]any{"img": "x"}, nil)
	txt.Delete(7, 1)
	require.Equal(t, "Hello!World", txt.String())
	require.Equal(t, 12, txt.Len())
	require.Equal(t, []yjs.Delta{
		{Insert: map[string]any{"img": "x"}},
		{Insert: "Hello!", Attributes: map[string]any{"bold": true}},
		{Insert: "World"},
	}, txt.ToDelta())
	txt.Format(0, 12, map[string]any{"bold": nil})
	require.Equal(t, []yjs.Delta{{Insert: map[string]any{"img": "x"}}, {Insert: "Hello!World"}}, txt.ToDelta())
}

func TestTextUTF16(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	txt := doc.GetText("t")
	txt.Insert(0, "a😀b", nil)
	require.Equal(t, 4, txt.Len())
	txt.Insert(3, "é", nil)
	require.Equal(t, "a😀éb", txt.String())
	txt.Delete(1, 2)
	require.Equal(t, "aéb", txt.String())
}

// TestConcurrentInsertConverges checks YATA ordering: every delivery order
// yields the same document.
func TestConcurrentInsertConverges(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			var docs []*yjs.Doc
			base := yjs.NewDoc(yjs.WithClientID(100))
			base.GetText("t").Insert(0, "ab", nil)
			baseU, _ := base.EncodeStateAsUpdate(nil)
			var updates [][]byte
			for i := 0; i < n; i++ {
				d := yjs.NewDoc(yjs.WithClientID(uint64(i + 1)))
				require.NoError(t, d.ApplyUpdate(baseU, nil))
				d.OnUpdate(func(u []byte, origin any) {
					if origin == nil {
						updates = append(updates, u)
					}
				})
				d.GetText("t").Insert(1, fmt.Sprintf("[%d]", i), nil)
				d.GetArray("a").Insert(0, i)
				d.GetMap("m").Set("k", i)
				docs = append(docs, d)
			}
			var want map[string]any
			for seed := uint64(0); seed < 6; seed++ {
				r := rand.New(rand.NewPCG(seed, 7))
				d := yjs.NewDoc()
				order := r.Perm(len(updates))
				require.NoError(t, d.ApplyUpdate(baseU, nil))
				for _, i := range order {
					require.NoError(t, d.ApplyUpdate(updates[i], nil))
				}
				if want == nil {
					want = d.ToJSON()
				}
				require.Equal(t, want, d.ToJSON())
			}
			syncDocs(t, docs...)
			for _, d := range docs {
				require.Equal(t, want, d.ToJSON())
			}
			// lower client ids win ties: [0] comes first
			require.Equal(t, "a[0][1]", want["t"].(string)[:7])
			require.Equal(t, int64(n-1), want["m"].(map[string]any)["k"], "highest client wins the map key")
		})
	}
}

func TestRandomConvergence(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		docs := []*yjs.Doc{yjs.NewDoc(yjs.WithClientID(1)), yjs.NewDoc(yjs.WithClientID(2)), yjs.NewDoc(yjs.WithClientID(3))}
		for round := 0; round < 20; round++ {
			for _, d := range docs {
				for k := 0; k < 1+r.IntN(4); k++ {
					randomEdit(r, d)
				}
			}
			if r.IntN(3) == 0 {
				syncDocs(t, docs[0], docs[r.IntN(3)])
			}
		}
		syncDocs(t, docs...)
		for _, d := range docs[1:] {
			require.Equal(t, docs[0].ToJSON(), d.ToJSON(), "seed %d", seed)
			require.Equal(t, docs[0].GetText("t").ToDelta(), d.GetText("t").ToDelta(), "seed %d", seed)
		}
		u, err := docs[0].EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		fresh := yjs.NewDoc()
		require.NoError(t, fresh.ApplyUpdate(u, nil))
		require.Equal(t, docs[0].ToJSON(), fresh.ToJSON())
		again, err := fresh.EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		require.Equal(t, u, again)
	}
}

// randomEdit makes one random local edit. It avoids astral characters:
// Yjs (and so this package) replaces a surrogate pair split by a no-op
// format with U+FFFD locally only, which would break convergence checks.
func randomEdit(r *rand.Rand, d *yjs.Doc) {
	txt, arr, m := d.GetText("t"), d.GetArray("a"), d.GetMap("m")
	switch r.IntN(7) {
	case 0, 1:
		txt.Insert(r.IntN(txt.Len()+1), []string{"x", "yz", "日本", "héllo "}[r.IntN(4)], nil)
	case 2:
		if n := txt.Len(); n > 0 {
			i := r.IntN(n)
			txt.Delete(i, 1+r.IntN(min(3, n-i)))
		}
	case 3:
		if n := txt.Len(); n > 0 {
			i := r.IntN(n)
			txt.Format(i, 1+r.IntN(n-i), map[string]any{"b": []any{true, nil}[r.IntN(2)]})
		}
	case 4:
		arr.Insert(r.IntN(arr.Len()+1), r.IntN(100), "s")
	case 5:
		if n := arr.Len(); n > 0 {
			arr.Delete(r.IntN(n), 1)
		}
	case 6:
		if r.IntN(2) == 0 {
			m.Set(fmt.Sprint("k", r.IntN(4)), r.IntN(10))
		} else {
			m.Delete(fmt.Sprint("k", r.IntN(4)))
		}
	}
}

func TestPendingOutOfOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	src := yjs.NewDoc(yjs.WithClientID(5))
	var updates [][]byte
	src.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
	txt := src.GetText("t")
	txt.Insert(0, "abc", nil)
	txt.Insert(3, "def", nil)
	txt.Delete(1, 2)
	src.GetMap("m").Set("k", "v")
	txt.Insert(0, "X", nil)

	dst := yjs.NewDoc()
	for i := len(updates) - 1; i >= 0; i-- { // reverse order
		require.NoError(t, dst.ApplyUpdate(updates[i], nil))
		require.NoError(t, dst.ApplyUpdate(updates[i], nil)) // duplicate
	}
	require.Equal(t, src.ToJSON(), dst.ToJSON())
	require.Equal(t, src.StateVector(), dst.StateVector())

	// a delete for content not yet received waits in the pending delete set
	late := yjs.NewDoc()
	require.NoError(t, late.ApplyUpdate(updates[2], nil))
	pending, err := late.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	require.NotEmpty(t, pending)
	require.NoError(t, late.ApplyUpdate(updates[0], nil))
	require.NoError(t, late.ApplyUpdate(updates[1], nil))
	require.Equal(t, "adef", late.GetText("t").String())
}

func TestGarbageCollection(t *testing.T) {
	t.Parallel()
	for _, gc := range []bool{true, false} {
		doc := yjs.NewDoc(yjs.WithClientID(1), yjs.WithGC(gc))
		m := doc.GetMap("m")
		nested := yjs.NewArray()
		m.Set("n", nested)
		nested.Push("a long string value that takes space", 1, 2, 3)
		txt := doc.GetText("t")
		txt.Insert(0, "some deleted content", nil)
		before, _ := doc.EncodeStateAsUpdate(nil)
		m.Delete("n")
		txt.Delete(0, 20)
		after, _ := doc.EncodeStateAsUpdate(nil)
		if gc {
			require.Less(t, len(after), len(before)/2, "deleted content is dropped")
		} else {
			require.Greater(t, len(after), len(before), "content is kept without gc")
		}
		fresh := yjs.NewDoc(yjs.WithGC(gc))
		require.NoError(t, fresh.ApplyUpdate(after, nil))
		fresh.GetMap("m")
		fresh.GetText("t")
		require.Equal(t, doc.ToJSON(), fresh.ToJSON())
		again, _ := fresh.EncodeStateAsUpdate(nil)
		require.Equal(t, after, again)
	}
}

func TestMergeAndDiffEqualApplying(t *testing.T) {
	t.Parallel()
	src := yjs.NewDoc(yjs.WithClientID(3))
	var updates [][]byte
	src.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		randomEdit(r, src)
	}
	other := yjs.NewDoc(yjs.WithClientID(4))
	other.OnUpdate(func(u []byte, origin any) {
		if origin == nil {
			updates = append(updates, u)
		}
	})
	for i := 0; i < 30; i++ {
		randomEdit(r, other)
	}
	merged, err := yjs.MergeUpdates(updates)
	require.NoError(t, err)
	a := yjs.NewDoc()
	require.NoError(t, a.ApplyUpdate(merged, nil))
	b := yjs.NewDoc()
	for _, u := range updates {
		require.NoError(t, b.ApplyUpdate(u, nil))
	}
	require.Equal(t, b.ToJSON(), a.ToJSON())

	half, err := yjs.MergeUpdates(updates[:len(updates)/2])
	require.NoError(t, err)
	sv, err := yjs.EncodeStateVectorFromUpdate(half)
	require.NoError(t, err)
	diff, err := yjs.DiffUpdate(merged, sv)
	require.NoError(t, err)
	c := yjs.NewDoc()
	require.NoError(t, c.ApplyUpdate(half, nil))
	require.Equal(t, sv, c.EncodeStateVector())
	require.NoError(t, c.ApplyUpdate(diff, nil))
	require.Equal(t, b.ToJSON(), c.ToJSON())

	docDiff, err := b.EncodeStateAsUpdate(sv)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(half, nil))
	require.NoError(t, d.ApplyUpdate(docDiff, nil))
	require.Equal(t, b.ToJSON(), d.ToJSON())
}

func TestStateVectorCodec(t *testing.T) {
	t.Parallel()
	sv := map[uint64]uint64{1: 10, 4294967295: 3, 7: 0}
	got, err := yjs.DecodeStateVector(yjs.EncodeStateVector(sv))
	require.NoError(t, err)
	require.Equal(t, sv, got)
	_, err = yjs.DecodeStateVector([]byte{5, 1})
	require.ErrorIs(t, err, yjs.ErrUnexpectedEOF)
}

func TestHostileUpdates(t *testing.T) {
	t.Parallel()
	src := yjs.NewDoc(yjs.WithClientID(9))
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 40; i++ {
		randomEdit(r, src)
	}
	src.GetMap("m").Set("nested", map[string]any{"a": []any{1, "b", map[string]any{"c": nil}}})
	good, err := src.EncodeStateAsUpdate(nil)
	require.NoError(t, err)

	// every truncation fails cleanly
	for i := 0; i < len(good)-1; i++ {
		d := yjs.NewDoc()
		err := d.ApplyUpdate(good[:i], nil)
		require.Error(t, err, "prefix %d", i)
		require.True(t, errors.Is(err, yjs.ErrUnexpectedEOF) || errors.Is(err, yjs.ErrMalformed), "%v", err)
		_, err = yjs.MergeUpdates([][]byte{good, good[:i]})
		require.Error(t, err)
		_, err = yjs.DiffUpdate(good[:i], nil)
		require.Error(t, err)
		_, err = yjs.EncodeStateVectorFromUpdate(good[:i])
		require.Error(t, err)
	}
	hostile := map[string][]byte{
		"huge client count":  {0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge struct count":  {1, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0},
		"huge string length": {1, 1, 1, 0, 4, 1, 1, 't', 0xff, 0xff, 0xff, 0x7f},
		"huge any array":     {1, 1, 1, 0, 8, 1, 1, 't', 1, 117, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"clock overflow":     {1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 5, 0},
		"zero length gc":     {1, 1, 1, 0, 0, 0, 0},
		"bad content ref":    {1, 1, 1, 0, 11, 1},
		"bad type ref":       {1, 1, 1, 0, 7, 1, 1, 't', 9, 0},
		"huge delete set":    {0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"forward origin":     {1, 1, 1, 0, 0x84, 1, 5, 1, 'a', 0},
		"forward parent":     {1, 1, 1, 0, 0x04, 0, 1, 3, 1, 'a', 0},
	}
	for name, u := range hostile {
		d := yjs.NewDoc()
		require.Error(t, d.ApplyUpdate(u, nil), name)
		_, err := yjs.MergeUpdates([][]byte{u, good})
		require.Error(t, err, name)
	}
	// random corruption never panics
	for i := 0; i < 2000; i++ {
		b := append([]byte(nil), good...)
		for k := 0; k < 1+r.IntN(4); k++ {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		d := yjs.NewDoc()
		_ = d.ApplyUpdate(b, nil)
		_, _ = d.EncodeStateAsUpdate(nil)
		_ = d.ToJSON()
		_, _ = yjs.MergeUpdates([][]byte{good, b})
		_, _ = yjs.DiffUpdate(b, src.EncodeStateVector())
	}
}

func TestTransactionChangesAndEvents(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	m := doc.GetMap("m")
	txt := doc.GetText("t")
	inner := yjs.NewMap()
	m.Set("inner", inner)

	var changed map[any][]any
	var types []any
	var local bool
	var origin any
	var txDelta []yjs.Delta
	var txKeys map[string]yjs.KeyChange
	doc.OnAfterTransaction(func(tx *yjs.Transaction) {
		changed, types, local, origin = tx.Changed(), tx.ChangedTypes(), tx.Local(), tx.Origin()
		txDelta, txKeys = tx.Delta(txt), tx.Keys(m)
	})
	var events []*yjs.Event
	unobserve := m.ObserveDeep(func(evs []*yjs.Event) { events = append(events, evs...) })
	var textDelta []yjs.Delta
	txt.Observe(func(e *yjs.Event) { textDelta = e.Delta() })

	doc.Transact(func(tx *yjs.Transaction) {
		m.Set("a", 1)
		inner.Set("x", "y")
		txt.Insert(0, "hi", nil)
	}, "me")
	require.True(t, local)
	require.Equal(t, "me", origin)
	require.Equal(t, []any{"a"}, changed[m])
	require.Equal(t, []any{"x"}, changed[inner])
	require.Equal(t, []any{nil}, changed[txt])
	require.ElementsMatch(t, []any{m, inner, txt}, types, "ChangedTypes: the keys of Changed")
	require.Equal(t, []yjs.Delta{{Insert: "hi"}}, textDelta)
	require.Equal(t, textDelta, txDelta)
	require.Equal(t, map[string]yjs.KeyChange{"a": {Action: "add"}}, txKeys)
	require.Len(t, events, 2)
	for _, e := range events {
		switch e.Target() {
		case m:
			require.Empty(t, e.Path())
			require.Equal(t, []string{"a"}, e.KeysChanged())
			require.Equal(t, "add", e.Keys()["a"].Action)
		case inner:
			require.Equal(t, []any{"inner"}, e.Path())
		default:
			t.Fatalf("unexpected target %T", e.Target())
		}
	}

	// remote changes report Local() == false and array deltas
	remote := yjs.NewDoc(yjs.WithClientID(2))
	u, _ := doc.EncodeStateAsUpdate(nil)
	require.NoError(t, remote.ApplyUpdate(u, nil))
	remote.GetText("t").Insert(1, "o", nil)
	u2, _ := remote.EncodeStateAsUpdate(doc.EncodeStateVector())
	require.NoError(t, doc.ApplyUpdate(u2, "net"))
	require.False(t, local)
	require.Equal(t, "net", origin)
	require.Equal(t, []yjs.Delta{{Retain: 1}, {Insert: "o"}}, textDelta)

	unobserve()
	events = nil
	m.Set("b", 2)
	require.Empty(t, events)

	arr := doc.GetArray("arr")
	arr.Push(1, 2, 3)
	var arrDelta []yjs.Delta
	arr.Observe(func(e *yjs.Event) { arrDelta = e.Delta() })
	doc.Transact(func(*yjs.Transaction) {
		arr.Delete(0, 1)
		arr.Insert(1, "x")
	}, nil)
	require.Equal(t, []yjs.Delta{{Delete: 1}, {Retain: 1}, {Insert: []any{"x"}}}, arrDelta)
}

func TestOnUpdateReproducesDocument(t *testing.T) {
	t.Parallel()
	src := yjs.NewDoc(yjs.WithClientID(11))
	dst := yjs.NewDoc()
	unsub := src.OnUpdate(func(u []byte, _ any) { require.NoError(t, dst.ApplyUpdate(u, nil)) })
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 100; i++ {
		randomEdit(r, src)
	}
	require.Equal(t, src.ToJSON(), dst.ToJSON())
	a, _ := src.EncodeStateAsUpdate(nil)
	b, _ := dst.EncodeStateAsUpdate(nil)
	require.Equal(t, a, b)
	unsub()
	src.GetMap("m").Set("after", true)
	require.NotEqual(t, src.ToJSON(), dst.ToJSON())
}

func TestXml(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	frag := doc.GetXmlFragment("x")
	el := yjs.NewXmlElement("P")
	el.SetAttribute("class", "c")
	el.Insert(0, yjs.NewXmlText("hello"))
	frag.Insert(0, el, yjs.NewXmlText("tail"))
	el.Get(0).(*yjs.XmlText).Format(0, 2, map[string]any{"b": map[string]any{}})
	require.Equal(t, `<p class="c"><b>he</b>llo</p>tail`, frag.String())
	u, _ := doc.EncodeStateAsUpdate(nil)
	other := yjs.NewDoc()
	require.NoError(t, other.ApplyUpdate(u, nil))
	require.Equal(t, frag.String(), other.GetXmlFragment("x").String())
	again, _ := other.EncodeStateAsUpdate(nil)
	require.Equal(t, u, again)
}

func TestSubdoc(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	sub := yjs.NewDoc(yjs.WithGUID("child"))
	doc.GetMap("m").Set("sub", sub)
	u, _ := doc.EncodeStateAsUpdate(nil)
	other := yjs.NewDoc()
	require.NoError(t, other.ApplyUpdate(u, nil))
	got, ok := other.GetMap("m").Get("sub")
	require.True(t, ok)
	require.Equal(t, "child", got.(*yjs.Doc).GUID())
	again, _ := other.EncodeStateAsUpdate(nil)
	require.Equal(t, u, again)
}

// TestDocsAreIndependent edits two documents from two goroutines; run with
// -race: documents must share no mutable state.
func TestDocsAreIndependent(t *testing.T) {
	t.Parallel()
	done := make(chan *yjs.Doc)
	for g := 0; g < 2; g++ {
		go func(g int) {
			d := yjs.NewDoc(yjs.WithClientID(uint64(g + 1)))
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 500; i++ {
				randomEdit(r, d)
			}
			done <- d
		}(g)
	}
	a, b := <-done, <-done
	syncDocs(t, a, b)
	require.Equal(t, a.ToJSON(), b.ToJSON())
}

func TestInvalidUTF8IsNeverWritten(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	doc.GetText("t").Insert(0, "a\xffb", nil)
	doc.GetMap("m").Set("k\xfe", []any{"v\xff", map[string]any{"x\xff": "y"}})
	u, err := doc.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	other := yjs.NewDoc()
	require.NoError(t, other.ApplyUpdate(u, nil), "the update must be valid UTF-8 throughout")
	require.Equal(t, "a\uFFFDb", other.GetText("t").String())
	require.Equal(t, doc.ToJSON(), other.ToJSON())
	require.Equal(t, []yjs.Delta{}, yjs.NewDoc().GetText("empty").ToDelta())
}

func TestPrelimReads(t *testing.T) {
	t.Parallel()
	txt := yjs.NewText("hello")
	txt.Insert(5, " world", map[string]any{"b": true})
	txt.Delete(0, 1)
	require.Equal(t, "ello world", txt.String())
	require.Equal(t, 10, txt.Len())
	require.Equal(t, []yjs.Delta{{Insert: "ello"}, {Insert: " world", Attributes: map[string]any{"b": true}}}, txt.ToDelta())

	m := yjs.NewMap()
	m.Set("a", 1)
	m.Set("b", txt)
	m.Delete("a")
	require.Equal(t, []string{"b"}, m.Keys())
	arr := yjs.NewArray()
	arr.Push(1, 2, 3)
	arr.Delete(0, 1)
	require.Equal(t, []any{2, 3}, arr.ToSlice())

	doc := yjs.NewDoc(yjs.WithClientID(1))
	doc.GetArray("a").Push(m, arr)
	require.Equal(t, []any{map[string]any{"b": "ello world"}, []any{int64(2), int64(3)}}, doc.GetArray("a").ToJSON())
	require.Equal(t, txt.ToDelta(), []yjs.Delta{{Insert: "ello"}, {Insert: " world", Attributes: map[string]any{"b": true}}})
}

func TestMapKeyChanges(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	m := doc.GetMap("m")
	m.Set("keep", 1)
	m.Set("gone", 2)
	var keys map[string]yjs.KeyChange
	m.Observe(func(e *yjs.Event) { keys = e.Keys() })
	doc.Transact(func(*yjs.Transaction) {
		m.Set("keep", 3)
		m.Delete("gone")
		m.Set("new", 4)
		m.Set("tmp", 5)
		m.Delete("tmp")
	}, nil)
	require.Equal(t, map[string]yjs.KeyChange{
		"keep": {Action: "update", OldValue: int64(1)},
		"gone": {Action: "delete", OldValue: int64(2)},
		"new":  {Action: "add"},
	}, keys)
}

func TestDeepObservePaths(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	root := doc.GetArray("root")
	inner := yjs.NewMap()
	list := yjs.NewArray()
	inner.Set("list", list)
	root.Push("x", inner)
	var paths [][]any
	root.ObserveDeep(func(evs []*yjs.Event) {
		for _, e := range evs {
			paths = append(paths, e.Path())
		}
	})
	list.Push(1)
	inner.Set("k", "v")
	root.Unshift("first")
	require.Equal(t, [][]any{{1, "list"}, {1}, {}}, paths)
}

func TestXmlElementAttributes(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	frag := doc.GetXmlFragment("x")
	el := yjs.NewXmlElement("div")
	el.SetAttribute("id", "a")
	frag.Push(el)
	el.SetAttribute("class", "b")
	el.RemoveAttribute("id")
	v, ok := el.GetAttribute("class")
	require.True(t, ok)
	require.Equal(t, "b", v)
	el.Push(yjs.NewXmlElement("span"), yjs.NewXmlText("t"))
	el.Delete(0, 1)
	require.Equal(t, `<div class="b">t</div>`, frag.String())
	require.Equal(t, map[string]any{"x": `<div class="b">t</div>`}, doc.ToJSON())
	require.Equal(t, "div", el.NodeName())
	require.Equal(t, 1, el.Len())
}

func TestMarshalJSON(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	m := doc.GetMap("m")
	m.Set("n", 1)
	m.Set("t", yjs.NewText("hi"))
	m.Set("a", []any{true, nil})
	doc.GetText("t").InsertEmbed(0, yjs.NewMap(), nil)
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"m":{"n":1,"t":"hi","a":[true,null]},"t":""}`, string(b))
	b, err = json.Marshal(doc.GetText("t").ToDelta())
	require.NoError(t, err)
	require.JSONEq(t, `[{"insert":{}}]`, string(b))
}

func TestApplyDelta(t *testing.T) {
	t.Parallel()
	src := yjs.NewDoc(yjs.WithClientID(1))
	a := src.GetText("a")
	a.Insert(0, "Hello world", nil)
	a.Format(0, 5, map[string]any{"bold": true})
	a.InsertEmbed(6, map[string]any{"img": "x"}, map[string]any{"alt": "y"})

	dst := yjs.NewDoc(yjs.WithClientID(2))
	b := dst.GetText("b")
	b.ApplyDelta(a.ToDelta())
	require.Equal(t, a.ToDelta(), b.ToDelta())

	b.ApplyDelta([]yjs.Delta{{Retain: 6}, {Delete: 1}, {Retain: 5, Attributes: map[string]any{"italic": true}}, {Insert: "!"}})
	require.Equal(t, []yjs.Delta{
		{Insert: "Hello", Attributes: map[string]any{"bold": true}},
		{Insert: " "},
		{Insert: "world", Attributes: map[string]any{"italic": true}},
		{Insert: "!"},
	}, b.ToDelta())
}

func TestMarshalDropsUndefined(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	doc.GetMap("m").Set("u", yjs.Undefined)
	doc.GetMap("m").Set("list", []any{yjs.Undefined, map[string]any{"x": yjs.Undefined}})
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"m":{"list":[null,{}]}}`, string(b))
}

func TestToJSONNonFinite(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	m := doc.GetMap("m")
	m.Set("nan", math.NaN())
	m.Set("list", []any{math.Inf(1), 1.5})
	v, _ := m.Get("nan")
	require.True(t, math.IsNaN(v.(float64)), "Get keeps the value")
	require.Equal(t, map[string]any{"nan": nil, "list": []any{nil, 1.5}}, m.ToJSON())
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"m":{"nan":null,"list":[null,1.5]}}`, string(b))
}

// TestManyConcurrentInserts integrates thousands of concurrent inserts at
// one position; conflict resolution must stay fast and order-independent.
func TestManyConcurrentInserts(t *testing.T) {
	t.Parallel()
	base := yjs.NewDoc(yjs.WithClientID(1))
	base.GetText("t").Insert(0, "ab", nil)
	baseU, _ := base.EncodeStateAsUpdate(nil)
	var updates [][]byte
	for i := 0; i < 2000; i++ {
		d := yjs.NewDoc(yjs.WithClientID(uint64(10 + i)))
		require.NoError(t, d.ApplyUpdate(baseU, nil))
		d.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
		d.GetText("t").Insert(1, "x", nil)
	}
	var want string
	for seed := uint64(0); seed < 2; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		d := yjs.NewDoc()
		require.NoError(t, d.ApplyUpdate(baseU, nil))
		for _, i := range r.Perm(len(updates)) {
			require.NoError(t, d.ApplyUpdate(updates[i], nil))
		}
		got := d.GetText("t").String()
		if want == "" {
			want = got
		}
		require.Equal(t, want, got)
	}
	require.Len(t, want, 2002)
}

func TestXmlHook(t *testing.T) {
	t.Parallel()
	doc := yjs.NewDoc(yjs.WithClientID(1))
	h := yjs.NewXmlHook("embed")
	h.Set("src", "x.png")
	doc.GetXmlFragment("x").Push(h)
	u, _ := doc.EncodeStateAsUpdate(nil)
	other := yjs.NewDoc()
	require.NoError(t, other.ApplyUpdate(u, nil))
	got := other.GetXmlFragment("x").Get(0).(*yjs.XmlHook)
	require.Equal(t, "embed", got.HookName())
	v, _ := got.Get("src")
	require.Equal(t, "x.png", v)
	again, _ := other.EncodeStateAsUpdate(nil)
	require.Equal(t, u, again)
}
