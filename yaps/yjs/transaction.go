package yjs

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
)

type delRange struct {
	clock, length int
}

// deleteSet lists deleted clock ranges per client. A slice (not a map)
// keeps the per-transaction cost low; most sets hold one or two clients.
type deleteSet struct {
	clients []clientDels
	last    int
	spare   []delRange // initial backing for the first client's ranges
}

type clientDels struct {
	client uint64
	dels   []delRange
}

func (ds *deleteSet) find(client uint64) int {
	if ds.last < len(ds.clients) && ds.clients[ds.last].client == client {
		return ds.last
	}
	for i := range ds.clients {
		if ds.clients[i].client == client {
			ds.last = i
			return i
		}
	}
	return -1
}

func (ds *deleteSet) add(client uint64, clock, length int) {
	i := ds.find(client)
	if i < 0 {
		ds.clients = append(ds.clients, clientDels{client: client, dels: ds.spare})
		ds.spare = nil
		i = len(ds.clients) - 1
		ds.last = i
	}
	ds.clients[i].dels = append(ds.clients[i].dels, delRange{clock, length})
}

func (ds *deleteSet) get(client uint64) []delRange {
	if i := ds.find(client); i >= 0 {
		return ds.clients[i].dels
	}
	return nil
}

func (ds *deleteSet) empty() bool { return len(ds.clients) == 0 }

// sortAndMerge sorts ranges and joins overlapping or adjacent ones.
func (ds *deleteSet) sortAndMerge() {
	byClock := func(a, b delRange) int { return cmp.Compare(a.clock, b.clock) }
	for ci := range ds.clients {
		dels := ds.clients[ci].dels
		if len(dels) > 1 && !slices.IsSortedFunc(dels, byClock) {
			slices.SortStableFunc(dels, byClock)
		}
		j := 1
		for i := 1; i < len(dels); i++ {
			l, r := &dels[j-1], dels[i]
			if l.clock+l.length >= r.clock {
				l.length = max(l.length, r.clock+r.length-l.clock)
			} else {
				dels[j] = r
				j++
			}
		}
		if len(dels) > 0 {
			ds.clients[ci].dels = dels[:j]
		}
	}
}

