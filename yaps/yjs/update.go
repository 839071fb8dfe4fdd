package yjs

import (
	"fmt"
	"sort"
)

const (
	parentNone uint8 = iota
	parentByName
	parentByID
)

// parentRef is the parent of a decoded item before it is integrated.
type parentRef struct {
	kind uint8
	name string
	id   id
}

// structRef is a decoded struct (Item, GC or Skip) that is not part of a
// document yet.
type structRef struct {
	it *item
	pr parentRef
}

// clientRefs is one client's run of structs in an update.
type clientRefs struct {
	client  uint64
	refs    []structRef
	i       int
	removed bool // moved to the pending set during integration
}

// end is the clock one past the block's last struct; the block holds some.
func (b *clientRefs) end() int {
	last := b.refs[len(b.refs)-1].it
	return last.id.clock + last.length
}

// decodedUpdate is a fully decoded v1 update.
type decodedUpdate struct {
	blocks []*clientRefs
	ds     deleteSet
}

func decodeUpdate(update []byte) (*decodedUpdate, error) { return decodeUpdateMode(update, false) }

// decodeUpdateRaw decodes an update for re-encoding only: Any and JSON
// values are validated but not built.
func decodeUpdateRaw(update []byte) (*decodedUpdate, error) { return decodeUpdateMode(update, true) }

func decodeUpdateMode(update []byte, raw bool) (*decodedUpdate, error) {
	d := decoder{buf: update, raw: raw}
	blocks, err := readClientsStructRefs(&d)
	if err != nil {
		return nil, err
	}
	ds, err := readDeleteSet(&d)
	if err != nil {
		return nil, fmt.Errorf("delete set: %w", err)
	}
	return &decodedUpdate{blocks: blocks, ds: ds}, nil
}

func readClientsStructRefs(d *decoder) ([]*clientRefs, error) {
	n, err := d.readCount(3)
	if err != nil {
		return nil, err
	}
	blocks := make([]*clientRefs, 0, n)
	var seen map[uint64]struct{} // built once there are many clients
	for b := 0; b < n; b++ {
		count, err := d.readCount(2)
		if err != nil {
			return nil, err
		}
		client, err := d.readClient()
		if err != nil {
			return nil, err
		}
		clock, err := d.readInt()
		if err != nil {
			return nil, err
		}
		// Yjs writes each client once per update; a repeated client is
		// read inconsistently by Yjs itself (applying vs merging), so refuse it.
		dup := false
		if seen != nil {
			_, dup = seen[client]
			seen[client] = struct{}{}
		} else {
			for _, prev := range blocks {
				dup = dup || prev.client == client
			}
			if len(blocks) == 16 {
				seen = make(map[uint64]struct{}, n)
				for _, prev := range blocks {
					seen[prev.client] = struct{}{}
				}
				seen[client] = struct{}{}
			}
		}
		if dup {
			return nil, fmt.Errorf("%w: client %d appears twice", ErrMalformed, client)
		}
		// Memory grows with the structs actually decoded, not with the
		// claimed count, so a lying count fails before it costs anything.
		cr := &clientRefs{client: client, refs: make([]structRef, 0, min(count, 1<<16))}
		var slab []item // items are allocated in blocks
		for i := 0; i < count; i++ {
			if len(slab) == 0 {
				slab = make([]item, min(count-i, 1024))
			}
			it := &slab[0]
			slab = slab[1:]
			it.id = id{client, clock}
			cr.refs = append(cr.refs, structRef{it: it})
			r := &cr.refs[len(cr.refs)-1]
			if err := readStruct(d, it, &r.pr); err != nil {
				return nil, fmt.Errorf("struct %d:%d: %w", client, clock, err)
			}
			clock += it.length
			if clock > maxSafeInteger {
				return nil, fmt.Errorf("%w: clock overflow", ErrMalformed)
			}
		}
		blocks = append(blocks, cr)
	}
	return blocks, nil
}

