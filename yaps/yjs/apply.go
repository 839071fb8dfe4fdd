package yjs

import (
	"fmt"
	"slices"
)

// ApplyUpdate applies a v1 update. Updates may arrive out of order or more
// than once: structs whose dependencies are missing wait in a pending set
// (and deletes of unknown structs in a pending delete set) until the
// missing updates arrive. Malformed input returns an error wrapping
// ErrMalformed or ErrUnexpectedEOF; input that fails to decode leaves the
// document unchanged.
func (d *Doc) ApplyUpdate(update []byte, origin any) error {
	du, err := decodeUpdate(update)
	if err != nil {
		return err
	}
	return d.applyUpdate(du, origin)
}

// Update is an update decoded once, for a caller that looks at its structs
// (Ends, Doc.HoldsDecoded) before it applies it (Doc.ApplyWhole), or that
// decodes outside a lock it checks under: decoding is most of what either
// costs.
type Update struct {
	data []byte
	du   *decodedUpdate // nil once a document integrated it, or malformed
	err  error
	ends []ClientClock
}

// ClientClock is a client ID and a clock.
type ClientClock struct{ Client, Clock uint64 }

// DecodeUpdate decodes a v1 update. A malformed one is kept with its error
// (Err), which ApplyWhole returns.
func DecodeUpdate(update []byte) *Update {
	u := &Update{data: update}
	u.du, u.err = decodeUpdate(update)
	if u.err != nil {
		return u
	}
	for _, b := range u.du.blocks {
		if len(b.refs) > 0 {
			u.ends = append(u.ends, ClientClock{b.client, uint64(b.end())})
		}
	}
	return u
}

// decoded returns u's decoded structs, decoding its bytes again when a
// document took them or they were released.
func (u *Update) decoded() (*decodedUpdate, error) {
	if u.err != nil || u.du != nil {
		return u.du, u.err
	}
	return decodeUpdate(u.data)
}

// Release drops the decoded structs and keeps the rest (Bytes, Ends):
// ApplyWhole then decodes the update again. For a caller that holds many
// large updates before it applies them.
func (u *Update) Release() {
	if u.err == nil {
		u.du = nil
	}
}

// Bytes returns the encoded update.
func (u *Update) Bytes() []byte { return u.data }

// Err is the error decoding the update gave, nil when it is well formed.
func (u *Update) Err() error { return u.err }

// Ends returns, per client the update holds structs of, the end clock of
// those structs (one past the last), as ParseUpdateMeta's to. Do not
// modify it.
func (u *Update) Ends() []ClientClock { return u.ends }

// ApplyWhole is ApplyUpdateWhole for a decoded update. Integrating an
// update links its decoded structs into d, so an update applied once is
// decoded again when applied to another document (or to d again).
func (d *Doc) ApplyWhole(u *Update, origin any) (applied bool, err error) {
	du, err := u.decoded()
	if err != nil {
		return false, err
	}
	if !d.integrable(du) {
		return false, nil // du is untouched
	}
	u.du = nil
	return true, d.applyUpdate(du, origin)
}

// ApplyUpdateWhole applies update only if all of it integrates now: every
// struct's dependencies are in d or in the update, and every delete names
// structs that d or the update holds. Otherwise it leaves d unchanged and
// reports false, where ApplyUpdate would integrate what it can and keep
// the rest pending. A duplicate applies (and changes nothing). Malformed
// input is an error, as for ApplyUpdate.
func (d *Doc) ApplyUpdateWhole(update []byte, origin any) (applied bool, err error) {
	du, err := decodeUpdate(update)
	if err != nil {
		return false, err
	}
	if !d.integrable(du) {
		return false, nil
	}
	return true, d.applyUpdate(du, origin)
}