func (ds *deleteSet) contains(x id) bool {
	dels := ds.get(x.client)
	lo, hi := 0, len(dels)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		d := dels[mid]
		if d.clock <= x.clock {
			if x.clock < d.clock+d.length {
				return true
			}
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return false
}

func sortedClients[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Yjs writes clients in descending order
	slices.SortFunc(keys, func(a, b uint64) int { return cmp.Compare(b, a) })
	return keys
}

// sorted appends the clients with ranges to out, in descending order (the
// order Yjs writes), and returns it.
func (ds *deleteSet) sorted(out []clientDels) []clientDels {
	for _, cd := range ds.clients {
		if len(cd.dels) > 0 {
			out = append(out, cd)
		}
	}
	slices.SortFunc(out, func(a, b clientDels) int { return cmp.Compare(b.client, a.client) })
	return out
}

// sizeHint bounds the encoded size of ds (write): varuints all, a count,
// then per client its id and count, and per range its clock and length.
func (ds *deleteSet) sizeHint() int {
	n := lenMax
	for _, cd := range ds.clients {
		n += 2*lenMax + 2*lenMax*len(cd.dels)
	}
	return n
}

func (ds *deleteSet) write(e *encoder) {
	var buf [4]clientDels // a transaction's few clients, on the stack
	list := ds.sorted(buf[:0])
	e.writeVarUint(uint64(len(list)))
	for _, cd := range list {
		e.writeVarUint(cd.client)
		e.writeVarUint(uint64(len(cd.dels)))
		for _, d := range cd.dels {
			e.writeVarUint(uint64(d.clock))
			e.writeVarUint(uint64(d.length))
		}
	}
}

func readDeleteSet(d *decoder) (deleteSet, error) {
	var ds deleteSet
	n, err := d.readCount(2)
	if err != nil {
		return ds, err
	}
	for i := 0; i < n; i++ {
		client, err := d.readClient()
		if err != nil {
			return ds, err
		}
		cnt, err := d.readCount(2)
		if err != nil {
			return ds, err
		}
		for j := 0; j < cnt; j++ {
			clock, err := d.readInt()
			if err != nil {
				return ds, err
			}
			length, err := d.readInt()
			if err != nil {
				return ds, err
			}
			if length == 0 {
				return ds, fmt.Errorf("%w: empty delete range", ErrMalformed)
			}
			if clock+length > maxSafeInteger {
				return ds, ErrMalformed
			}
			ds.add(client, clock, length)
		}
	}
	return ds, nil
}

// Transaction groups changes to a document. It is passed to Transact
// callbacks, observers and OnAfterTransaction callbacks, and is only valid
// while they run: its answers describe the document at that moment.
type Transaction struct {
	doc       *Doc
	deleteSet deleteSet
	// touched holds the state before the transaction of every client that
	// got new structs, afterState their state after it (set at cleanup).
	// Other clients did not change, so the transaction costs O(touched)
	// rather than O(all clients) like a full Yjs state vector.
	touched      stateVec
	touchedIdx   map[uint64]int
	afterState   stateVec
	changed      []changeSet
	changedIndex map[*typeBase]int // built once changed grows

	// inline storage so that a small transaction needs one allocation
	svBuf                 [4]clockEntry
	csBuf                 [2]changeSet
	dsBuf                 [1]clientDels
	drBuf                 [2]delRange
	mergeStructs          []*item
	origin                any
	local                 bool
	needFormattingCleanup bool
	exposed               bool // handed to user code; must not be reused
}

// changeSet records which keys of a type changed; content covers array and
// text changes (the nil key in Yjs).
type changeSet struct {
	t       *typeBase
	removed bool // the type itself was deleted in this transaction
	keys    map[string]struct{}
	content bool
}

func newTransaction(d *Doc, origin any, local bool) *Transaction {
	tx := d.spareTx
	if tx != nil {
		// reuse the last transaction nobody outside the package has seen
		d.spareTx = nil
		ms := tx.mergeStructs[:0]
		*tx = Transaction{doc: d, origin: origin, local: local, mergeStructs: ms}
	} else {
		tx = &Transaction{doc: d, origin: origin, local: local}
	}
	tx.touched = tx.svBuf[:0:2]
	tx.changed = tx.csBuf[:0]
	tx.deleteSet.clients = tx.dsBuf[:0]
	tx.deleteSet.spare = tx.drBuf[:0]
	return tx
}

// Origin returns the origin passed to Transact or ApplyUpdate.
func (tx *Transaction) Origin() any { return tx.origin }

// Local reports whether the transaction was created by local edits (not ApplyUpdate).
func (tx *Transaction) Local() bool { return tx.local }

// Doc returns the transaction's document.
func (tx *Transaction) Doc() *Doc { return tx.doc }

// Changed maps every changed shared type (*Map, *Array, *Text, ...) to the
// keys that changed: strings for map keys and nil for list/text content.
func (tx *Transaction) Changed() map[any][]any {
	out := make(map[any][]any, len(tx.changed))
	for i := range tx.changed {
		if cs := &tx.changed[i]; !cs.removed {
			out[cs.t.public()] = cs.list()
		}
	}
	return out
}

// ChangedTypes returns the changed shared types, as the keys of Changed
// without building their key lists.
func (tx *Transaction) ChangedTypes() []any {
	out := make([]any, 0, len(tx.changed))
	for i := range tx.changed {
		if cs := &tx.changed[i]; !cs.removed {
			out = append(out, cs.t.public())
		}
	}
	return out
}

// ChangedKeys returns the changed keys of type t (see Changed), or nil.
func (tx *Transaction) ChangedKeys(t any) []any {
	if cs := tx.changeSetOf(publicTypeBase(t)); cs != nil && !cs.removed {
		return cs.list()
	}
	return nil
}

func (cs *changeSet) list() []any {
	keys := make([]string, 0, len(cs.keys))
	for k := range cs.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]any, 0, len(keys)+1)
	if cs.content {
		out = append(out, nil)
	}
	for _, k := range keys {
		out = append(out, k)
	}
	return out
}

// Delta returns how the list content of an array or text type t changed in
// this transaction, in Yjs delta form. Call it from OnAfterTransaction or an
// observer: garbage collection after the transaction drops deleted content.
func (tx *Transaction) Delta(t any) []Delta {
	tb := asTypeBase(t)
	if tb == nil {
		return nil
	}
	ev := &Event{target: tb, currentTarget: tb, tx: tx, changes: &changeSet{t: tb}}
	return ev.Delta()
}

// Keys returns how each changed key of map-like type t changed.
func (tx *Transaction) Keys(t any) map[string]KeyChange {
	tb := asTypeBase(t)
	if tb == nil {
		return nil
	}
	cs := tx.changeSetOf(tb)
	if cs == nil {
		return map[string]KeyChange{}
	}
	ev := &Event{target: tb, currentTarget: tb, tx: tx, changes: cs}
	return ev.Keys()
}

// Deleted reports whether the struct with the given client and clock was
// deleted in this transaction.
func (tx *Transaction) Deleted(client, clock uint64) bool {
	return clock <= maxSafeInteger && tx.deleteSet.contains(id{client, int(clock)})
}

