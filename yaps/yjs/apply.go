package yjs

import (
	"fmt"
	"sort"
)

// ApplyUpdate applies a v1 update. Updates may arrive out of order or more
// than once: structs whose dependencies are missing wait in a pending set
// (and deletes of unknown structs in a pending delete set) until the
// missing updates arrive. Malformed input returns an error wrapping
// ErrMalformed or ErrUnexpectedEOF; input that fails to decode leaves the
// document unchanged.
func (d *Doc) ApplyUpdate(update []byte, origin any) (err error) {
	du, err := decodeUpdate(update)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: update could not be integrated: %v", ErrMalformed, r)
		}
	}()
	d.transact(func(tx *Transaction) {
		tx.local = false
		d.applyDecoded(tx, du)
	}, origin, false)
	return nil
}

func (d *Doc) applyDecoded(tx *Transaction, du *decodedUpdate) {
	store := &d.store
	rest := d.integrateStructs(tx, du.blocks)
	retry := false
	if p := d.pendingStructs; p != nil {
		for client, clock := range p.missing {
			if clock < store.getState(client) {
				retry = true
				break
			}
		}
		if rest != nil {
			for client, clock := range rest.missing {
				if m, ok := p.missing[client]; !ok || m > clock {
					p.missing[client] = clock
				}
			}
			p.update = mustMerge(p.update, rest.update)
		}
	} else {
		d.pendingStructs = rest
	}
	dsRest := d.applyDeleteSet(tx, &du.ds)
	if d.pendingDs != nil {
		pds, err := decodeUpdateRaw(d.pendingDs)
		var dsRest2 []byte
		if err == nil {
			dsRest2 = d.applyDeleteSet(tx, &pds.ds)
		}
		switch {
		case dsRest != nil && dsRest2 != nil:
			d.pendingDs = mustMerge(dsRest, dsRest2)
		case dsRest != nil:
			d.pendingDs = dsRest
		default:
			d.pendingDs = dsRest2
		}
	} else {
		d.pendingDs = dsRest
	}
	if retry {
		upd := d.pendingStructs.update
		d.pendingStructs = nil
		if pu, err := decodeUpdate(upd); err == nil {
			d.applyDecoded(tx, pu)
		}
	}
}

func mustMerge(a, b []byte) []byte {
	out, err := MergeUpdates([][]byte{a, b})
	if err != nil {
		panic(err) // both were produced by this package
	}
	return out
}

