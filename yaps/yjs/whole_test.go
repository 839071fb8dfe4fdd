package yjs_test

import (
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// copyDoc returns a new document holding d's state (and nothing pending).
func copyDoc(t *testing.T, d *yjs.Doc) *yjs.Doc {
	t.Helper()
	u, err := d.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	c := yjs.NewDoc(yjs.WithClientID(999))
	require.NoError(t, c.ApplyUpdate(u, nil))
	return c
}

// ApplyUpdateWhole applies exactly the updates ApplyUpdate would integrate
// with nothing left pending, and leaves the document untouched otherwise.
// Three clients edit and sync now and then, so their updates depend on
// each other's; a fourth document receives all of them in a random order,
// each offered until it applies whole.
func TestApplyUpdateWhole(t *testing.T) {
	t.Parallel()
	refused := 0
	for seed := uint64(0); seed < 16; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		docs := []*yjs.Doc{yjs.NewDoc(yjs.WithClientID(1)), yjs.NewDoc(yjs.WithClientID(2)), yjs.NewDoc(yjs.WithClientID(3))}
		var updates [][]byte
		for _, d := range docs {
			d.OnUpdate(func(u []byte, origin any) {
				if origin == nil { // local edits only, not syncs
					updates = append(updates, u)
				}
			})
		}
		for round := 0; round < 15; round++ {
			for _, d := range docs {
				for k := 0; k < 1+r.IntN(3); k++ {
					randomEdit(r, d)
				}
			}
			if r.IntN(2) == 0 {
				syncDocs(t, docs[r.IntN(3)], docs[r.IntN(3)])
			}
			if r.IntN(3) == 0 { // a multi-client update too, whole or a diff
				var sv []byte
				if r.IntN(2) == 0 {
					sv = docs[r.IntN(3)].EncodeStateVector()
				}
				u, err := docs[r.IntN(3)].EncodeStateAsUpdate(sv)
				require.NoError(t, err)
				updates = append(updates, u)
			}
		}
		syncDocs(t, docs...)

		dst := yjs.NewDoc(yjs.WithClientID(4))
		queue := append([][]byte(nil), updates...)
		for len(queue) > 0 {
			i := r.IntN(len(queue))
			u := queue[i]
			before, err := dst.EncodeStateAsUpdate(nil)
			require.NoError(t, err)
			ref := copyDoc(t, dst)
			require.NoError(t, ref.ApplyUpdate(u, nil))
			s, ds := ref.Pending()
			wholeInRef := len(s) == 0 && len(ds) == 0

			applied, err := dst.ApplyUpdateWhole(u, nil)
			require.NoError(t, err)
			require.Equal(t, wholeInRef, applied, "seed %d: ApplyUpdate left pending %d/%d bytes", seed, len(s), len(ds))
			if !applied {
				refused++
				after, err := dst.EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				require.Equal(t, before, after, "a refused update changes nothing")
				s, ds := dst.Pending()
				require.Empty(t, s)
				require.Empty(t, ds)
				continue
			}
			queue = append(queue[:i], queue[i+1:]...)
		}
		dst.GetText("t") // roots the updates left empty
		dst.GetArray("a")
		dst.GetMap("m")
		require.Equal(t, docs[0].ToJSON(), dst.ToJSON(), "seed %d", seed)
		require.Equal(t, docs[0].StateVector(), dst.StateVector(), "seed %d", seed)
	}
	require.Positive(t, refused, "some updates arrived before what they depend on")
}

// The shapes that make an update wait, one by one.
func TestApplyUpdateWholeRefuses(t *testing.T) {
	t.Parallel()
	a := yjs.NewDoc(yjs.WithClientID(1))
	var ua [][]byte
	a.OnUpdate(func(u []byte, _ any) { ua = append(ua, u) })
	txt := a.GetText("t")
	txt.Insert(0, "abc", nil)   // ua[0]
	txt.Insert(3, "def", nil)   // ua[1]: same client, next clocks
	txt.Delete(1, 1)            // ua[2]: deletes only
	a.GetMap("m").Set("k", "v") // ua[3]
	b := copyDoc(t, a)          // client 999 knows all of a
	var ub [][]byte
	b.OnUpdate(func(u []byte, _ any) { ub = append(ub, u) })
	b.GetText("t").Insert(3, "X", nil) // ub[0]: "acd|ef", between ua[1]'s structs
	nested := yjs.NewMap()
	b.GetMap("m").Set("n", nested)
	nested.Set("inner", 1) // ub[2]: parent is a struct of b (same client)

	for _, tc := range []struct {
		name   string
		first  [][]byte // applied to the receiver before
		update []byte
		whole  bool
	}{
		{"first update", nil, ua[0], true},
		{"a gap in its own clocks", nil, ua[1], false},
		{"in order", [][]byte{ua[0]}, ua[1], true},
		{"a delete of unknown content", nil, ua[2], false},
		{"a delete of known content", [][]byte{ua[0], ua[1]}, ua[2], true},
		{"a duplicate", [][]byte{ua[0]}, ua[0], true},
		{"origins in another client's missing structs", [][]byte{ua[0]}, ub[0], false},
		{"origins known", [][]byte{ua[0], ua[1], ua[2], ua[3]}, ub[0], true},
		{"its dependencies in the same update", nil, mustMerge(t, ua[0], ua[1], ua[2], ua[3], ub[0]), true},
		{"dependencies partly in the same update", nil, mustMerge(t, ua[1], ub[0]), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := yjs.NewDoc(yjs.WithClientID(5))
			for _, u := range tc.first {
				require.NoError(t, d.ApplyUpdate(u, nil))
			}
			sv := d.StateVector()
			applied, err := d.ApplyUpdateWhole(tc.update, nil)
			require.NoError(t, err)
			require.Equal(t, tc.whole, applied)
			if !applied {
				require.Equal(t, sv, d.StateVector())
			}
			s, ds := d.Pending()
			require.Empty(t, s)
			require.Empty(t, ds)
		})
	}

	applied, err := yjs.NewDoc().ApplyUpdateWhole([]byte{1, 2, 3}, nil)
	require.Error(t, err, "malformed")
	require.False(t, applied)
}

