package yaps

import (
	"math/rand"
	"strings"
	"testing"

	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// applyTextEdits applies edits (sorted, from diffText) to old in UTF-16
// code units, checking that they are ordered, in range, and that no edit
// boundary splits a surrogate pair in the old or the new text.
func applyTextEdits(t *testing.T, old string, edits []textEdit) string {
	t.Helper()
	a := utf16Units(old)
	out := make([]uint16, 0, len(a))
	at := 0
	var bounds []int // edit boundaries in the new text
	for i, e := range edits {
		require.GreaterOrEqual(t, e.Index, at, "edit %d out of order", i)
		require.LessOrEqual(t, e.Index+e.Delete, len(a), "edit %d out of range", i)
		require.False(t, e.Delete == 0 && e.Insert == "", "empty edit %d", i)
		require.False(t, splitsPair(a, e.Index), "edit %d starts inside a pair", i)
		require.False(t, splitsPair(a, e.Index+e.Delete), "edit %d ends inside a pair", i)
		out = append(out, a[at:e.Index]...)
		bounds = append(bounds, len(out))
		out = append(out, utf16Units(e.Insert)...)
		bounds = append(bounds, len(out))
		at = e.Index + e.Delete
	}
	out = append(out, a[at:]...)
	for _, p := range bounds {
		require.False(t, splitsPair(out, p), "an insertion boundary splits a pair")
	}
	return string(utf16.Decode(out))
}

// editUnits is the number of UTF-16 code units the edits delete and insert.
func editUnits(edits []textEdit) int {
	n := 0
	for _, e := range edits {
		n += e.Delete + len(utf16Units(e.Insert))
	}
	return n
}

// minEditUnits is the fewest deleted plus inserted UTF-16 code units that
// turn old into new without splitting a surrogate pair: a classic O(NM)
// LCS over characters, each weighted by its UTF-16 length.
func minEditUnits(old, new string) int {
	a, b := []rune(old), []rune(new)
	w := func(r rune) int { return utf16.RuneLen(r) }
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cur[j] = max(prev[j], cur[j-1])
			if a[i-1] == b[j-1] {
				cur[j] = max(cur[j], prev[j-1]+w(a[i-1]))
			}
		}
		prev, cur = cur, prev
	}
	return len(utf16Units(old)) + len(utf16Units(new)) - 2*prev[len(b)]
}