// Inserted reports whether the struct with the given client and clock was
// created in this transaction.
func (tx *Transaction) Inserted(client, clock uint64) bool {
	c := int(min(clock, maxSafeInteger))
	return c >= tx.before(client) && c < tx.after(client)
}

// BeforeState and AfterState return the state vectors around the transaction.
// They are only meaningful while the transaction's callbacks run.
func (tx *Transaction) BeforeState() map[uint64]uint64 {
	sv := tx.doc.store.stateVector()
	for _, e := range tx.touched {
		if e.clock == 0 {
			delete(sv, e.client)
		} else {
			sv[e.client] = e.clock
		}
	}
	return svToPublic(sv)
}

func (tx *Transaction) AfterState() map[uint64]uint64 {
	sv := tx.doc.store.stateVector()
	for _, e := range tx.afterState {
		sv[e.client] = e.clock
	}
	return svToPublic(sv)
}

// touch records the state of client before its first new struct.
func (tx *Transaction) touch(client uint64) {
	if tx.touchedIndex(client) >= 0 {
		return
	}
	tx.touched = append(tx.touched, clockEntry{client, tx.doc.store.getState(client)})
	if tx.touchedIdx != nil {
		tx.touchedIdx[client] = len(tx.touched) - 1
	} else if len(tx.touched) > 8 {
		tx.touchedIdx = make(map[uint64]int, 16)
		for i, e := range tx.touched {
			tx.touchedIdx[e.client] = i
		}
	}
}

func (tx *Transaction) touchedIndex(client uint64) int {
	if tx.touchedIdx != nil {
		if i, ok := tx.touchedIdx[client]; ok {
			return i
		}
		return -1
	}
	for i := range tx.touched {
		if tx.touched[i].client == client {
			return i
		}
	}
	return -1
}

// before returns the client's clock before the transaction.
func (tx *Transaction) before(client uint64) int {
	if i := tx.touchedIndex(client); i >= 0 {
		return tx.touched[i].clock
	}
	return tx.doc.store.getState(client)
}

// after returns the client's clock after the transaction.
func (tx *Transaction) after(client uint64) int {
	if i := tx.touchedIndex(client); i >= 0 && i < len(tx.afterState) {
		return tx.afterState[i].clock
	}
	return tx.before(client)
}

func svToPublic(sv map[uint64]int) map[uint64]uint64 {
	out := make(map[uint64]uint64, len(sv))
	for c, v := range sv {
		out[c] = uint64(v)
	}
	return out
}

func (tx *Transaction) addChangedType(t *typeBase, key string, isKey bool) {
	it := t.item
	if it == nil || (it.id.clock < tx.before(it.id.client) && !it.deleted()) {
		cs := tx.changeSetOf(t)
		if cs == nil {
			tx.changed = append(tx.changed, changeSet{t: t})
			cs = &tx.changed[len(tx.changed)-1]
			if tx.changedIndex != nil {
				tx.changedIndex[t] = len(tx.changed) - 1
			} else if len(tx.changed) > 8 {
				tx.changedIndex = make(map[*typeBase]int, 16)
				for i, c := range tx.changed {
					tx.changedIndex[c.t] = i
				}
			}
		} else if cs.removed {
			return
		}
		if isKey {
			if cs.keys == nil {
				cs.keys = make(map[string]struct{})
			}
			cs.keys[key] = struct{}{}
		} else {
			cs.content = true
		}
	}
}

func (tx *Transaction) changeSetOf(t *typeBase) *changeSet {
	if tx.changedIndex != nil {
		if i, ok := tx.changedIndex[t]; ok {
			return &tx.changed[i]
		}
		return nil
	}
	for i := range tx.changed {
		if tx.changed[i].t == t {
			return &tx.changed[i]
		}
	}
	return nil
}

// adds reports whether it was created in this transaction.
func (tx *Transaction) adds(it *item) bool {
	return it.id.clock >= tx.before(it.id.client)
}

// ---- cleanup (Yjs cleanupTransactions) ----

// tryToMergeWithLefts merges the struct at pos into its left neighbours and
// returns how many structs were merged away.
func tryToMergeWithLefts(cs *clientStructs, pos int) int {
	right := cs.at(pos)
	i := pos
	for ; i > 0; i-- {
		left := cs.at(i - 1)
		if left.deleted() == right.deleted() && left.isGC() == right.isGC() && left.mergeWith(right) {
			if right.hasParentSub() && right.parent != nil && right.parent.m[right.parentSub] == right {
				right.parent.m[right.parentSub] = left
			}
			cs.removeAt(i)
			right = left
			continue
		}
		break
	}
	return pos - i
}

