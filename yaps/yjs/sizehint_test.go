package yjs

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestEncodeSizeHints: the buffers a transaction's update and a full
// state are encoded into are sized up front by bounds that hold for the
// content yaps writes (maps of strings, numbers and arrays, texts,
// deletions), so encoding never grows them.
func TestEncodeSizeHints(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	word := func() string {
		return strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(40)) + "é😀"[:r.IntN(7)/3*3]
	}
	// Clients with large ids, as Yjs picks them (random 32 bits).
	a := NewDoc(WithClientID(uint64(r.Uint32())))
	b := NewDoc(WithClientID(uint64(r.Uint32())))
	var updates int
	check := func(d *Doc) {
		d.OnUpdate(func(u []byte, _ any) { updates++ })
	}
	check(a)
	for i := range 300 {
		d := a
		if i%3 == 0 {
			d = b
		}
		var tx *Transaction
		d.Transact(func(t *Transaction) {
			tx = t
			m := d.GetMap("yaps")
			switch r.IntN(6) {
			case 0: // a new yap: a nested map with a text
				y := NewMap()
				m.Set(word(), y)
				y.Set("kind", "task")
				y.Set("status", word())
				y.Set("priority", r.IntN(1<<40))
				y.Set("tags", []any{word(), word(), 3.25, true, nil, map[string]any{"k": word()}})
				y.Set("names", []string{word(), word()})
				txt := NewText("")
				y.Set("content", txt)
				txt.Insert(0, word()+word(), nil)
			case 1:
				m.Set(word(), []byte(word()))
			case 2:
				for _, k := range m.Keys() {
					if r.IntN(4) == 0 {
						m.Delete(k)
					}
				}
			case 3:
				txt := d.GetText("t")
				txt.Insert(r.IntN(txt.Len()+1), word(), nil)
			case 4:
				txt := d.GetText("t")
				if n := txt.Len(); n > 2 {
					at := r.IntN(n - 1)
					txt.Delete(at, min(n-at, 1+r.IntN(5)))
				}
			default:
				d.GetArray("arr").Insert(0, []any{word(), int64(r.Int()), map[string]any{"x": []any{word()}}})
			}
		}, nil)
		if !tx.HasChanges() {
			continue
		}
		tx.deleteSet.sortAndMerge()
		var e encoder
		d.writeTouchedStructs(&e, tx)
		hinted := cap(e.buf)
		tx.deleteSet.write(&e)
		require.LessOrEqual(t, len(e.buf), hinted, "transaction %d: update outgrew its hint", i)
		require.Equal(t, hinted, cap(e.buf), "transaction %d: the buffer was reallocated", i)
		if i%50 == 49 { // exchange, so each doc also holds the other's structs
			u, err := a.EncodeStateAsUpdate(b.EncodeStateVector())
			require.NoError(t, err)
			require.NoError(t, b.ApplyUpdate(u, nil))
			u, err = b.EncodeStateAsUpdate(a.EncodeStateVector())
			require.NoError(t, err)
			require.NoError(t, a.ApplyUpdate(u, nil))
		}
	}
	require.Positive(t, updates)
	for _, d := range []*Doc{a, b} {
		full, err := d.EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		hint := d.encodedSizeHint(nil)
		require.LessOrEqual(t, len(full), hint, "full state outgrew its hint")
		require.Equal(t, hint, cap(full), "the full state's buffer was reallocated")
		// The bound is not wasteful either: within 3× of the real size.
		require.Less(t, hint, 3*len(full))
	}

	// A diff's hint bounds its structs: a state vector missing the last
	// transactions of each client.
	sv := map[uint64]int{}
	for c, cs := range a.store.clients {
		sv[c] = max(cs.state()-40, 0)
	}
	var e encoder
	a.writeClientsStructs(&e, sv)
	require.LessOrEqual(t, len(e.buf), a.encodedSizeHint(sv))
	require.Less(t, a.encodedSizeHint(sv), a.encodedSizeHint(nil)/2, "a diff's hint walks only what the diff holds")
	all := map[uint64]int{}
	for c, cs := range a.store.clients {
		all[c] = cs.state()
	}
	require.Equal(t, 16, a.encodedSizeHint(all), "nothing missing: no struct walked")
}

// After the first full encoding, the next ones size their buffer from the
// last one's size (fullSizeEstimate) instead of walking the document: the
// estimate follows the document's growth, so the buffer is grown rarely
// and never far oversized.
func TestFullEncodingEstimate(t *testing.T) {
	t.Parallel()
	d := NewDoc(WithClientID(1))
	m := d.GetMap("yaps")
	add := func(n int) {
		for i := range n {
			d.Transact(func(*Transaction) {
				y := NewMap()
				m.Set(strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("x", i%7), y)
				y.Set("kind", "task")
				y.Set("status", "open")
				txt := NewText("")
				y.Set("content", txt)
				txt.Insert(0, "buy milk and bread", nil)
			}, nil)
		}
	}
	add(50)
	first, err := d.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	require.Equal(t, len(first), d.lastFullSize)
	require.Equal(t, d.StructCount(), d.lastFullStructs)
	for range 3 {
		add(200) // five times the structs
		est := d.fullSizeEstimate(d.StructCount())
		full, err := d.EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		require.LessOrEqual(t, len(full), est, "a document of like yaps outgrew the estimate")
		require.Less(t, est, 2*len(full), "the estimate is not far oversized (the exact bound: up to 3×)")
		require.Equal(t, est, cap(full), "the buffer was sized by the estimate")
		// The same bytes as with the exact bound.
		e := encoder{buf: make([]byte, 0, d.encodedSizeHint(nil))}
		d.writeClientsStructs(&e, nil)
		ds := d.deleteSetFromStore()
		ds.write(&e)
		require.Equal(t, e.buf, full)
	}
}

// What a list document holds most of stays small: a map value (kindAny,
// one value) and a shared type's content (kindType) keep their ext to
// vals, raw and typ, the rarer kinds' fields behind contentMore; a shared
// type keeps its prelim content behind typePrelim. Live bytes per created
// task in a list (runtime.MemStats): 4,027 before both, 3,467 with the
// first, 3,277 with both.
func TestDocStructSizes(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, unsafe.Sizeof(contentExt{}), uintptr(64))
	require.LessOrEqual(t, unsafe.Sizeof(anyExt{}), uintptr(80))
	require.LessOrEqual(t, unsafe.Sizeof(Map{}), uintptr(208))
	require.LessOrEqual(t, unsafe.Sizeof(Text{}), uintptr(208))
	x := newAnyExt("open")
	require.Nil(t, x.contentMore, "a map value allocates no contentMore")
	require.Equal(t, []any{"open"}, x.vals)

	// A prelim type's content lives until it is integrated, then goes.
	d := NewDoc()
	m := NewMap()
	m.Set("kind", "task")
	require.NotNil(t, m.prelim)
	require.Equal(t, 1, m.Len())
	d.GetMap("yaps").Set("y1", m)
	require.Nil(t, m.prelim, "integrated: the prelim content is dropped")
	v, ok := m.Get("kind")
	require.True(t, ok)
	require.Equal(t, "task", v)
	require.Equal(t, 1, m.Len())
}