func TestDiffText(t *testing.T) {
	t.Parallel()
	// 😀 U+1F600 = D83D DE00, 😁 U+1F601 = D83D DE01 (same high surrogate),
	// 𐐀 U+10400 = D801 DC00, 🐀 U+1F400 = D83D DC00 (same low surrogate).
	type E = textEdit
	cases := []struct {
		name     string
		old, new string
		// want nil: the edits are not checked (only that they are
		// minimal and give new), unless old == new; cost 0 with old !=
		// new: the cost is not checked either.
		want []E
		cost int
	}{
		{"both empty", "", "", nil, 0},
		{"equal", "abc", "abc", nil, 0},
		{"from empty", "", "abc", []E{{0, 0, "abc"}}, 3},
		{"to empty", "abc", "", []E{{0, 3, ""}}, 3},
		{"insert only", "hello world", "hello brave world", []E{{6, 0, "brave "}}, 6},
		{"delete only", "hello brave world", "hello world", []E{{6, 6, ""}}, 6},
		{"replace", "abcdef", "abXYef", []E{{2, 2, "XY"}}, 4},
		{"two inserts", "abcdefghij", "ab-cdefghij!", []E{{2, 0, "-"}, {10, 0, "!"}}, 2},
		{"two replacements", "abcdefghij", "aXcdefghiY", []E{{1, 1, "X"}, {9, 1, "Y"}}, 4},
		{"insert and delete", "the quick brown fox", "the brown fox!", []E{{4, 6, ""}, {19, 0, "!"}}, 7},
		{"three changes", "one two three four", "one 2 three 4 five", nil, 0},
		{"emoji at start", "😀abc", "abc", []E{{0, 2, ""}}, 2},
		{"emoji inserted at start", "abc", "😀abc", []E{{0, 0, "😀"}}, 2},
		{"emoji at end", "abc😀", "abc", []E{{3, 2, ""}}, 2},
		{"emoji inserted at end", "abc", "abc😀", []E{{3, 0, "😀"}}, 2},
		{"emoji in middle", "a😀b", "ab", []E{{1, 2, ""}}, 2},
		{"emoji replaced, shared high surrogate", "x😀y", "x😁y", []E{{1, 2, "😁"}}, 4},
		{"emoji replaced, shared low surrogate", "x𐐀y", "x🐀y", []E{{1, 2, "🐀"}}, 4},
		{"only emoji, shared high surrogate", "😀", "😁", []E{{0, 2, "😁"}}, 4},
		{"emoji doubled", "😀", "😀😀", []E{{2, 0, "😀"}}, 2},
		{"emoji halved", "😀😀", "😀", []E{{2, 2, ""}}, 2},
		{"text between emoji", "😀a😀", "😀b😀", []E{{2, 1, "b"}}, 2},
		{"emoji around both changes", "😀ab😀cd😀", "😀xb😀cy😀", []E{{2, 1, "x"}, {7, 1, "y"}}, 4},
		{"emoji swapped", "a😀b😁c", "a😁b😀c", nil, 6},
		{"emoji run grows in middle", "a😀😀b😁", "a😀😀😀b😁", nil, 2},
		{"emoji next to both changes", "😁x😀y😁", "😁😀x😀😀y😁", nil, 4},
		{"combining mark changed", "e\u0301", "e\u0300", []E{{1, 1, "\u0300"}}, 2},
		{"combining mark added", "cafe", "cafe\u0301", []E{{4, 0, "\u0301"}}, 1},
		{"decomposed to precomposed", "cafe\u0301!", "café!", []E{{3, 2, "é"}}, 3},
		{"combining marks and emoji", "a\u0308😀o\u0308", "a\u0308😁o\u0308x", []E{{2, 2, "😁"}, {6, 0, "x"}}, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := diffText(c.old, c.new)
			if c.want != nil || c.cost == 0 && c.old == c.new {
				require.Equal(t, c.want, got)
			}
			require.Equal(t, c.new, applyTextEdits(t, c.old, got))
			min := minEditUnits(c.old, c.new)
			if c.cost != 0 || c.old == c.new {
				require.Equal(t, c.cost, min, "case's cost")
			}
			require.Equal(t, min, editUnits(got))
		})
	}
}

func TestDiffTextRandom(t *testing.T) {
	t.Parallel()
	alphabets := [][]rune{
		[]rune("ab😀"),
		[]rune("ab😀😁"),      // astral runes sharing the high surrogate
		[]rune("a😀𐐀🐀"),      // and sharing the low surrogate
		[]rune("abc\u0301"), // a combining mark
		[]rune("😀😁"),
		[]rune("abcdefgh😀"),
	}
	r := rand.New(rand.NewSource(20240601))
	gen := func(al []rune, n int) string { return randomText(r, al, n) }
	// mutate derives a related text, so the cases are not all far apart.
	mutate := func(al []rune, s string) string {
		rs := []rune(s)
		for k := r.Intn(4); k >= 0; k-- {
			i := r.Intn(len(rs) + 1)
			switch r.Intn(3) {
			case 0:
				rs = append(rs[:i], append([]rune(gen(al, 1+r.Intn(3))), rs[i:]...)...)
			case 1:
				if i < len(rs) {
					rs = append(rs[:i], rs[i+1+r.Intn(len(rs)-i):]...)
				}
			default:
				if i < len(rs) {
					rs[i] = al[r.Intn(len(al))]
				}
			}
		}
		return string(rs)
	}
	for n := 0; n < 5000; n++ {
		al := alphabets[n%len(alphabets)]
		old := gen(al, r.Intn(13))
		var new string
		if n%2 == 0 {
			new = gen(al, r.Intn(13))
		} else {
			new = mutate(al, old)
		}
		edits, exact, _ := diffTextBudget(old, new, textDiffBudget)
		require.True(t, exact, "%q -> %q", old, new)
		require.Equal(t, new, applyTextEdits(t, old, edits), "%q -> %q: %+v", old, new, edits)
		require.Equal(t, minEditUnits(old, new), editUnits(edits), "%q -> %q: %+v", old, new, edits)
		// The fallback is correct too.
		i, del, ins := textDiff(old, new)
		var single []textEdit
		if del > 0 || ins != "" {
			single = []textEdit{{i, del, ins}}
		}
		require.Equal(t, new, applyTextEdits(t, old, single), "fallback %q -> %q", old, new)
	}
}

