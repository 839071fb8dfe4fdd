package yjs

// IDSet is a set of struct ID ranges, the form of a Yjs delete set. It lets
// a caller name what one transaction inserted and delete exactly that
// later, whatever the document merged or split in between.
type IDSet struct{ ds deleteSet }

// Empty reports whether the set holds no range.
func (s *IDSet) Empty() bool { return s.ds.empty() }

// InsertedUnder returns the structs this transaction created, and did not
// delete again, at places pick accepts: pick gets the name of the root type
// a struct lies in (a nested type's content counts under its root) and,
// when that root is a map, the key of the root's entry that holds it (the
// entry itself or a type nested in it; "" in a sequence root). Structs
// whose root is unknown (a parent that was garbage collected) are never
// picked. Call it from OnAfterTransaction.
func (tx *Transaction) InsertedUnder(pick func(root, key string) bool) IDSet {
	var s IDSet
	var places placer
	for i, e := range tx.touched {
		if i >= len(tx.afterState) {
			break
		}
		cs := tx.doc.store.clients[e.client]
		from, to := e.clock, tx.afterState[i].clock
		if cs == nil || from >= to {
			continue
		}
		for idx := max(cs.findIndex(from), 0); idx < cs.len(); idx++ {
			it := cs.at(idx)
			if it.id.clock >= to {
				break
			}
			if it.deleted() { // GC structs too; a nil parent fails rootOf
				continue
			}
			if pl := places.of(it); pl.ok && pick(pl.root, pl.key) {
				start := max(it.id.clock, from)
				s.ds.add(e.client, start, min(it.id.clock+it.length, to)-start)
			}
		}
	}
	s.ds.sortAndMerge()
	return s
}

// DeletedUnder reports whether this transaction deleted a struct that
// existed before it at a place pick accepts (as for InsertedUnder), or
// whose root is unknown. Call it from OnAfterTransaction, before the deleted
// content is garbage collected.
func (tx *Transaction) DeletedUnder(pick func(root, key string) bool) bool {
	var places placer
	for _, cd := range tx.deleteSet.clients {
		cs := tx.doc.store.clients[cd.client]
		before := tx.before(cd.client)
		for _, r := range cd.dels {
			end := min(r.clock+r.length, before) // what existed before
			if cs == nil || r.clock >= end {
				continue
			}
			for idx := max(cs.findIndex(r.clock), 0); idx < cs.len(); idx++ {
				it := cs.at(idx)
				if it.id.clock >= end {
					break
				}
				if it.isGC() {
					continue // collected before this transaction
				}
				if pl := places.of(it); !pl.ok || pick(pl.root, pl.key) {
					return true
				}
			}
		}
	}
	return false
}

// DeleteIDs deletes the structs of s that the document holds and has not
// deleted yet, in one transaction (or the running one).
func (d *Doc) DeleteIDs(s IDSet, origin any) {
	if s.Empty() {
		return
	}
	d.transact(func(tx *Transaction) { d.applyDeleteSet(tx, &s.ds) }, origin, true)
}

// place is where a struct lies: its root type and, for a map root, the
// key of the root's entry that holds it (see InsertedUnder).
type place struct {
	root, key string
	ok        bool
}

// placer finds the place of structs, remembering it per parent type: the
// structs of one update often lie in a chain of nested types, and walking
// up to the root for each of them would cost the square of the nesting
// depth (a hostile update nested 80,000 deep took minutes).
type placer struct {
	memo  map[*typeBase]place
	steps int // parents walked, for a test that the total stays linear
}

// of returns the place of it.
func (p *placer) of(it *item) place {
	tb := it.parent
	if tb == nil {
		return place{}
	}
	if tb.item == nil { // an entry of a root, or a struct of a sequence root
		pl := place{key: it.parentSub}
		pl.root, pl.ok = rootOf(tb)
		return pl
	}
	if pl, hit := p.memo[tb]; hit {
		return pl
	}
	// Walk up to a type whose place is known or that lies in a root, then
	// record the place for every type passed.
	var chain []*typeBase
	var pl place
	for {
		chain = append(chain, tb)
		p.steps++
		up := tb.item.parent
		if up == nil {
			break // garbage collected: unknown (ok false)
		}
		if up.item == nil {
			pl = place{key: tb.item.parentSub}
			pl.root, pl.ok = rootOf(up)
			break
		}
		if known, hit := p.memo[up]; hit {
			pl = known
			break
		}
		tb = up
	}
	if p.memo == nil {
		p.memo = map[*typeBase]place{}
	}
	for _, c := range chain {
		p.memo[c] = pl
	}
	return pl
}
