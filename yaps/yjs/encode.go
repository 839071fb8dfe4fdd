package yjs

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
)

// writeItem encodes one struct starting at offset (Yjs Item.write / GC.write).
func writeItem(e *encoder, it *item, offset int) { writeStruct(e, it, nil, offset) }

// writeStruct writes it; pr, when not nil, supplies the parent of an item
// that is not integrated into a document (merge and diff of raw updates).
func writeStruct(e *encoder, it *item, pr *parentRef, offset int) {
	if it.content.kind == kindSkip {
		e.writeByte(10)
		e.writeVarUint(uint64(it.length - offset))
		return
	}
	if it.isGC() {
		e.writeByte(0)
		e.writeVarUint(uint64(it.length - offset))
		return
	}
	hasOrigin := it.hasOrigin() || offset > 0
	origin := it.origin
	if offset > 0 {
		origin = id{it.id.client, it.id.clock + offset - 1}
	}
	info := it.content.kind & 0x1f
	if hasOrigin {
		info |= 0x80
	}
	if it.hasRightOrigin() {
		info |= 0x40
	}
	if it.hasParentSub() {
		info |= 0x20
	}
	e.writeByte(info)
	if hasOrigin {
		e.writeVarUint(origin.client)
		e.writeVarUint(uint64(origin.clock))
	}
	if it.hasRightOrigin() {
		e.writeVarUint(it.rightOrigin.client)
		e.writeVarUint(uint64(it.rightOrigin.clock))
	}
	if !hasOrigin && !it.hasRightOrigin() {
		if pr != nil {
			if pr.kind == parentByName {
				e.writeByte(1)
				e.writeVarString(pr.name)
			} else {
				e.writeByte(0)
				e.writeVarUint(pr.id.client)
				e.writeVarUint(uint64(pr.id.clock))
			}
		} else if p := it.parent; p.item == nil {
			e.writeByte(1)
			e.writeVarString(p.name)
		} else {
			e.writeByte(0)
			e.writeVarUint(p.item.id.client)
			e.writeVarUint(uint64(p.item.id.clock))
		}
		if it.hasParentSub() {
			e.writeVarString(it.parentSub)
		}
	}
	it.content.write(e, offset, it.length)
}

// writeClientsStructs writes all structs the given state vector lacks.
func (d *Doc) writeClientsStructs(e *encoder, sv map[uint64]int) {
	starts := make(map[uint64]int, len(d.store.clients))
	for c, cs := range d.store.clients {
		clock, ok := sv[c]
		if !ok {
			starts[c] = 0
		} else if cs.state() > clock {
			starts[c] = clock
		}
	}
	e.writeVarUint(uint64(len(starts)))
	for _, c := range sortedClients(starts) {
		d.writeClientRun(e, d.store.clients[c], starts[c])
	}
}

// writeClientRun writes one client's structs from clock on.
func (d *Doc) writeClientRun(e *encoder, cs *clientStructs, clock int) {
	clock, first := cs.run(clock)
	e.writeVarUint(uint64(cs.len() - first))
	e.writeVarUint(cs.client)
	e.writeVarUint(uint64(clock))
	cs.each(first, func(en entry) { writeItem(e, en.it, max(clock-en.clock, 0)) })
}

// encodedSizeHint bounds the size of the update of everything sv lacks
// (everything for a nil sv; for another sv, bar the delete set, which
// covers the whole document and may grow a diff's buffer once) so that
// encoding fills a single buffer: growing it by doubling would allocate
// and copy about twice the document's encoded size on every compaction.
// It walks the structs it bounds, which is about half the cost of
// encoding them, so full encodings after the first size their buffer
// from the last one instead (fullSizeEstimate).
func (d *Doc) encodedSizeHint(sv map[uint64]int) int {
	n := 16
	for _, cs := range d.store.order {
		first := 0
		if clock, ok := sv[cs.client]; ok {
			if cs.state() <= clock {
				continue
			}
			_, first = cs.run(clock)
		}
		n += 3 * lenMax // the run's struct count, client and clock
		cs.each(first, func(en entry) {
			n += itemSizeHint(en.it)
			if en.it.deleted() {
				n += 2 * lenMax // at most one delete-set range per struct
			}
		})
	}
	return n
}

// fullSizeEstimate sizes the buffer of a full encoding of structs
// structs from the last one's size: in proportion to the structs, plus an
// eighth. Growing past it, if content larger than the average was added,
// costs a copy or two; the exact bound's walk cost one on every encoding
// (a third of a compaction's encoding in the create-yap benchmark).
func (d *Doc) fullSizeEstimate(structs int) int {
	est := d.lastFullSize * structs / max(d.lastFullStructs, 1)
	return est + est/8 + 1024
}

// varLen is the length of v as a lib0 varuint.
func varLen(v uint64) int { return 1 + (bits.Len64(v|1)-1)/7 }

// itemSizeHint bounds the encoded size of it (as writeStruct writes it at
// any offset), exactly for everything but its content (content.sizeHint).
func itemSizeHint(it *item) int {
	n := 1 + 2*varLen(uint64(it.length))                              // info; a GC/skip length
	n += varLen(it.id.client) + varLen(uint64(it.id.clock+it.length)) // an origin inside it (offset > 0)
	n += varLen(it.origin.client) + varLen(uint64(it.origin.clock))
	n += varLen(it.rightOrigin.client) + varLen(uint64(it.rightOrigin.clock))
	if p := it.parent; p != nil {
		n += 1 + varLen(uint64(len(p.name))) + len(p.name)
		if p.item != nil {
			n += varLen(p.item.id.client) + varLen(uint64(p.item.id.clock))
		}
	}
	n += varLen(uint64(len(it.parentSub))) + len(it.parentSub)
	return n + it.content.sizeHint()
}

