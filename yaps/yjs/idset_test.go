package yjs

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A server-side compensation as the yaps service does it for an agent: a
// peer's update changes several roots; the server finds what the update
// inserted under the roots "drop" and "meta" (nested content included)
// and whether it deleted anything there that existed before, then deletes
// exactly those insertions, even after a third client split them, and the
// peer converges on the result.
func TestInsertedUnderAndDeleteIDs(t *testing.T) {
	t.Parallel()
	picked := func(root, _ string) bool { return root == "drop" || root == "meta" }
	inner := func(d *Doc) *Map { m, _ := d.GetMap("meta").Get("m"); return m.(*Map) }
	for _, tc := range []struct {
		name        string
		edit        func(d *Doc)
		wantDeleted bool         // the edit deleted earlier content under a picked root
		split       func(d *Doc) // a third client's edit before the compensation
		want        string       // drop, keep and meta after the compensation
	}{
		{"inserts only", func(d *Doc) {
			d.GetText("drop").Insert(4, "abc", nil)
			d.GetMap("meta").Set("n", NewText("new"))
			d.GetText("keep").Insert(0, "+", nil)
		}, false, nil, "base +k map[m:map[k:1]]"},
		{"inserts split by another client", func(d *Doc) {
			d.GetText("drop").Insert(4, "abc", nil)
		}, false, func(d *Doc) { d.GetText("drop").Insert(5, "!", nil) }, "base! k map[m:map[k:1]]"},
		{"own insert trimmed", func(d *Doc) {
			d.GetText("drop").Insert(0, "xyz", nil)
			d.GetText("drop").Delete(0, 1)
		}, false, nil, "base k map[m:map[k:1]]"},
		{"key added to a nested map", func(d *Doc) { inner(d).Set("j", 3.0) }, false, nil, "base k map[m:map[k:1]]"},
		{"earlier text deleted", func(d *Doc) {
			d.GetText("drop").Delete(0, 2)
			d.GetText("drop").Insert(0, "q", nil)
		}, true, nil, ""},
		{"nested value overwritten", func(d *Doc) { inner(d).Set("k", 2.0) }, true, nil, ""},
		{"nested map removed", func(d *Doc) { d.GetMap("meta").Delete("m") }, true, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			server, peer, other := NewDoc(WithClientID(1)), NewDoc(WithClientID(2)), NewDoc(WithClientID(3))
			sync := func(from, to *Doc) {
				t.Helper()
				u, err := from.EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				require.NoError(t, to.ApplyUpdate(u, nil))
			}
			server.Transact(func(*Transaction) {
				server.GetText("drop").Insert(0, "base", nil)
				server.GetText("keep").Insert(0, "k", nil)
				m := NewMap()
				server.GetMap("meta").Set("m", m)
				m.Set("k", 1.0)
			}, nil)
			sync(server, peer)

			var up []byte
			unU := peer.OnUpdate(func(b []byte, _ any) { up = b })
			peer.Transact(func(*Transaction) { tc.edit(peer) }, nil)
			unU()
			var ins IDSet
			deleted := false
			unA := server.OnAfterTransaction(func(tx *Transaction) {
				ins = tx.InsertedUnder(picked)
				deleted = tx.DeletedUnder(picked)
			})
			require.NoError(t, server.ApplyUpdate(up, "peer"))
			unA()
			require.Equal(t, tc.wantDeleted, deleted)
			if deleted {
				return
			}
			require.False(t, ins.Empty())
			if tc.split != nil {
				sync(server, other)
				tc.split(other)
				sync(other, server)
			}
			server.DeleteIDs(ins, nil)
			state := func(d *Doc) string {
				return fmt.Sprint(d.GetText("drop").String(), " ", d.GetText("keep").String(), " ", d.GetMap("meta").ToJSON())
			}
			require.Equal(t, tc.want, state(server))
			sync(server, peer)
			require.Equal(t, tc.want, state(peer))
		})
	}
}

// pick sees the key of the root map's entry a struct lies under, so a
// caller can take back what an update did to one entry (a yap) and keep
// what it did to the others, formatting and embeds included.
func TestInsertedUnderEntry(t *testing.T) {
	t.Parallel()
	server, peer := NewDoc(WithClientID(1)), NewDoc(WithClientID(2))
	sync := func(from, to *Doc) {
		t.Helper()
		u, err := from.EncodeStateAsUpdate(to.EncodeStateVector())
		require.NoError(t, err)
		require.NoError(t, to.ApplyUpdate(u, nil))
	}
	server.Transact(func(*Transaction) {
		for _, k := range []string{"a", "b"} {
			m := NewMap()
			server.GetMap("yaps").Set(k, m)
			m.Set("body", NewText("text "+k))
		}
	}, nil)
	sync(server, peer)
	body := func(d *Doc, k string) *Text {
		m, _ := d.GetMap("yaps").Get(k)
		b, _ := m.(*Map).Get("body")
		return b.(*Text)
	}
	onlyB := func(root, key string) bool { return root == "yaps" && key == "b" }
	apply := func(edit func()) (ins IDSet, deleted bool) {
		t.Helper()
		var up []byte
		unU := peer.OnUpdate(func(b []byte, _ any) { up = b })
		peer.Transact(func(*Transaction) { edit() }, nil)
		unU()
		first := true // not the clean-up a formatted text's update runs after it
		unA := server.OnAfterTransaction(func(tx *Transaction) {
			if first {
				ins, deleted, first = tx.InsertedUnder(onlyB), tx.DeletedUnder(onlyB), false
			}
		})
		require.NoError(t, server.ApplyUpdate(up, "peer"))
		unA()
		return ins, deleted
	}

	ins, deleted := apply(func() {
		body(peer, "a").Insert(0, "A:", nil)
		body(peer, "b").Format(0, 4, map[string]any{"link": "https://x.example"})
		body(peer, "b").InsertEmbed(2, map[string]any{"image": "x.png"}, nil)
		m, _ := peer.GetMap("yaps").Get("b")
		m.(*Map).Set("extra", "x")
	})
	require.False(t, deleted)
	server.DeleteIDs(ins, nil)
	require.Equal(t, "A:text a", body(server, "a").String())
	require.Equal(t, []Delta{{Insert: "text b"}}, body(server, "b").ToDelta())
	m, _ := server.GetMap("yaps").Get("b")
	_, extra := m.(*Map).Get("extra")
	require.False(t, extra)
	sync(server, peer)

	_, deleted = apply(func() { body(peer, "a").Delete(0, 1) })
	require.False(t, deleted, "a deletion under another entry")
	_, deleted = apply(func() { body(peer, "b").Delete(0, 1) })
	require.True(t, deleted)
}

// Finding where structs lie walks each parent once, however deep the types
// nest: a hostile update of 80,000 nested maps stalled its list for
// minutes while its places were found one walk to the root per struct.
func TestPlacesLinearInDepth(t *testing.T) {
	t.Parallel()
	const depth = 2_000
	d := NewDoc(WithClientID(7))
	d.Transact(func(*Transaction) {
		m := NewMap()
		d.GetMap("yaps").Set("deep", m)
		for range depth {
			next := NewMap()
			m.Set("v", "x")
			m.Set("m", next)
			m = next
		}
		d.GetMap("yaps").Set("flat", "y")
		d.GetArray("other").Push([]any{"z"})
	}, nil)
	places, steps := PlaceAll(d)
	require.Equal(t, map[[2]string]int{{"yaps", "deep"}: 2*depth + 1, {"yaps", "flat"}: 1, {"other", ""}: 1}, places)
	require.LessOrEqual(t, steps, depth+1)
}
