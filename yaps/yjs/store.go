package yjs

import (
	"fmt"
	"sort"
)

// id identifies a struct: the client that created it and its clock.
type id struct {
	client uint64
	clock  int
}

// Item flags kept in item.info.
const (
	flagKeep uint8 = 1 << iota
	flagCountable
	flagDeleted
	flagMarker
	flagHasOrigin
	flagHasRightOrigin
	flagHasParentSub
)

// item is one struct of the store: an Item or, when content.kind is kindGC,
// a GC range. Items are linked into their parent's list via left/right.
type item struct {
	id          id
	length      int
	left, right *item
	origin      id
	rightOrigin id
	parent      *typeBase
	parentSub   string
	content     content
	redone      *id
	info        uint8
}

func (it *item) deleted() bool   { return it.info&flagDeleted != 0 }
func (it *item) countable() bool { return it.info&flagCountable != 0 }
func (it *item) keep() bool      { return it.info&flagKeep != 0 }
func (it *item) isGC() bool      { return it.content.kind == kindGC }
func (it *item) hasOrigin() bool { return it.info&flagHasOrigin != 0 }
func (it *item) hasRightOrigin() bool {
	return it.info&flagHasRightOrigin != 0
}
func (it *item) hasParentSub() bool { return it.info&flagHasParentSub != 0 }
func (it *item) marked() bool       { return it.info&flagMarker != 0 }
func (it *item) setMarker(on bool) {
	if on {
		it.info |= flagMarker
	} else {
		it.info &^= flagMarker
	}
}
func (it *item) lastID() id { return id{it.id.client, it.id.clock + it.length - 1} }

// visible reports whether the item contributes to its parent's length.
func (it *item) visible() bool { return it.info&(flagDeleted|flagCountable) == flagCountable }

// clientStructs holds one client's structs ordered by clock without gaps.
// They live in chunks so that splitting and merging structs in the middle
// of a long history moves at most one chunk, not the whole slice.
type clientStructs struct {
	client uint64
	chunks [][]entry
	starts []int // starts[c] is the index of chunks[c][0]
	firsts []int // firsts[c] is the clock of chunks[c][0]
	n      int
	hint   int // chunk of the last lookup; access is mostly local
}

// entry keeps a struct's clock next to its pointer so that searching by
// clock reads contiguous memory instead of chasing pointers.
type entry struct {
	clock int
	it    *item
}

const chunkMax = 256

func (cs *clientStructs) len() int { return cs.n }

func (cs *clientStructs) last() *item {
	ch := cs.chunks[len(cs.chunks)-1]
	return ch[len(ch)-1].it
}

func (cs *clientStructs) first() *item { return cs.chunks[0][0].it }

func (cs *clientStructs) state() int {
	last := cs.last()
	return last.id.clock + last.length
}