// textDiff is the fallback edit (textDiffer.replace) as index, units to
// delete and text to insert, for the tests that check it.
func textDiff(old, new string) (index, del int, ins string) {
	d := &textDiffer{a: utf16Units(old), b: utf16Units(new)}
	e := d.replace(d.trim())
	return e.Index, e.Delete, e.Insert
}

// TestDiffTextBudget checks that the diff stops once its counted work
// passes the budget (its cost in time is BenchmarkEditText's).
func TestDiffTextBudget(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(7))
	random := func(n int, al string) string { return randomText(r, []rune(al), n) }
	cases := []struct {
		name, old, new string
		exact          bool
	}{
		// Unrelated texts: the edit distance is huge.
		{"random 100k", random(100_000, "abcdefghijklmnopqrstuvwxyz 😀"), random(100_000, "abcdefghijklmnopqrstuvwxyz 😀"), false},
		// Long snakes on every diagonal and a huge edit distance.
		{"small alphabet", random(100_000, "ab"), random(100_000, "ab"), false},
		{"periodic", strings.Repeat("ab", 50_000), strings.Repeat("abc", 33_333), false},
		// A shift by one: two edits, but the snakes are 100,000 long.
		{"shifted", strings.Repeat("ab", 50_000), strings.Repeat("ba", 50_000)[:99_999] + "x", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			edits, exact, work := diffTextBudget(c.old, c.new, textDiffBudget)
			require.Equal(t, c.exact, exact)
			if !exact {
				i, del, ins := textDiff(c.old, c.new)
				require.Equal(t, []textEdit{{i, del, ins}}, edits)
				require.Greater(t, work, textDiffBudget, "gave up before the budget ran out")
			} else {
				require.Equal(t, 2, editUnits(edits))
			}
			require.Equal(t, c.new, applyTextEdits(t, c.old, edits))
			// The last step counted (a snake, a diagonal visit or the
			// reset of the V arrays) is all it may go past the budget.
			step := max(len(utf16Units(c.old))+len(utf16Units(c.new))+textDiffVisit, 2*textDiffMaxD+3)
			require.LessOrEqual(t, work, textDiffBudget+step)
		})
	}
	// A small budget on a small input falls back to the single edit.
	edits, exact, _ := diffTextBudget("abcdefghij", "ab-cdefghij!", 3)
	require.False(t, exact)
	require.Equal(t, []textEdit{{2, 8, "-cdefghij!"}}, edits)
	// Two small changes in a note body of 100,000 characters stay exact.
	body := random(100_000, "abcdefghijklmnopqrstuvwxyz 😀.")
	units := utf16Units(body)
	changed := "X" + body[:30_000] + "YZ" + body[30_000:]
	edits, exact, _ = diffTextBudget(body, changed, textDiffBudget)
	require.True(t, exact)
	require.Equal(t, []textEdit{{0, 0, "X"}, {len(utf16Units(body[:30_000])), 0, "YZ"}}, edits)
	require.Equal(t, changed, applyTextEdits(t, body, edits))
	require.Greater(t, len(units), 100_000)
}

