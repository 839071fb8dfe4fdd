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
	picked := func(root string) bool { return root == "drop" || root == "meta" }
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