// locate returns the chunk and offset of index i.
func (cs *clientStructs) locate(i int) (int, int) {
	if h := cs.hint; h < len(cs.chunks) && i >= cs.starts[h] && i < cs.starts[h]+len(cs.chunks[h]) {
		return h, i - cs.starts[h]
	}
	lo, hi := 0, len(cs.starts)
	for lo < hi {
		m := (lo + hi) / 2
		if cs.starts[m] <= i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	c := lo - 1
	cs.hint = c
	return c, i - cs.starts[c]
}

// run returns where cs's structs from clock on (all of them for an
// earlier clock) start: the clock, and the index of the struct holding it.
func (cs *clientStructs) run(clock int) (start, first int) {
	start = max(clock, cs.first().id.clock)
	return start, cs.findIndex(start)
}

// each calls fn with cs's structs from index first on, in order.
func (cs *clientStructs) each(first int, fn func(entry)) {
	c, o := cs.locate(first)
	for ; c < len(cs.chunks); c++ {
		for _, en := range cs.chunks[c][o:] {
			fn(en)
		}
		o = 0
	}
}

func (cs *clientStructs) at(i int) *item {
	c, o := cs.locate(i)
	return cs.chunks[c][o].it
}

func (cs *clientStructs) push(it *item) {
	if len(cs.chunks) == 0 || len(cs.chunks[len(cs.chunks)-1]) >= chunkMax {
		cs.chunks = append(cs.chunks, make([]entry, 0, chunkMax))
		cs.starts = append(cs.starts, cs.n)
		cs.firsts = append(cs.firsts, it.id.clock)
	}
	last := len(cs.chunks) - 1
	cs.chunks[last] = append(cs.chunks[last], entry{it.id.clock, it})
	cs.n++
}

func (cs *clientStructs) insertAt(i int, it *item) {
	if i == cs.n {
		cs.push(it)
		return
	}
	c, o := cs.locate(i)
	ch := append(cs.chunks[c], entry{})
	copy(ch[o+1:], ch[o:])
	ch[o] = entry{it.id.clock, it}
	cs.chunks[c] = ch
	if o == 0 {
		cs.firsts[c] = it.id.clock
	}
	for k := c + 1; k < len(cs.starts); k++ {
		cs.starts[k]++
	}
	cs.n++
	if len(ch) > 2*chunkMax {
		half := len(ch) / 2
		right := make([]entry, len(ch)-half, chunkMax*2)
		copy(right, ch[half:])
		clear(ch[half:])
		cs.chunks[c] = ch[:half]
		cs.chunks = append(cs.chunks, nil)
		copy(cs.chunks[c+2:], cs.chunks[c+1:])
		cs.chunks[c+1] = right
		cs.starts = append(cs.starts, 0)
		copy(cs.starts[c+2:], cs.starts[c+1:])
		cs.starts[c+1] = cs.starts[c] + half
		cs.firsts = append(cs.firsts, 0)
		copy(cs.firsts[c+2:], cs.firsts[c+1:])
		cs.firsts[c+1] = right[0].clock
	}
}

func (cs *clientStructs) removeAt(i int) {
	c, o := cs.locate(i)
	ch := cs.chunks[c]
	copy(ch[o:], ch[o+1:])
	ch[len(ch)-1] = entry{}
	ch = ch[:len(ch)-1]
	for k := c + 1; k < len(cs.starts); k++ {
		cs.starts[k]--
	}
	cs.n--
	if len(ch) == 0 && len(cs.chunks) > 1 {
		cs.chunks = append(cs.chunks[:c], cs.chunks[c+1:]...)
		cs.starts = append(cs.starts[:c], cs.starts[c+1:]...)
		cs.firsts = append(cs.firsts[:c], cs.firsts[c+1:]...)
		cs.hint = 0
		return
	}
	cs.chunks[c] = ch
	if o == 0 && len(ch) > 0 {
		cs.firsts[c] = ch[0].clock
	}
}

// findIndex returns the index of the struct containing clock, or -1.
// Structs cover the clocks without gaps, so the struct containing clock is
// the last one starting at or before it.
func (cs *clientStructs) findIndex(clock int) int {
	if cs.n == 0 || clock < 0 || clock >= cs.state() {
		return -1
	}
	lo, hi := 0, len(cs.firsts)
	for lo < hi {
		m := (lo + hi) / 2
		if cs.firsts[m] <= clock {
			lo = m + 1
		} else {
			hi = m
		}
	}
	c := lo - 1
	if c < 0 {
		return -1
	}
	ch := cs.chunks[c]
	lo, hi = 0, len(ch)
	for lo < hi {
		m := (lo + hi) / 2
		if ch[m].clock <= clock {
			lo = m + 1
		} else {
			hi = m
		}
	}
	cs.hint = c
	return cs.starts[c] + lo - 1
}

type structStore struct {
	clients map[uint64]*clientStructs
	order   []*clientStructs // sorted by client, for cheap state vectors
}

// clockEntry is one client's clock in a stateVec.
type clockEntry struct {
	client uint64
	clock  int
}

// stateVec is a state vector sorted by client. Transactions take one per
// commit, so it avoids the cost of a map.
type stateVec []clockEntry

func (sv stateVec) toMap() map[uint64]int {
	m := make(map[uint64]int, len(sv))
	for _, e := range sv {
		m[e.client] = e.clock
	}
	return m
}

func newStructStore() structStore { return structStore{clients: make(map[uint64]*clientStructs)} }

func (s *structStore) getState(client uint64) int {
	cs := s.clients[client]
	if cs == nil {
		return 0
	}
	return cs.state()
}

func (s *structStore) stateVector() map[uint64]int { return s.stateVec().toMap() }

func (s *structStore) stateVec() stateVec { return s.appendStateVec(nil) }

func (s *structStore) appendStateVec(sv stateVec) stateVec {
	for _, cs := range s.order {
		sv = append(sv, clockEntry{cs.client, cs.state()})
	}
	return sv
}

func (s *structStore) addStruct(it *item) {
	cs := s.clients[it.id.client]
	if cs == nil {
		cs = &clientStructs{client: it.id.client}
		s.clients[it.id.client] = cs
		i := sort.Search(len(s.order), func(i int) bool { return s.order[i].client > it.id.client })
		s.order = append(s.order, nil)
		copy(s.order[i+1:], s.order[i:])
		s.order[i] = cs
	} else if cs.state() != it.id.clock {
		panic(fmt.Sprintf("yjs: struct %d:%d does not continue client state %d", it.id.client, it.id.clock, cs.state()))
	}
	cs.push(it)
}

// find returns the struct containing the id or nil.
func (s *structStore) find(x id) *item {
	cs := s.clients[x.client]
	if cs == nil {
		return nil
	}
	i := cs.findIndex(x.clock)
	if i < 0 {
		return nil
	}
	return cs.at(i)
}

// findIndexCleanStart finds the struct at clock and splits it so that a
// struct starts exactly at clock.
func (s *structStore) findIndexCleanStart(tx *Transaction, cs *clientStructs, clock int) int {
	i := cs.findIndex(clock)
	if i < 0 {
		return -1
	}
	st := cs.at(i)
	if st.id.clock < clock && !st.isGC() {
		cs.insertAt(i+1, splitItem(tx, st, clock-st.id.clock))
		return i + 1
	}
	return i
}

func (s *structStore) getItemCleanStart(tx *Transaction, x id) *item {
	cs := s.clients[x.client]
	if cs == nil {
		return nil
	}
	i := s.findIndexCleanStart(tx, cs, x.clock)
	if i < 0 {
		return nil
	}
	return cs.at(i)
}

// getItemCleanEnd finds the struct containing x and splits it so that it
// ends exactly at x.
func (s *structStore) getItemCleanEnd(tx *Transaction, x id) *item {
	cs := s.clients[x.client]
	if cs == nil {
		return nil
	}
	i := cs.findIndex(x.clock)
	if i < 0 {
		return nil
	}
	st := cs.at(i)
	if x.clock != st.id.clock+st.length-1 && !st.isGC() {
		cs.insertAt(i+1, splitItem(tx, st, x.clock-st.id.clock+1))
	}
	return st
}

// splitItem cuts left at diff and returns the new right half, linked in.
func splitItem(tx *Transaction, left *item, diff int) *item {
	right := &item{
		id:          id{left.id.client, left.id.clock + diff},
		length:      left.length - diff,
		left:        left,
		right:       left.right,
		origin:      id{left.id.client, left.id.clock + diff - 1},
		rightOrigin: left.rightOrigin,
		parent:      left.parent,
		parentSub:   left.parentSub,
		info:        left.info&(flagDeleted|flagKeep|flagCountable|flagHasRightOrigin|flagHasParentSub) | flagHasOrigin,
	}
	right.content = left.content.splice(diff, left.length)
	if left.redone != nil {
		right.redone = &id{left.redone.client, left.redone.clock + diff}
	}
	left.right = right
	if right.right != nil {
		right.right.left = right
	}
	left.length = diff
	if tx != nil {
		tx.mergeStructs = append(tx.mergeStructs, right)
		if right.hasParentSub() && right.right == nil && right.parent != nil {
			right.parent.m[right.parentSub] = right
		}
	}
	return right
}
