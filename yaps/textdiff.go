package yaps

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Character-level diff of two texts, used to apply an HTTP write of a text
// member to its Y.Text as a minimal edit (RULINGS R9), so that concurrent
// edits from sync clients merge per character instead of being undone by a
// delete-and-reinsert of everything between the first and last change.
//
// The diff works on UTF-16 code units, the unit of Y.Text indexes, with
// Myers' O(ND) algorithm in its linear-space form (the "middle snake",
// bisecting recursively). Two units are only considered equal when the whole
// character they belong to is equal (a surrogate is compared together with
// its partner), so an optimal script never needs to split a surrogate pair,
// and a final pass slides by one unit any insertion or deletion that an
// optimal script could still place between a high and a low surrogate.
//
// Work budget: a PATCH of a note body (up to 100,000 characters) must stay
// within a few milliseconds and a few MB. Myers costs O((N+M)·D) time, which
// for two unrelated large texts is far too much, so the diff counts its work
// (one unit per code unit compared in a snake, textDiffVisit per diagonal
// visited, which costs about that much more) and, past textDiffBudget,
// gives up and returns the single prefix/suffix edit (replace): always
// correct, only coarse (a concurrent edit inside the replaced span is then
// lost, as before). Measured on 100,000 characters, the budget covers an
// edit distance of about 1,000 units (a 500-character passage rewritten,
// costing about D² visits) or about 50 small changes scattered over the
// text (each costing a pass over the text between them); giving up costs
// about 1-2 ms. Memory is linear: the two unit arrays, two V arrays of at
// most 2·textDiffMaxD+3 int32 each, and the result.

const (
	// textDiffBudget bounds the diff's work, summed over the whole
	// recursion, in units of one UTF-16 code unit compared. See above.
	textDiffBudget = 1 << 21
	// textDiffVisit is the work of visiting one diagonal in bisect: a
	// data-dependent branch and several array reads and writes, measured
	// at about eight times a compare in a snake.
	textDiffVisit = 8
	// textDiffMaxD bounds the edit distance one bisection explores (and
	// so the size of its V arrays). The work budget is reached first:
	// exploring distance d costs at least d² steps.
	textDiffMaxD = 2048
)

// textEdit deletes Delete UTF-16 code units at Index and then inserts Insert
// there. Index is a position in the old text.
type textEdit struct {
	Index  int
	Delete int
	Insert string
}

// diffText returns edits that turn old into new, with the fewest inserted
// plus deleted UTF-16 code units among scripts that never split a surrogate
// pair, or the single prefix/suffix edit (replace) when the work budget
// runs out. The edits are sorted by Index and do not overlap; apply them
// from the last to the first so the indexes stay valid.
// Equal texts give no edits.
func diffText(old, new string) []textEdit {
	edits, _, _ := diffTextBudget(old, new, textDiffBudget)
	return edits
}

// diffTextBudget is diffText with an explicit budget; exact reports whether
// the diff completed (false: the single-edit fallback was used), and work
// is the work it counted, which passes budget by at most one step.
func diffTextBudget(old, new string, budget int) (edits []textEdit, exact bool, work int) {
	d := &textDiffer{a: utf16Units(old), b: utf16Units(new), budget: budget}
	edits, exact = d.run()
	return edits, exact, d.work
}

func (d *textDiffer) run() (edits []textEdit, exact bool) {
	a, b := d.a, d.b
	p, q := d.trim()
	a1, b1 := len(a)-q, len(b)-q
	if p == a1 && p == b1 {
		return nil, true
	}
	single := func() []textEdit { return []textEdit{d.replace(p, q)} }
	if p == a1 || p == b1 {
		return single(), true // insert-only or delete-only
	}
	d.match(0, 0, p)
	if !d.diff(p, a1, p, b1) {
		return single(), false
	}
	d.match(a1, b1, q)
	edits, ok := d.edits()
	if !ok {
		return single(), false // cannot happen; see edits
	}
	return edits, true
}