func readStruct(d *decoder, it *item, pr *parentRef) error {
	info, err := d.readByte()
	if err != nil {
		return err
	}
	kind := info & 0x1f
	switch kind {
	case kindGC, kindSkip:
		n, err := d.readInt()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: empty struct", ErrMalformed)
		}
		it.length = n
		it.content.kind = kind
		it.info = flagDeleted
		return nil
	}
	if info&0x80 != 0 {
		if it.origin, err = readID(d); err != nil {
			return err
		}
		it.info |= flagHasOrigin
	}
	if info&0x40 != 0 {
		if it.rightOrigin, err = readID(d); err != nil {
			return err
		}
		it.info |= flagHasRightOrigin
	}
	if info&0xc0 == 0 {
		byName, err := d.readVarUint()
		if err != nil {
			return err
		}
		if byName == 1 {
			pr.kind = parentByName
			if pr.name, err = d.readVarString(); err != nil {
				return err
			}
		} else {
			pr.kind = parentByID
			if pr.id, err = readID(d); err != nil {
				return err
			}
		}
		if info&0x20 != 0 {
			if it.parentSub, err = d.readVarString(); err != nil {
				return err
			}
			it.info |= flagHasParentSub
		}
	}
	// A struct can only point at earlier structs of its own client; Yjs
	// crashes on anything else, we reject it up front.
	if it.hasOrigin() && it.origin.client == it.id.client && it.origin.clock >= it.id.clock ||
		it.hasRightOrigin() && it.rightOrigin.client == it.id.client && it.rightOrigin.clock >= it.id.clock ||
		pr.kind == parentByID && pr.id.client == it.id.client && pr.id.clock >= it.id.clock {
		return fmt.Errorf("%w: struct refers to a later struct of its own client", ErrMalformed)
	}
	c, n, err := readContent(d, kind)
	if err != nil {
		return err
	}
	it.content = c
	it.length = n
	if c.countable() {
		it.info |= flagCountable
	}
	return nil
}

func readID(d *decoder) (id, error) {
	c, err := d.readClient()
	if err != nil {
		return id{}, err
	}
	clock, err := d.readInt()
	return id{c, clock}, err
}

// lazyWriter writes structs grouped in per-client runs whose count is only
// known at the end (Yjs LazyStructWriter).
type lazyWriter struct {
	runs    []encoder
	counts  []int
	cur     encoder
	client  uint64
	written int
}

func (w *lazyWriter) flush() {
	if w.written > 0 {
		w.runs = append(w.runs, w.cur)
		w.counts = append(w.counts, w.written)
		w.cur = encoder{}
		w.written = 0
	}
}

func (w *lazyWriter) write(r *structRef, offset int) {
	if w.written > 0 && w.client != r.it.id.client {
		w.flush()
	}
	if w.written == 0 {
		w.client = r.it.id.client
		w.cur.writeVarUint(r.it.id.client)
		w.cur.writeVarUint(uint64(r.it.id.clock + offset))
	}
	writeStruct(&w.cur, r.it, &r.pr, offset)
	w.written++
}

func (w *lazyWriter) finish(e *encoder) {
	w.flush()
	e.writeVarUint(uint64(len(w.runs)))
	for i, run := range w.runs {
		e.writeVarUint(uint64(w.counts[i]))
		e.buf = append(e.buf, run.buf...)
	}
}

// structReader iterates over the structs of a decoded update.
type structReader struct {
	blocks      []*clientRefs
	b, i        int
	filterSkips bool
	curr        *structRef
}

func newStructReader(u *decodedUpdate, filterSkips bool) *structReader {
	r := &structReader{blocks: u.blocks, filterSkips: filterSkips, i: -1}
	r.next()
	return r
}

func (r *structReader) next() *structRef {
	for {
		r.i++
		for r.b < len(r.blocks) && r.i >= len(r.blocks[r.b].refs) {
			r.b++
			r.i = 0
		}
		if r.b >= len(r.blocks) {
			r.curr = nil
			return nil
		}
		r.curr = &r.blocks[r.b].refs[r.i]
		if !r.filterSkips || r.curr.it.content.kind != kindSkip {
			return r.curr
		}
	}
}

