package yjs

// getMissing resolves origins and parent of a freshly decoded item. It
// returns the client whose structs are still missing, or ok=true.
func (it *item) getMissing(tx *Transaction, s *structStore, pr *parentRef) (missing uint64, ok bool) {
	if it.hasOrigin() && it.origin.client != it.id.client && it.origin.clock >= s.getState(it.origin.client) {
		return it.origin.client, false
	}
	if it.hasRightOrigin() && it.rightOrigin.client != it.id.client && it.rightOrigin.clock >= s.getState(it.rightOrigin.client) {
		return it.rightOrigin.client, false
	}
	if pr.kind == parentByID && it.id.client != pr.id.client && pr.id.clock >= s.getState(pr.id.client) {
		return pr.id.client, false
	}
	if it.hasOrigin() {
		if it.left = s.getItemCleanEnd(tx, it.origin); it.left == nil {
			return it.invalidRef()
		}
		it.origin = it.left.lastID()
	}
	if it.hasRightOrigin() {
		if it.right = s.getItemCleanStart(tx, it.rightOrigin); it.right == nil {
			return it.invalidRef()
		}
		it.rightOrigin = it.right.id
	}
	switch {
	case it.left != nil && it.left.isGC() || it.right != nil && it.right.isGC():
		it.parent = nil
	case pr.kind == parentNone:
		if it.left != nil {
			it.parent = it.left.parent
			it.parentSub = it.left.parentSub
			it.info = it.info&^flagHasParentSub | it.left.info&flagHasParentSub
		} else if it.right != nil {
			it.parent = it.right.parent
			it.parentSub = it.right.parentSub
			it.info = it.info&^flagHasParentSub | it.right.info&flagHasParentSub
		}
	case pr.kind == parentByID:
		p := s.find(pr.id)
		if p == nil || p.isGC() || p.content.kind != kindType {
			it.parent = nil
		} else {
			it.parent = p.content.ext.typ
		}
	case pr.kind == parentByName:
		it.parent = tx.doc.rootType(pr.name)
	}
	return 0, true
}

// invalidRef handles an origin that can never exist (a hostile update
// pointing forward into its own client): the item is kept as a GC range so
// clocks stay consistent.
func (it *item) invalidRef() (uint64, bool) {
	it.left, it.right, it.parent = nil, nil, nil
	return 0, true
}

// integrate places the item into its parent's list using YATA conflict
// resolution and registers it in the store.
func (it *item) integrate(tx *Transaction, offset int) {
	doc := tx.doc
	if offset > 0 {
		it.id.clock += offset
		it.left = doc.store.getItemCleanEnd(tx, id{it.id.client, it.id.clock - 1})
		it.origin = it.left.lastID()
		it.info |= flagHasOrigin
		it.content = it.content.splice(offset, it.length)
		it.length -= offset
	}
	parent := it.parent
	if parent == nil {
		gc := &item{id: it.id, length: it.length, info: flagDeleted}
		tx.touch(gc.id.client)
		doc.store.addStruct(gc)
		return
	}
	if (it.left == nil && (it.right == nil || it.right.left != nil)) || (it.left != nil && it.left.right != it.right) {
		it.resolveConflicts(tx)
	}
	// link into the list
	if it.left != nil {
		it.right = it.left.right
		it.left.right = it
	} else {
		var r *item
		if it.hasParentSub() {
			r = parent.m[it.parentSub]
			for r != nil && r.left != nil {
				r = r.left
			}
		} else {
			r = parent.start
			parent.start = it
		}
		it.right = r
	}
	if it.right != nil {
		it.right.left = it
	} else if it.hasParentSub() {
		if parent.m == nil {
			parent.m = make(map[string]*item)
		}
		parent.m[it.parentSub] = it
		if it.left != nil {
			// it is now the current value of the key: delete the previous one
			it.left.delete(tx)
		}
	}
	if !it.hasParentSub() && it.visible() {
		parent.length += it.length
	}
	tx.touch(it.id.client)
	doc.store.addStruct(it)
	it.integrateContent(tx)
	tx.addChangedType(parent, it.parentSub, it.hasParentSub())
	if (parent.item != nil && parent.item.deleted()) || (it.hasParentSub() && it.right != nil) {
		it.delete(tx)
	}
}

// resolveConflicts chooses it.left among concurrently inserted items
// (YATA): items are ordered by origin and then by client id.
func (it *item) resolveConflicts(tx *Transaction) {
	store := &tx.doc.store
	left := it.left
	var o *item
	switch {
	case left != nil:
		o = left.right
	case it.hasParentSub():
		o = it.parent.m[it.parentSub]
		for o != nil && o.left != nil {
			o = o.left
		}
	default:
		o = it.parent.start
	}
	// conflicting is a subset of beforeOrigin. Both are usually tiny, so
	// they start as slices and become maps when a long run of concurrent
	// inserts would make lookups quadratic.
	var beforeOrigin, conflicting itemSet
	for o != nil && o != it.right {
		beforeOrigin.add(o)
		conflicting.add(o)
		if sameOrigin(it.hasOrigin(), it.origin, o.hasOrigin(), o.origin) {
			if o.id.client < it.id.client {
				left = o
				conflicting.clear()
			} else if sameOrigin(it.hasRightOrigin(), it.rightOrigin, o.hasRightOrigin(), o.rightOrigin) {
				break
			}
		} else if o.hasOrigin() {
			oo := store.find(o.origin)
			if oo != nil && beforeOrigin.has(oo) {
				if !conflicting.has(oo) {
					left = o
					conflicting.clear()
				}
			} else {
				break
			}
		} else {
			break
		}
		o = o.right
	}
	it.left = left
}