func (d *Doc) tryGcDeleteSet(ds *deleteSet) {
	for _, cd := range ds.clients {
		cs, dels := d.store.clients[cd.client], cd.dels
		if cs == nil {
			continue
		}
		for di := len(dels) - 1; di >= 0; di-- {
			del := dels[di]
			end := del.clock + del.length
			si := cs.findIndex(del.clock)
			if si < 0 {
				continue
			}
			for ; si < cs.len(); si++ {
				st := cs.at(si)
				if st.id.clock >= end {
					break
				}
				if !st.isGC() && st.deleted() && !st.keep() {
					st.gc(false)
				}
			}
		}
	}
}

func (d *Doc) tryMergeDeleteSet(ds *deleteSet) {
	for _, cd := range ds.clients {
		cs, dels := d.store.clients[cd.client], cd.dels
		if cs == nil {
			continue
		}
		for di := len(dels) - 1; di >= 0; di-- {
			del := dels[di]
			idx := cs.findIndex(del.clock + del.length - 1)
			if idx < 0 {
				continue
			}
			si := min(cs.len()-1, 1+idx)
			for si > 0 && cs.at(si).id.clock >= del.clock {
				si -= 1 + tryToMergeWithLefts(cs, si)
			}
		}
	}
}

func (d *Doc) cleanupTransactions(cleanups []*Transaction, i int) {
	for ; i < len(d.cleanups); i++ {
		tx := d.cleanups[i]
		store := &d.store
		tx.deleteSet.sortAndMerge()
		tx.afterState = tx.svBuf[2:2:4]
		for _, e := range tx.touched {
			tx.afterState = append(tx.afterState, clockEntry{e.client, store.getState(e.client)})
		}
		func() {
			defer func() {
				// the structural cleanup must run even if an observer panics
				d.finishCleanup(tx)
			}()
			d.callObservers(tx)
			for _, f := range d.afterTxObservers {
				if !f.scoped {
					tx.exposed = true
				}
			}
			for _, f := range d.afterTxObservers {
				if f.fn != nil {
					f.fn(tx)
				}
			}
			if tx.needFormattingCleanup {
				cleanupTextAfterTransaction(tx)
			}
		}()
		if !tx.exposed {
			d.spareTx = tx
		}
	}
	clear(d.cleanups)
	d.cleanups = d.cleanups[:0]
}

func (d *Doc) finishCleanup(tx *Transaction) {
	store := &d.store
	ds := &tx.deleteSet
	if d.gc {
		d.tryGcDeleteSet(ds)
	}
	d.tryMergeDeleteSet(ds)
	for i, e := range tx.afterState {
		client, clock := e.client, e.clock
		before := tx.touched[i].clock
		if before != clock {
			cs := store.clients[client]
			first := max(cs.findIndex(before), 1)
			for i := cs.len() - 1; i >= first; {
				i -= 1 + tryToMergeWithLefts(cs, i)
			}
		}
	}
	for i := len(tx.mergeStructs) - 1; i >= 0; i-- {
		x := tx.mergeStructs[i].id
		cs := store.clients[x.client]
		pos := cs.findIndex(x.clock)
		if pos < 0 {
			continue
		}
		if pos+1 < cs.len() {
			if tryToMergeWithLefts(cs, pos+1) > 1 {
				continue
			}
		}
		if pos > 0 {
			tryToMergeWithLefts(cs, pos)
		}
	}
	if !tx.local && tx.after(d.clientID) != tx.before(d.clientID) {
		// another peer uses our client id; pick a new one like Yjs does
		d.clientID = randomClientID()
	}
	if len(d.updateObservers) > 0 {
		if upd := tx.encodeUpdate(); upd != nil {
			for _, o := range d.updateObservers {
				switch {
				case o.rec != nil:
					o.rec.Updates = append(o.rec.Updates, upd)
				case o.fn != nil:
					o.fn(upd, tx.origin)
				}
			}
		}
	}
}

// HasChanges reports whether the transaction inserted or deleted anything,
// i.e. whether update observers get an update for it. Valid in
// OnAfterTransaction observers; it does not encode the update.
func (tx *Transaction) HasChanges() bool {
	if !tx.deleteSet.empty() {
		return true
	}
	for i, e := range tx.afterState {
		if tx.touched[i].clock != e.clock {
			return true
		}
	}
	return false
}

// encodeUpdate returns the v1 update of the transaction or nil if nothing changed.
func (tx *Transaction) encodeUpdate() []byte {
	if !tx.HasChanges() {
		return nil
	}
	tx.deleteSet.sortAndMerge()
	var e encoder
	tx.doc.writeTouchedStructs(&e, tx)
	tx.deleteSet.write(&e)
	return e.buf
}