// sliceRef returns the part of r from diff on (Yjs sliceStruct).
func sliceRef(r *structRef, diff int) *structRef {
	it := r.it
	n := &item{id: id{it.id.client, it.id.clock + diff}, length: it.length - diff}
	if it.content.kind == kindGC || it.content.kind == kindSkip {
		n.content.kind = it.content.kind
		n.info = flagDeleted
		return &structRef{it: n}
	}
	n.origin = id{it.id.client, it.id.clock + diff - 1}
	n.rightOrigin = it.rightOrigin
	n.parentSub = it.parentSub
	n.info = it.info&(flagHasRightOrigin|flagHasParentSub|flagCountable) | flagHasOrigin
	c := it.content
	if c.kind == kindAny || c.kind == kindJSON { // do not disturb the shared original
		c.ext = &contentExt{vals: c.ext.vals, raw: c.ext.raw}
	}
	n.content = c.splice(diff, it.length)
	return &structRef{it: n, pr: r.pr}
}

// mergeRefs is mergeWith for raw structs: only GC and Skip runs merge,
// because Yjs compares the (unset) right pointers of lazily read items.
func mergeRefs(l, r *structRef) bool {
	k := l.it.content.kind
	if (k == kindGC || k == kindSkip) && r.it.content.kind == k {
		l.it.length += r.it.length
		return true
	}
	return false
}

// MergeUpdates merges v1 updates into one without a document, producing the
// same bytes as Y.mergeUpdates, but for one case: where two updates hold an
// Item and a GC struct for the same id (a gc:false and a gc:true replica's
// state), Yjs's comparator ranks each before the other and which one it
// keeps depends on the order its engine's sort compares them in, and the
// choice here may differ. Either result is a valid update with the same
// content.
func MergeUpdates(updates [][]byte) ([]byte, error) {
	if len(updates) == 1 {
		if _, err := decodeUpdateRaw(updates[0]); err != nil {
			return nil, err
		}
		return updates[0], nil
	}
	decoded := make([]*decodedUpdate, len(updates))
	for i, u := range updates {
		du, err := decodeUpdateRaw(u)
		if err != nil {
			return nil, fmt.Errorf("update %d: %w", i, err)
		}
		decoded[i] = du
	}
	return mergeDecoded(decoded), nil
}

func mergeDecoded(decoded []*decodedUpdate) []byte {
	readers := make([]*structReader, len(decoded))
	for i, du := range decoded {
		readers[i] = newStructReader(du, true)
	}
	type pending struct {
		r      *structRef
		offset int
	}
	var currWrite *pending
	var w lazyWriter
	for {
		live := readers[:0]
		for _, r := range readers {
			if r.curr != nil {
				live = append(live, r)
			}
		}
		readers = live
		if len(readers) == 0 {
			break
		}
		sort.SliceStable(readers, func(i, j int) bool {
			a, b := readers[i].curr.it, readers[j].curr.it
			if a.id.client == b.id.client {
				if a.id.clock == b.id.clock {
					return a.content.kind != kindSkip && b.content.kind == kindSkip
				}
				return a.id.clock < b.id.clock
			}
			return a.id.client > b.id.client
		})
		cd := readers[0]
		firstClient := cd.curr.it.id.client
		if currWrite != nil {
			curr := cd.curr
			iterated := false
			cw := currWrite.r.it
			for curr != nil && curr.it.id.clock+curr.it.length <= cw.id.clock+cw.length && curr.it.id.client >= cw.id.client {
				curr = cd.next()
				iterated = true
			}
			if curr == nil || curr.it.id.client != firstClient || (iterated && curr.it.id.clock > cw.id.clock+cw.length) {
				continue
			}
			if firstClient != cw.id.client {
				w.write(currWrite.r, currWrite.offset)
				currWrite = &pending{r: curr}
				cd.next()
			} else if cw.id.clock+cw.length < curr.it.id.clock {
				if cw.content.kind == kindSkip {
					cw.length = curr.it.id.clock + curr.it.length - cw.id.clock
				} else {
					w.write(currWrite.r, currWrite.offset)
					diff := curr.it.id.clock - cw.id.clock - cw.length
					skip := &item{id: id{firstClient, cw.id.clock + cw.length}, length: diff, info: flagDeleted}
					skip.content.kind = kindSkip
					currWrite = &pending{r: &structRef{it: skip}}
				}
			} else {
				diff := cw.id.clock + cw.length - curr.it.id.clock
				if diff > 0 {
					if cw.content.kind == kindSkip {
						cw.length -= diff
					} else {
						curr = sliceRef(curr, diff)
					}
				}
				if !mergeRefs(currWrite.r, curr) {
					w.write(currWrite.r, currWrite.offset)
					currWrite = &pending{r: curr}
					cd.next()
				}
			}
		} else {
			currWrite = &pending{r: cd.curr}
			cd.next()
		}
		for next := cd.curr; next != nil && next.it.id.client == firstClient &&
			next.it.id.clock == currWrite.r.it.id.clock+currWrite.r.it.length && next.it.content.kind != kindSkip; next = cd.next() {
			w.write(currWrite.r, currWrite.offset)
			currWrite = &pending{r: next}
		}
	}
	if currWrite != nil {
		w.write(currWrite.r, currWrite.offset)
	}
	var e encoder
	w.finish(&e)
	var ds deleteSet
	for _, du := range decoded {
		for _, cd := range du.ds.clients {
			for _, r := range cd.dels {
				ds.add(cd.client, r.clock, r.length)
			}
		}
	}
	ds.sortAndMerge()
	ds.write(&e)
	return e.buf
}