// run is one client's structs from clock on.
type run struct {
	cs    *clientStructs
	clock int
}

// runsSizeHint bounds the encoded size of runs (writeClientRun).
func runsSizeHint(runs []run) int {
	n := lenMax // the number of runs
	for _, r := range runs {
		n += 3 * lenMax // the run's struct count, client and clock
		_, first := r.cs.run(r.clock)
		r.cs.each(first, func(en entry) { n += itemSizeHint(en.it) })
	}
	return n
}

// writeTouchedStructs writes the structs a transaction added.
func (d *Doc) writeTouchedStructs(e *encoder, tx *Transaction) {
	var buf [8]run // a transaction's few clients, on the stack
	runs := buf[:0]
	for i, b := range tx.touched {
		if tx.afterState[i].clock > b.clock {
			runs = append(runs, run{d.store.clients[b.client], b.clock})
		}
	}
	slices.SortFunc(runs, func(a, b run) int { return cmp.Compare(b.cs.client, a.cs.client) })
	if e.buf == nil {
		// A transaction's few new structs: size the buffer once instead of
		// growing it from nothing.
		e.buf = make([]byte, 0, runsSizeHint(runs)+tx.deleteSet.sizeHint())
	}
	e.writeVarUint(uint64(len(runs)))
	for _, r := range runs {
		d.writeClientRun(e, r.cs, r.clock)
	}
}

// deleteSetFromStore collects the deleted ranges of the whole store.
func (d *Doc) deleteSetFromStore() deleteSet {
	var ds deleteSet
	for _, cs := range d.store.order {
		c := cs.client
		var ranges []delRange
		for _, ch := range cs.chunks {
			for _, en := range ch {
				st := en.it
				if !st.deleted() {
					continue
				}
				if n := len(ranges); n > 0 && ranges[n-1].clock+ranges[n-1].length == st.id.clock {
					ranges[n-1].length += st.length // extends the previous run
				} else {
					ranges = append(ranges, delRange{st.id.clock, st.length})
				}
			}
		}
		if len(ranges) > 0 {
			ds.clients = append(ds.clients, clientDels{c, ranges})
		}
	}
	return ds
}

// EncodeStateAsUpdate encodes everything the given encoded state vector
// lacks (everything when sv is empty) as a v1 update.
func (d *Doc) EncodeStateAsUpdate(stateVector []byte) ([]byte, error) {
	sv, err := ParseStateVector(stateVector)
	if err != nil {
		return nil, err
	}
	return d.EncodeStateFrom(sv)
}

// StateVector is a decoded state vector. Decoding a large one is most of
// the cost of answering it, so a caller that holds a lock to encode can
// decode first, outside it (ParseStateVector, then EncodeStateFrom).
type StateVector struct {
	raw []byte
	m   map[uint64]int
}

// ParseStateVector decodes an encoded state vector; an empty one is the
// empty state vector.
func ParseStateVector(b []byte) (StateVector, error) {
	if len(b) == 0 {
		return StateVector{}, nil
	}
	m, err := decodeStateVector(b)
	if err != nil {
		return StateVector{}, err
	}
	return StateVector{raw: b, m: m}, nil
}

// EncodeStateFrom is EncodeStateAsUpdate with a parsed state vector.
func (d *Doc) EncodeStateFrom(state StateVector) ([]byte, error) {
	full := state.m == nil
	var hint, structs int
	switch {
	case !full:
		hint = d.encodedSizeHint(state.m)
	case d.lastFullStructs > 0:
		structs = d.StructCount()
		hint = d.fullSizeEstimate(structs)
	default:
		structs = d.StructCount()
		hint = d.encodedSizeHint(nil)
	}
	e := encoder{buf: make([]byte, 0, hint)}
	d.writeClientsStructs(&e, state.m) // a nil map reads as empty
	ds := d.deleteSetFromStore()
	ds.write(&e)
	if full {
		d.lastFullSize, d.lastFullStructs = len(e.buf), structs
	}
	if d.pendingDs == nil && d.pendingStructs == nil {
		return e.buf, nil
	}
	updates := [][]byte{e.buf}
	if d.pendingDs != nil {
		updates = append(updates, d.pendingDs)
	}
	if d.pendingStructs != nil {
		diff, err := DiffUpdate(d.pendingStructs.update, state.raw)
		if err != nil {
			return nil, err
		}
		updates = append(updates, diff)
	}
	return MergeUpdates(updates)
}

// EncodeStateVector encodes a state vector (clients in descending order, like Yjs).
func EncodeStateVector(sv map[uint64]uint64) []byte {
	var e encoder
	e.writeVarUint(uint64(len(sv)))
	for _, c := range sortedClients(sv) {
		e.writeVarUint(c)
		e.writeVarUint(sv[c])
	}
	return e.buf
}

// DecodeStateVector decodes an encoded state vector.
func DecodeStateVector(sv []byte) (map[uint64]uint64, error) {
	m, err := decodeStateVector(sv)
	if err != nil {
		return nil, err
	}
	return svToPublic(m), nil
}

func decodeStateVector(sv []byte) (map[uint64]int, error) {
	d := decoder{buf: sv}
	if len(sv) == 0 {
		return map[uint64]int{}, nil
	}
	n, err := d.readCount(2)
	if err != nil {
		return nil, fmt.Errorf("state vector: %w", err)
	}
	m := make(map[uint64]int, n)
	for i := 0; i < n; i++ {
		c, err := d.readClient()
		if err != nil {
			return nil, fmt.Errorf("state vector: %w", err)
		}
		clock, err := d.readInt()
		if err != nil {
			return nil, fmt.Errorf("state vector: %w", err)
		}
		m[c] = clock
	}
	return m, nil
}