// integrateStructs integrates decoded structs in causal order (Yjs
// integrateStructs) and returns what could not be integrated yet.
func (d *Doc) integrateStructs(tx *Transaction, blocks []*clientRefs) *pendingStructs {
	if len(blocks) == 0 {
		return nil
	}
	store := &d.store
	// most updates hold one or two clients: look them up linearly and only
	// build a map for big updates
	var byClientMap map[uint64]*clientRefs
	if len(blocks) > 8 {
		byClientMap = make(map[uint64]*clientRefs, len(blocks))
		for _, b := range blocks {
			byClientMap[b.client] = b // a repeated client overwrites, like Yjs
		}
	}
	byClient := func(c uint64) *clientRefs {
		if byClientMap != nil {
			return byClientMap[c]
		}
		for i := len(blocks) - 1; i >= 0; i-- {
			if blocks[i].client == c {
				if blocks[i].removed {
					return nil
				}
				return blocks[i]
			}
		}
		return nil
	}
	ids := make([]uint64, 0, len(blocks))
	for _, b := range blocks {
		if byClient(b.client) == b {
			ids = append(ids, b.client)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })

	nextTarget := func() *clientRefs {
		for len(ids) > 0 {
			t := byClient(ids[len(ids)-1])
			if t != nil && t.i < len(t.refs) {
				return t
			}
			ids = ids[:len(ids)-1]
		}
		return nil
	}
	cur := nextTarget()
	if cur == nil {
		return nil
	}
	var stack []*structRef
	var rest map[uint64][]structRef
	var missingSV map[uint64]int
	updateMissing := func(client uint64, clock int) {
		if missingSV == nil {
			missingSV = map[uint64]int{}
		}
		if m, ok := missingSV[client]; !ok || m > clock {
			missingSV[client] = clock
		}
	}
	addStackToRest := func() {
		if rest == nil {
			rest = map[uint64][]structRef{}
		}
		for _, r := range stack {
			client := r.it.id.client
			if un := byClient(client); un != nil {
				un.i--
				rest[client] = un.refs[un.i:]
				if byClientMap != nil {
					delete(byClientMap, client)
				}
				un.removed = true
				un.i = 0
				un.refs = nil
			} else {
				rest[client] = []structRef{*r}
			}
			kept := ids[:0]
			for _, c := range ids {
				if c != client {
					kept = append(kept, c)
				}
			}
			ids = kept
		}
		stack = stack[:0]
	}
	head := &cur.refs[cur.i]
	cur.i++
	for {
		it := head.it
		if it.content.kind != kindSkip {
			offset := store.getState(it.id.client) - it.id.clock
			if offset < 0 {
				stack = append(stack, head)
				updateMissing(it.id.client, it.id.clock-1)
				addStackToRest()
			} else {
				var missing uint64
				found := true
				// Yjs also resolves origins of structs it already has; that
				// only re-splits boundaries it merges back anyway, but with
				// corrupt origins it can split a surrogate pair, so skip it.
				if !it.isGC() && offset < it.length {
					missing, found = it.getMissing(tx, store, &head.pr)
				}
				if !found {
					stack = append(stack, head)
					refs := byClient(missing)
					if refs == nil || refs.i == len(refs.refs) {
						updateMissing(missing, store.getState(missing))
						addStackToRest()
					} else {
						head = &refs.refs[refs.i]
						refs.i++
						continue
					}
				} else if offset == 0 || offset < it.length {
					if it.isGC() {
						gc := &item{id: id{it.id.client, it.id.clock + offset}, length: it.length - offset, info: flagDeleted}
						tx.touch(gc.id.client)
						store.addStruct(gc)
					} else {
						it.integrate(tx, offset)
					}
				}
			}
		}
		if len(stack) > 0 {
			head = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		} else if cur != nil && cur.i < len(cur.refs) {
			head = &cur.refs[cur.i]
			cur.i++
		} else {
			cur = nextTarget()
			if cur == nil {
				break
			}
			head = &cur.refs[cur.i]
			cur.i++
		}
	}
	if len(rest) == 0 {
		return nil
	}
	var e encoder
	e.writeVarUint(uint64(len(rest)))
	for _, c := range sortedClients(rest) {
		refs := rest[c]
		e.writeVarUint(uint64(len(refs)))
		e.writeVarUint(c)
		e.writeVarUint(uint64(refs[0].it.id.clock))
		for i := range refs {
			writeStruct(&e, refs[i].it, &refs[i].pr, 0)
		}
	}
	e.writeVarUint(0)
	return &pendingStructs{missing: missingSV, update: e.buf}
}

// applyDeleteSet deletes the ranges of ds that the store knows and returns
// the rest encoded as an update (nil if everything applied).
func (d *Doc) applyDeleteSet(tx *Transaction, ds *deleteSet) []byte {
	var unapplied deleteSet
	store := &d.store
	for _, cd := range ds.sorted() {
		client := cd.client
		cs := store.clients[client]
		state := store.getState(client)
		for _, r := range cd.dels {
			clock, end := r.clock, r.clock+r.length
			if r.length == 0 {
				continue
			}
			if clock >= state {
				unapplied.add(client, clock, end-clock)
				continue
			}
			if state < end {
				unapplied.add(client, state, end-state)
			}
			idx := cs.findIndex(clock)
			if idx < 0 {
				continue
			}
			st := cs.at(idx)
			if !st.deleted() && st.id.clock < clock {
				cs.insertAt(idx+1, splitItem(tx, st, clock-st.id.clock))
				idx++
			}
			for idx < cs.len() {
				st = cs.at(idx)
				idx++
				if st.id.clock >= end {
					break
				}
				if !st.deleted() {
					if end < st.id.clock+st.length {
						cs.insertAt(idx, splitItem(tx, st, end-st.id.clock))
					}
					st.delete(tx)
				}
			}
		}
	}
	if unapplied.empty() {
		return nil
	}
	var e encoder
	e.writeVarUint(0)
	unapplied.write(&e)
	return e.buf
}