// TestEditTextMerge checks what the minimal edit is for: a PATCH of a text
// that changes it in two places, merged with a concurrent edit of a sync
// client between them, keeps both.
func TestEditTextMerge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		other func(x *yjs.Text)
		want  string
	}{
		{"concurrent delete", func(x *yjs.Text) { x.Delete(6, 1) }, "ab-cdefhij!"},              // deletes "g"
		{"concurrent insert", func(x *yjs.Text) { x.Insert(5, "XYZ", nil) }, "ab-cdeXYZfghij!"}, // after "e"
		{"concurrent edits at both ends", func(x *yjs.Text) { x.Insert(0, "<", nil); x.Delete(10, 1) }, "<ab-cdefghi!"},
	}
	for _, c := range cases {
		for _, ids := range [][2]uint64{{1, 2}, {2, 1}} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				server := yjs.NewDoc(yjs.WithClientID(ids[0]))
				client := yjs.NewDoc(yjs.WithClientID(ids[1]))
				server.GetText("t").Insert(0, "abcdefghij", nil)
				exchangeUpdates(t, server, client)
				require.Equal(t, "abcdefghij", client.GetText("t").String())

				var updates int
				unsub := server.OnUpdate(func([]byte, any) { updates++ })
				server.Transact(func(*yjs.Transaction) { editText(server.GetText("t"), "ab-cdefghij!") }, nil)
				unsub()
				require.Equal(t, 1, updates, "one transaction, one update")
				require.Equal(t, "ab-cdefghij!", server.GetText("t").String())
				client.Transact(func(*yjs.Transaction) { c.other(client.GetText("t")) }, nil)

				exchangeUpdates(t, server, client)
				require.Equal(t, c.want, server.GetText("t").String())
				require.Equal(t, c.want, client.GetText("t").String())
			})
		}
	}
}

// exchangeUpdates sends each document what the other lacks.
func exchangeUpdates(t *testing.T, x, y *yjs.Doc) {
	t.Helper()
	ux, err := x.EncodeStateAsUpdate(y.EncodeStateVector())
	require.NoError(t, err)
	uy, err := y.EncodeStateAsUpdate(x.EncodeStateVector())
	require.NoError(t, err)
	require.NoError(t, y.ApplyUpdate(ux, "sync"))
	require.NoError(t, x.ApplyUpdate(uy, "sync"))
}

func BenchmarkEditText(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	random := func(n int) string { return randomText(r, []rune("abcdefghijklmnopqrstuvwxyz       .,\n😀é"), n) }
	body := random(100_000)
	cases := []struct{ name, old, new string }{
		// A PATCH of a 100,000 character note that fixes two typos.
		{"two-changes", body, body[:20_000] + "xy" + body[20_001:80_000] + "!" + body[80_000:]},
		// Unrelated texts: the budget runs out and the single edit is used.
		{"fallback", body, random(100_000)},
	}
	for _, c := range cases {
		b.Run("diff/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				diffText(c.old, c.new)
			}
		})
		b.Run("editText/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				d := yjs.NewDoc(yjs.WithClientID(1))
				x := d.GetText("t")
				x.Insert(0, c.old, nil)
				b.StartTimer()
				d.Transact(func(*yjs.Transaction) { editText(x, c.new) }, nil)
			}
		})
	}
}

// TestDiffTextSlide checks the last pass of diffText on scripts that are
// optimal under eq but put an edit between the surrogates of a pair.
func TestDiffTextSlide(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		old, new string
		runs     []textRun
		want     []textEdit
		ok       bool
	}{
		// Keep the high surrogate of the first 😀, insert "\udc00\ud83d",
		// keep the low surrogate: slides to inserting 😀 before it.
		{"insertion", "😀", "😀😀", []textRun{{0, 0, 1}, {1, 3, 1}}, []textEdit{{0, 0, "😀"}}, true},
		{"deletion", "x😀😀", "x😀", []textRun{{0, 0, 2}, {4, 2, 1}}, []textEdit{{1, 2, ""}}, true},
		{"after another edit", "a😀", "ba😀😀", []textRun{{0, 1, 2}, {2, 5, 1}}, []textEdit{{0, 0, "b"}, {1, 0, "😀"}}, true},
		// The equal unit between two edits disappears: they merge.
		{"merge with previous edit", "x😀", "y😀😀", []textRun{{1, 1, 1}, {2, 4, 1}}, []textEdit{{0, 1, "y😀"}}, true},
		// Not optimal (and not eq): cannot be fixed, so not ok.
		{"mixed", "😀", "😁", []textRun{{0, 0, 1}}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := &textDiffer{a: utf16Units(c.old), b: utf16Units(c.new), runs: c.runs}
			got, ok := d.edits()
			require.Equal(t, c.ok, ok)
			require.Equal(t, c.want, got)
			if ok {
				require.Equal(t, c.new, applyTextEdits(t, c.old, got))
			}
		})
	}
}

// randomText returns n runes drawn from al by r.
func randomText(r *rand.Rand, al []rune, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(al[r.Intn(len(al))])
	}
	return b.String()
}