// integrable reports whether all of du would integrate into d now. It
// plays integrateStructs forward on clocks alone, one struct at a time: a
// struct integrates once its own client has reached its clock and its
// origins and parent are known. A struct waiting on another client of du
// has that client's next struct taken first, then is tried again (a
// stack, as in integrateStructs). It waits for good when its own client
// has a gap, or what it waits on is not in du, is used up, or is on the
// stack, waiting on it in turn. Then ApplyUpdate would keep it pending
// (checked against ApplyUpdate by TestApplyUpdateWhole).
func (d *Doc) integrable(du *decodedUpdate) bool {
	ck := integrableCheck{store: &d.store, blocks: du.blocks}
	var buf [4]blockProgress // most updates hold one or two clients
	if len(du.blocks) <= len(buf) {
		ck.progress = buf[:len(du.blocks)]
	} else {
		ck.progress = make([]blockProgress, len(du.blocks))
		ck.byClient = make(map[uint64]int, len(du.blocks))
		for i, b := range du.blocks {
			ck.byClient[b.client] = i
		}
	}
	var stack []int
	for start := range ck.blocks {
		stack = append(stack[:0], start)
		ck.progress[start].onStack = true
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			result, waits := ck.step(top)
			switch result {
			case stepStuck:
				return false
			case stepUsedUp:
				stack = stack[:len(stack)-1]
				ck.progress[top].onStack = false
			case stepMoved:
				if len(stack) > 1 { // the struct below waited for this one: try it again
					stack = stack[:len(stack)-1]
					ck.progress[top].onStack = false
				}
			case stepWaiting:
				wi := ck.find(waits)
				if wi < 0 || ck.progress[wi].onStack || ck.progress[wi].next == len(ck.blocks[wi].refs) {
					return false
				}
				stack = append(stack, wi)
				ck.progress[wi].onStack = true
			}
		}
	}
	for _, cd := range du.ds.clients {
		for _, r := range cd.dels {
			if r.length > 0 && r.clock+r.length > ck.state(cd.client) {
				return false
			}
		}
	}
	return true
}

// integrableCheck is the state of integrable.
type integrableCheck struct {
	store    *structStore
	blocks   []*clientRefs
	byClient map[uint64]int // block of each client, for big updates
	progress []blockProgress
}

// blockProgress is how far integrable got through one block.
type blockProgress struct {
	next    int  // index of the next struct
	reached int  // clock the block's structs reached
	onStack bool // a struct further up the stack waits for it
}

const (
	stepMoved = iota
	stepUsedUp
	stepWaiting
	stepStuck
)

// find returns the block of client c (decoding refuses a repeated
// client), -1 for none.
func (ck *integrableCheck) find(c uint64) int {
	if ck.byClient != nil {
		if i, ok := ck.byClient[c]; ok {
			return i
		}
		return -1
	}
	for i := len(ck.blocks) - 1; i >= 0; i-- {
		if ck.blocks[i].client == c {
			return i
		}
	}
	return -1
}

// state is c's clock in the store with the structs of du taken so far.
func (ck *integrableCheck) state(c uint64) int {
	s := ck.store.getState(c)
	if i := ck.find(c); i >= 0 && ck.progress[i].reached > s {
		return ck.progress[i].reached
	}
	return s
}

// step takes block bi's next struct: it integrates (or is skipped), or
// waits on client waits, or is stuck for good on a gap in its clocks.
func (ck *integrableCheck) step(bi int) (result int, waits uint64) {
	b, p := ck.blocks[bi], &ck.progress[bi]
	if p.next == len(b.refs) {
		return stepUsedUp, 0
	}
	r := &b.refs[p.next]
	if it := r.it; it.content.kind != kindSkip {
		c := it.id.client
		offset := ck.state(c) - it.id.clock
		if offset < 0 {
			return stepStuck, 0
		}
		if offset < it.length && !it.isGC() {
			if it.hasOrigin() && !ck.known(it.origin, c) {
				return stepWaiting, it.origin.client
			}
			if it.hasRightOrigin() && !ck.known(it.rightOrigin, c) {
				return stepWaiting, it.rightOrigin.client
			}
			if r.pr.kind == parentByID && !ck.known(r.pr.id, c) {
				return stepWaiting, r.pr.id.client
			}
		}
		p.reached = max(p.reached, it.id.clock+it.length)
	}
	p.next++
	return stepMoved, 0
}

// known reports whether struct ref, referred to by a struct of client
// self, is there (a client's own earlier structs always are).
func (ck *integrableCheck) known(ref id, self uint64) bool {
	return ref.client == self || ref.clock < ck.state(ref.client)
}

func (d *Doc) applyUpdate(du *decodedUpdate, origin any) (err error) {
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
	slices.Sort(ids)

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
				// The origins of structs the document already has are
				// resolved too, as Yjs does: that splits the items they
				// point into, which a gc:false document keeps split (a
				// surrogate pair cut so becomes two U+FFFD, as in Yjs), so
				// its state encodes to Yjs's bytes.
				if !it.isGC() {
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
	var buf [4]clientDels // an update's few clients, on the stack
	for _, cd := range ds.sorted(buf[:0]) {
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