func mustMerge(t *testing.T, ups ...[]byte) []byte {
	t.Helper()
	m, err := yjs.MergeUpdates(ups)
	require.NoError(t, err)
	return m
}

// One keystroke at a time applied to a document, by ApplyUpdate and by
// ApplyUpdateWhole, which first checks that it integrates whole.
func BenchmarkApplyKeystroke(b *testing.B) {
	src := yjs.NewDoc(yjs.WithClientID(1))
	txt := src.GetText("t")
	var ups [][]byte
	src.OnUpdate(func(u []byte, _ any) { ups = append(ups, u) })
	for i := range 200 {
		txt.Insert(i, "x", nil)
	}
	for _, whole := range []bool{false, true} {
		b.Run(map[bool]string{false: "ApplyUpdate", true: "ApplyUpdateWhole"}[whole], func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				d := yjs.NewDoc(yjs.WithClientID(2))
				b.StartTimer()
				for _, u := range ups {
					if whole {
						if ok, err := d.ApplyUpdateWhole(u, nil); !ok || err != nil {
							b.Fatal(ok, err)
						}
					} else if err := d.ApplyUpdate(u, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestKnownStructOriginsSplit: the origins of structs a document already
// has are resolved as Yjs resolves them, so a gc:false document cuts the
// deleted "😀" they point into (two U+FFFD) and encodes Yjs's bytes. The
// states are Y.encodeStateAsUpdate of two yjs 13.6 replicas: p1 (gc:false)
// deleted a synced "😀" and typed a new one while p0 deleted its first half
// (found by a differential review against yjs).
func TestKnownStructOriginsSplit(t *testing.T) {
	t.Parallel()
	hx := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	d := yjs.NewDoc(yjs.WithGC(false), yjs.WithClientID(99))
	require.NoError(t, d.ApplyUpdate(hx("0201020084010104f09f98800101000401017404f09f98800101010002"), nil))
	require.NoError(t, d.ApplyUpdate(hx("01020100010101740184010003efbfbd0101010001"), nil))
	got, err := d.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	require.Equal(t, "0201020084010104f09f98800101000401017406efbfbdefbfbd0101010002", hex.EncodeToString(got), "Y.encodeStateAsUpdate after the same two updates")
	require.Equal(t, "😀", d.GetText("t").String())
}

// A decoded update (DecodeUpdate) applies as its bytes do: kept while it
// is refused, decoded again once a document integrated it, and its Ends
// are ParseUpdateMeta's end clocks.
func TestApplyWhole(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 9))
	docs := []*yjs.Doc{yjs.NewDoc(yjs.WithClientID(1)), yjs.NewDoc(yjs.WithClientID(2))}
	var updates []*yjs.Update
	for _, d := range docs {
		d.OnUpdate(func(u []byte, origin any) {
			if origin == nil {
				updates = append(updates, yjs.DecodeUpdate(u))
			}
		})
	}
	for range 20 {
		for _, d := range docs {
			randomEdit(r, d)
		}
		if r.IntN(2) == 0 {
			syncDocs(t, docs...)
		}
	}
	syncDocs(t, docs...)

	for _, u := range updates {
		require.NoError(t, u.Err())
		_, to, err := yjs.ParseUpdateMeta(u.Bytes())
		require.NoError(t, err)
		ends := map[uint64]uint64{}
		for _, c := range u.Ends() {
			ends[c.Client] = c.Clock
		}
		require.Equal(t, to, ends)
	}
	// In reverse order, so most are refused at first and tried again.
	dst, again := yjs.NewDoc(yjs.WithClientID(4)), yjs.NewDoc(yjs.WithClientID(5))
	queue := slices.Clone(updates)
	slices.Reverse(queue)
	refused := 0
	for len(queue) > 0 {
		var rest []*yjs.Update
		for _, u := range queue {
			applied, err := dst.ApplyWhole(u, nil)
			require.NoError(t, err)
			if !applied {
				refused++
				rest = append(rest, u)
			}
		}
		require.Less(t, len(rest), len(queue), "no update applied in a round")
		queue = rest
	}
	require.Positive(t, refused)
	for i, u := range updates { // applied once already: decoded again
		if i%2 == 0 { // or released before it was applied: decoded again too
			u = yjs.DecodeUpdate(u.Bytes())
			u.Release()
		}
		applied, err := again.ApplyWhole(u, nil)
		require.NoError(t, err)
		require.True(t, applied)
	}
	for _, d := range []*yjs.Doc{dst, again} {
		d.GetText("t")
		d.GetArray("a")
		d.GetMap("m")
		require.Equal(t, docs[0].ToJSON(), d.ToJSON())
	}

	bad := yjs.DecodeUpdate([]byte{1, 2})
	require.Error(t, bad.Err())
	bad.Release() // keeps the error
	require.Empty(t, bad.Ends())
	_, err := dst.ApplyWhole(bad, nil)
	require.ErrorIs(t, err, bad.Err())
}