// itemSet is a set of items: a slice while small, a map once it grows.
type itemSet struct {
	list []*item
	m    map[*item]struct{}
}

func (s *itemSet) add(x *item) {
	if s.m != nil {
		s.m[x] = struct{}{}
		return
	}
	s.list = append(s.list, x)
	if len(s.list) > 32 {
		s.m = make(map[*item]struct{}, 64)
		for _, y := range s.list {
			s.m[y] = struct{}{}
		}
		s.list = nil
	}
}

func (s *itemSet) has(x *item) bool {
	if s.m != nil {
		_, ok := s.m[x]
		return ok
	}
	for _, y := range s.list {
		if y == x {
			return true
		}
	}
	return false
}

func (s *itemSet) clear() {
	if s.m != nil {
		clear(s.m)
	}
	s.list = s.list[:0]
}

func sameOrigin(ha bool, a id, hb bool, b id) bool {
	if ha != hb {
		return false
	}
	return !ha || a == b
}

func (it *item) integrateContent(tx *Transaction) {
	switch it.content.kind {
	case kindDeleted:
		tx.deleteSet.add(it.id.client, it.id.clock, it.length)
		it.info |= flagDeleted
	case kindType:
		it.content.ext.typ.integrate(tx, it)
	case kindFormat:
		it.parent.markers = nil
		it.parent.markersOff = true
		it.parent.hasFormatting = true
	case kindDoc:
		sub := it.content.ext.doc
		if sub != nil {
			sub.item = it
		}
	}
}

// delete marks the item deleted and records it in the transaction.
func (it *item) delete(tx *Transaction) {
	if it.deleted() {
		return
	}
	parent := it.parent
	if it.countable() && !it.hasParentSub() {
		parent.length -= it.length
	}
	it.info |= flagDeleted
	tx.deleteSet.add(it.id.client, it.id.clock, it.length)
	tx.addChangedType(parent, it.parentSub, it.hasParentSub())
	if it.content.kind == kindType {
		t := it.content.ext.typ
		before := func(x *item) bool { return x.id.clock < tx.before(x.id.client) }
		for n := t.start; n != nil; n = n.right {
			if !n.deleted() {
				n.delete(tx)
			} else if before(n) {
				tx.mergeStructs = append(tx.mergeStructs, n)
			}
		}
		for _, n := range t.m {
			if !n.deleted() {
				n.delete(tx)
			} else if before(n) {
				tx.mergeStructs = append(tx.mergeStructs, n)
			}
		}
		if cs := tx.changeSetOf(t); cs != nil {
			cs.removed = true
		}
	}
}

// gc drops the content of a deleted item. Children of a collected type are
// turned into GC structs entirely.
func (it *item) gc(parentGCd bool) {
	if it.content.kind == kindType {
		t := it.content.ext.typ
		for n := t.start; n != nil; {
			next := n.right
			n.gc(true)
			n = next
		}
		t.start = nil
		for _, n := range t.m {
			for n != nil {
				prev := n.left
				n.gc(true)
				n = prev
			}
		}
		t.m = nil
	}
	if parentGCd {
		// becomes a GC struct in place; its list is unreachable now
		it.content = content{kind: kindGC}
		it.parent = nil
		it.left, it.right = nil, nil
		it.parentSub = ""
		it.info = flagDeleted
	} else {
		it.content = content{kind: kindDeleted}
		it.info &^= flagCountable
	}
}

// mergeWith appends right into it when Yjs would merge them.
func (it *item) mergeWith(right *item) bool {
	if it.isGC() || right.isGC() {
		if it.isGC() && right.isGC() {
			it.length += right.length
			return true
		}
		return false
	}
	if !(right.hasOrigin() && right.origin == it.lastID() &&
		it.right == right &&
		sameOrigin(it.hasRightOrigin(), it.rightOrigin, right.hasRightOrigin(), right.rightOrigin) &&
		it.id.client == right.id.client &&
		it.id.clock+it.length == right.id.clock &&
		it.deleted() == right.deleted() &&
		it.redone == nil && right.redone == nil &&
		it.content.kind == right.content.kind &&
		it.content.mergeWith(&right.content)) {
		return false
	}
	if p := it.parent; p != nil && len(p.markers) > 0 {
		for i := range p.markers {
			m := &p.markers[i]
			if m.p == right {
				m.p = it
				if it.visible() {
					m.index -= it.length
				}
			}
		}
	}
	if right.keep() {
		it.info |= flagKeep
	}
	it.right = right.right
	if it.right != nil {
		it.right.left = it
	}
	it.length += right.length
	return true
}

func (it *item) prev() *item {
	n := it.left
	for n != nil && n.deleted() {
		n = n.left
	}
	return n
}