// DiffUpdate returns the part of update that the encoded state vector
// lacks, like Y.diffUpdate.
func DiffUpdate(update, stateVector []byte) ([]byte, error) {
	sv, err := decodeStateVector(stateVector)
	if err != nil {
		return nil, err
	}
	du, err := decodeUpdateRaw(update)
	if err != nil {
		return nil, err
	}
	var w lazyWriter
	r := newStructReader(du, false)
	for r.curr != nil {
		curr := r.curr
		client := curr.it.id.client
		svClock := sv[client]
		if curr.it.content.kind == kindSkip {
			r.next()
			continue
		}
		if curr.it.id.clock+curr.it.length > svClock {
			w.write(curr, max(svClock-curr.it.id.clock, 0))
			r.next()
			for r.curr != nil && r.curr.it.id.client == client {
				w.write(r.curr, 0)
				r.next()
			}
		} else {
			for r.curr != nil && r.curr.it.id.client == client && r.curr.it.id.clock+r.curr.it.length <= svClock {
				r.next()
			}
		}
	}
	var e encoder
	w.finish(&e)
	du.ds.write(&e)
	return e.buf, nil
}

// ParseUpdateMeta returns, per client, the first clock (from) and the end
// clock (to, one past the last) of the structs an update holds, like
// Y.parseUpdateMeta. Unlike EncodeStateVectorFromUpdate it also reports
// structs that do not start at clock 0, which an update applied out of
// order holds.
func ParseUpdateMeta(update []byte) (from, to map[uint64]uint64, err error) {
	du, err := decodeUpdateRaw(update)
	if err != nil {
		return nil, nil, err
	}
	from, to = map[uint64]uint64{}, map[uint64]uint64{}
	// readClientsStructRefs refuses a repeated client, so each client's
	// structs are one block, in clock order.
	for _, b := range du.blocks {
		if len(b.refs) == 0 {
			continue
		}
		from[b.client] = uint64(b.refs[0].it.id.clock)
		to[b.client] = uint64(b.end())
	}
	return from, to, nil
}

// EncodeStateVectorFromUpdate computes the state vector an update would
// produce on an empty document, like Y.encodeStateVectorFromUpdate.
func EncodeStateVectorFromUpdate(update []byte) ([]byte, error) {
	du, err := decodeUpdateRaw(update)
	if err != nil {
		return nil, err
	}
	var body encoder
	size := 0
	r := newStructReader(du, false)
	if r.curr != nil {
		currClient := r.curr.it.id.client
		stop := r.curr.it.id.clock != 0
		currClock := 0
		if !stop {
			currClock = r.curr.it.id.clock + r.curr.it.length
		}
		for ; r.curr != nil; r.next() {
			it := r.curr.it
			if currClient != it.id.client {
				if currClock != 0 {
					size++
					body.writeVarUint(currClient)
					body.writeVarUint(uint64(currClock))
				}
				currClient = it.id.client
				currClock = 0
				stop = it.id.clock != 0
			}
			if it.content.kind == kindSkip {
				stop = true
			}
			if !stop {
				currClock = it.id.clock + it.length
			}
		}
		if currClock != 0 {
			size++
			body.writeVarUint(currClient)
			body.writeVarUint(uint64(currClock))
		}
	}
	var e encoder
	e.writeVarUint(uint64(size))
	e.buf = append(e.buf, body.buf...)
	return e.buf, nil
}