// utf16Units encodes s as UTF-16 like utf16.Encode([]rune(s)) (invalid
// UTF-8 becomes U+FFFD), without the intermediate rune slice.
func utf16Units(s string) []uint16 {
	u := make([]uint16, 0, len(s))
	for _, r := range s {
		u = utf16.AppendRune(u, r)
	}
	return u
}

// utf16String decodes valid UTF-16 like string(utf16.Decode(u)), with one
// allocation of the exact size instead of a growing rune slice.
func utf16String(u []uint16) string {
	n := 0
	for _, c := range u {
		switch {
		case c < 0x80:
			n++
		case c < 0x800:
			n += 2
		case c&0xf800 == 0xd800:
			n += 2 // each half of a pair: 4 bytes for the pair
		default:
			n += 3
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := 0; i < len(u); i++ {
		r := rune(u[i])
		if utf16.IsSurrogate(r) && i+1 < len(u) {
			if dr := utf16.DecodeRune(r, rune(u[i+1])); dr != utf8.RuneError {
				r = dr
				i++
			}
		}
		sb.WriteRune(r) // a lone surrogate becomes U+FFFD, as in Decode
	}
	return sb.String()
}

// textDiffer holds the state of one diff. a and b are valid UTF-16 (every
// high surrogate is followed by a low one and every low one preceded by a
// high one), which utf16Units guarantees.
type textDiffer struct {
	a, b   []uint16
	work   int
	budget int
	runs   []textRun // equal runs found, in order
	v1, v2 []int32   // V arrays of bisect, shared by all calls
}

// textRun says a[A:A+N] equals b[B:B+N].
type textRun struct{ A, B, N int }

// eq reports whether a[i] and b[j] are equal as parts of whole characters:
// a surrogate is only equal when its partner is equal too. Diagonal edges
// of the edit graph exist exactly where eq holds.
func (d *textDiffer) eq(i, j int) bool {
	c := d.a[i]
	if c != d.b[j] {
		return false
	}
	if c&0xf800 != 0xd800 {
		return true // not a surrogate
	}
	if c < 0xdc00 {
		return d.a[i+1] == d.b[j+1] // high surrogate: compare the low one
	}
	return d.a[i-1] == d.b[j-1] // low surrogate: compare the high one
}

// trim returns the lengths, in UTF-16 code units, of the common prefix
// and (of the rest) the common suffix of a and b, never splitting a
// surrogate pair.
func (d *textDiffer) trim() (p, q int) {
	p = d.prefix(0, len(d.a), 0, len(d.b))
	return p, d.suffix(p, len(d.a), p, len(d.b))
}

// replace is the single edit that replaces what lies between the common
// prefix p and suffix q (trim): diffText's fallback, always correct.
func (d *textDiffer) replace(p, q int) textEdit {
	return textEdit{Index: p, Delete: len(d.a) - p - q, Insert: utf16String(d.b[p : len(d.b)-q])}
}

func (d *textDiffer) prefix(a0, a1, b0, b1 int) int {
	n := 0
	for a0+n < a1 && b0+n < b1 && d.eq(a0+n, b0+n) {
		n++
	}
	return n
}

func (d *textDiffer) suffix(a0, a1, b0, b1 int) int {
	n := 0
	for a1-n > a0 && b1-n > b0 && d.eq(a1-n-1, b1-n-1) {
		n++
	}
	return n
}

func (d *textDiffer) match(a, b, n int) {
	if n == 0 {
		return
	}
	if k := len(d.runs) - 1; k >= 0 {
		if r := &d.runs[k]; r.A+r.N == a && r.B+r.N == b {
			r.N += n
			return
		}
	}
	d.runs = append(d.runs, textRun{a, b, n})
}

// diff records the equal runs of an optimal script for a[a0:a1] and
// b[b0:b1]. It returns false when the budget ran out.
func (d *textDiffer) diff(a0, a1, b0, b1 int) bool {
	p := d.prefix(a0, a1, b0, b1)
	a0, b0 = a0+p, b0+p
	q := d.suffix(a0, a1, b0, b1)
	a1, b1 = a1-q, b1-q
	d.work += p + q + 1
	if d.work > d.budget {
		return false
	}
	d.match(a0-p, b0-p, p)
	if a0 < a1 && b0 < b1 {
		x, y, ok := d.bisect(a0, a1, b0, b1)
		if !ok {
			return false
		}
		// x == a0 && y == b0: nothing in common, one replacement.
		if (x != a0 || y != b0) && (!d.diff(a0, x, b0, y) || !d.diff(x, a1, y, b1)) {
			return false
		}
	}
	d.match(a1, b1, q)
	return true
}

// bisect finds the middle snake of a[a0:a1] against b[b0:b1] (Myers 1986,
// section 4b) and returns the point after its forward part, a point on an
// optimal path that is neither the start nor the end; or (a0, b0) when the
// ranges have no unit in common. ok is false when the budget ran out. The
// first and last units of the ranges differ (diff trimmed them).
func (d *textDiffer) bisect(a0, a1, b0, b1 int) (x, y int, ok bool) {
	n, m := a1-a0, b1-b0
	// With no overlap for all d < (n+m+1)/2 the edit distance is n+m.
	maxD, disjoint := (n+m+1)/2, true
	if maxD > textDiffMaxD {
		maxD, disjoint = textDiffMaxD, false
	}
	if d.v1 == nil {
		size := 2*textDiffMaxD + 3
		if top := (len(d.a) + len(d.b) + 1) / 2; top < textDiffMaxD {
			size = 2*top + 3
		}
		d.v1, d.v2 = make([]int32, size), make([]int32, size)
	}
	off := len(d.v1) / 2 // diagonal k is at index off+k
	for k := -maxD - 1; k <= maxD+1; k++ {
		d.v1[off+k], d.v2[off+k] = -1, -1
	}
	work, budget := d.work+2*maxD+3, d.budget
	defer func() { d.work = work }()
	v1, v2 := d.v1, d.v2
	A, B := d.a[a0:a1], d.b[b0:b1]
	v1[off+1], v2[off+1] = 0, 0
	delta := n - m
	front := delta%2 != 0 // odd delta: overlaps show in the forward pass
	// k1start/k1end (k2start/k2end) skip diagonals that ran off the grid.
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	for dd := 0; dd < maxD; dd++ {
		for k1 := -dd + k1start; k1 <= dd-k1end; k1 += 2 {
			i := off + k1
			var x1 int
			if k1 == -dd || (k1 != dd && v1[i-1] < v1[i+1]) {
				x1 = int(v1[i+1])
			} else {
				x1 = int(v1[i-1]) + 1
			}
			y1 := x1 - k1
			s := x1
			for x1 < n && y1 < m {
				if c := A[x1]; c != B[y1] || c&0xf800 == 0xd800 && !d.eq(a0+x1, b0+y1) {
					break
				}
				x1++
				y1++
			}
			v1[i] = int32(x1)
			if work += textDiffVisit + x1 - s; work > budget {
				return 0, 0, false
			}
			switch {
			case x1 > n:
				k1end += 2
			case y1 > m:
				k1start += 2
			case front:
				if k2 := delta - k1; k2 >= -maxD && k2 <= maxD && v2[off+k2] != -1 {
					if x1 >= n-int(v2[off+k2]) {
						return d.split(a0, a1, b0, b1, x1, y1)
					}
				}
			}
		}
		for k2 := -dd + k2start; k2 <= dd-k2end; k2 += 2 {
			i := off + k2
			var x2 int
			if k2 == -dd || (k2 != dd && v2[i-1] < v2[i+1]) {
				x2 = int(v2[i+1])
			} else {
				x2 = int(v2[i-1]) + 1
			}
			y2 := x2 - k2
			s := x2
			for x2 < n && y2 < m {
				if c := A[n-x2-1]; c != B[m-y2-1] || c&0xf800 == 0xd800 && !d.eq(a1-x2-1, b1-y2-1) {
					break
				}
				x2++
				y2++
			}
			v2[i] = int32(x2)
			if work += textDiffVisit + x2 - s; work > budget {
				return 0, 0, false
			}
			switch {
			case x2 > n:
				k2end += 2
			case y2 > m:
				k2start += 2
			case !front:
				if k1 := delta - k2; k1 >= -maxD && k1 <= maxD && v1[off+k1] != -1 {
					x1 := int(v1[off+k1])
					if x1 >= n-x2 {
						return d.split(a0, a1, b0, b1, x1, x1-k1)
					}
				}
			}
		}
	}
	return a0, b0, disjoint
}

// split converts a bisect point to absolute indexes, refusing the corners
// (which would not make progress; Myers never returns them here).
func (d *textDiffer) split(a0, a1, b0, b1, x, y int) (int, int, bool) {
	if (x == 0 && y == 0) || (a0+x == a1 && b0+y == b1) {
		return 0, 0, false
	}
	return a0 + x, b0 + y, true
}

// edits turns the equal runs into edits. An optimal script under eq can
// still put a pure insertion or deletion between the high and the low
// surrogate of an unchanged character (x😀 -> x😀😀 may insert "\udc00\ud83d"
// after the first high surrogate); then the unit before it equals its last
// unit and the edit slides left by one unit, which keeps the result and the
// cost and puts both of its ends on character boundaries. (A mixed edit
// next to such a pair would share its first or last unit between the
// deleted and the inserted text, so it is not optimal and does not occur.)
// ok is false if an edit still splits a pair, which should never happen;
// the caller then falls back to the single edit.
func (d *textDiffer) edits() (out []textEdit, ok bool) {
	type hunk struct{ p, n, q, m int }
	var hs []hunk
	add := func(h hunk) {
		if h.n == 0 && h.m == 0 {
			return
		}
		if (h.n == 0 || h.m == 0) && h.p > 0 && h.q > 0 && isHighSurrogate(d.a[h.p-1]) {
			last := d.a[h.p+h.n-1] // the unit that becomes equal instead
			if h.n == 0 {
				last = d.b[h.q+h.m-1]
			}
			if c := d.a[h.p-1]; c == d.b[h.q-1] && c == last {
				h.p, h.q = h.p-1, h.q-1
			}
		}
		if k := len(hs) - 1; k >= 0 && hs[k].p+hs[k].n == h.p && hs[k].q+hs[k].m == h.q {
			hs[k].n += h.n
			hs[k].m += h.m
			return
		}
		hs = append(hs, h)
	}
	pa, pb := 0, 0
	for _, r := range d.runs {
		add(hunk{pa, r.A - pa, pb, r.B - pb})
		pa, pb = r.A+r.N, r.B+r.N
	}
	add(hunk{pa, len(d.a) - pa, pb, len(d.b) - pb})
	out = make([]textEdit, 0, len(hs))
	for _, h := range hs {
		if splitsPair(d.a, h.p) || splitsPair(d.a, h.p+h.n) || splitsPair(d.b, h.q) || splitsPair(d.b, h.q+h.m) {
			return nil, false
		}
		out = append(out, textEdit{Index: h.p, Delete: h.n, Insert: utf16String(d.b[h.q : h.q+h.m])})
	}
	return out, true
}

func isHighSurrogate(c uint16) bool { return c >= 0xd800 && c < 0xdc00 }

// splitsPair reports whether position i of u lies inside a surrogate pair.
func splitsPair(u []uint16, i int) bool { return i > 0 && i < len(u) && isHighSurrogate(u[i-1]) }
