package yjs

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
)

// Doc is a Yjs document. It is not safe for concurrent use: callers must
// serialize all access to a Doc and to the types it contains.
type Doc struct {
	clientID uint64
	guid     string
	gc       bool
	store    structStore
	share    map[string]*typeBase
	tx       *Transaction
	cleanups []*Transaction
	spareTx  *Transaction
	item     *item // set when this doc is embedded as a subdocument

	pendingStructs *pendingStructs
	pendingDs      []byte

	updateObservers  []*updateObserver
	afterTxObservers []*afterTxObserver

	// The size of the last full encoding and the structs it held: the
	// next one's buffer is sized from them (EncodeStateFrom).
	lastFullSize, lastFullStructs int
}

type updateObserver struct {
	fn  func([]byte, any)
	rec *UpdateRecorder // instead of fn: append to rec.Updates
}
type afterTxObserver struct {
	fn     func(*Transaction)
	scoped bool // fn does not keep the transaction (OnAfterTransactionScoped)
}

type pendingStructs struct {
	missing map[uint64]int
	update  []byte
}

// Option configures NewDoc.
type Option func(*Doc)

// WithClientID fixes the client id instead of picking a random 32 bit one.
func WithClientID(id uint64) Option { return func(d *Doc) { d.clientID = id } }

// WithGC turns garbage collection of deleted content on or off (default on).
func WithGC(gc bool) Option { return func(d *Doc) { d.gc = gc } }

// WithGUID sets the document guid (used when embedding as a subdocument).
func WithGUID(guid string) Option { return func(d *Doc) { d.guid = guid } }

// NewDoc creates an empty document.
func NewDoc(opts ...Option) *Doc {
	d := &Doc{gc: true, store: newStructStore(), share: make(map[string]*typeBase)}
	d.clientID = randomClientID()
	var b [16]byte
	_, _ = rand.Read(b[:])
	d.guid = fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	for _, o := range opts {
		o(d)
	}
	return d
}

// randomClientID returns a random 32 bit client id, like Yjs.
func randomClientID() uint64 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return uint64(binary.LittleEndian.Uint32(b[:]))
}

// ClientID returns the id this document uses for local edits.
func (d *Doc) ClientID() uint64 { return d.clientID }

// SetClientID makes d write its next changes under id, as assigning
// Y.Doc.clientID does in Yjs. Two documents writing under one ID lose each
// other's changes; this exists for tests and tools that must forge that.
func (d *Doc) SetClientID(id uint64) { d.clientID = id }

// GUID returns the document guid.
func (d *Doc) GUID() string { return d.guid }

// rootType returns the root named name, creating an untyped one if needed.
func (d *Doc) rootType(name string) *typeBase {
	t := d.share[name]
	if t == nil {
		t = newTypeBase(typeUnknown)
		t.doc, t.name = d, name
		d.share[name] = t
	}
	return t
}

// getRoot returns the root as kind, converting an untyped root like Yjs doc.get.
func (d *Doc) getRoot(name string, kind typeKind) *typeBase {
	t := d.share[name]
	if t != nil && t.kind == kind {
		return t
	}
	nt := newTypeBase(kind)
	nt.doc, nt.name = d, name
	if t != nil {
		if t.kind != typeUnknown {
			panic(fmt.Sprintf("yjs: root %q already defined with a different type", name))
		}
		nt.m, nt.start, nt.length = t.m, t.start, t.length
		for _, n := range nt.m {
			for ; n != nil; n = n.left {
				n.parent = nt
			}
		}
		for n := nt.start; n != nil; n = n.right {
			n.parent = nt
			if n.content.kind == kindFormat {
				nt.markersOff = true
				nt.hasFormatting = true
			}
		}
	}
	d.share[name] = nt
	return nt
}

// GetMap returns the root map called name, creating it on first use. It
// panics if the root was already defined with another type, like Yjs.
func (d *Doc) GetMap(name string) *Map { return d.getRoot(name, typeMap).pub.(*Map) }

// GetArray returns the root array called name.
func (d *Doc) GetArray(name string) *Array { return d.getRoot(name, typeArray).pub.(*Array) }

// GetText returns the root text called name.
func (d *Doc) GetText(name string) *Text { return d.getRoot(name, typeText).pub.(*Text) }

// GetXmlFragment returns the root XML fragment called name.
func (d *Doc) GetXmlFragment(name string) *XmlFragment {
	return d.getRoot(name, typeXmlFragment).pub.(*XmlFragment)
}

// GetXmlElement returns the root XML element called name.
func (d *Doc) GetXmlElement(name string) *XmlElement {
	return d.getRoot(name, typeXmlElement).pub.(*XmlElement)
}

// RootNames returns the names of all root types, sorted.
func (d *Doc) RootNames() []string {
	names := make([]string, 0, len(d.share))
	for n := range d.share {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Transact runs fn in one transaction; all changes become one update.
// Nested calls join the outer transaction.
func (d *Doc) Transact(fn func(tx *Transaction), origin any) {
	d.transact(func(tx *Transaction) {
		tx.exposed = true
		fn(tx)
	}, origin, true)
}

// TransactRecorded is Transact for an fn that needs no *Transaction,
// appending the v1 update of the transaction, if it changed d, to
// r.Updates. r is registered only while fn runs and its transaction ends
// (panic or not), and costs no allocation, unlike an OnUpdate observer. As
// no caller sees the transaction, d may reuse its memory for the next one
// (unless an observer is handed it). Nested in a transaction of d, fn
// joins it and r records nothing. Not to be called from an observer of d.
func (d *Doc) TransactRecorded(r *UpdateRecorder, fn func(), origin any) {
	r.o.rec = r
	d.updateObservers = append(d.updateObservers, &r.o)
	defer func() { d.updateObservers = without(d.updateObservers, &r.o) }()
	tx, initial := d.begin(origin, true)
	defer d.end(tx, initial) // runs first: the update is recorded
	fn()
}

func (d *Doc) transact(fn func(tx *Transaction), origin any, local bool) {
	tx, initial := d.begin(origin, local)
	defer d.end(tx, initial)
	fn(tx)
}

// begin starts a transaction or joins the running one; the caller must
// defer d.end with the results. The pair avoids allocating a closure per
// edit on hot paths.
func (d *Doc) begin(origin any, local bool) (*Transaction, bool) {
	if d.tx != nil {
		return d.tx, false
	}
	d.tx = newTransaction(d, origin, local)
	d.cleanups = append(d.cleanups, d.tx)
	return d.tx, true
}

// end finishes a transaction started by begin. It must be deferred
// directly so that it can see a panic of the edit.
func (d *Doc) end(tx *Transaction, initial bool) {
	if !initial {
		return
	}
	if r := recover(); r != nil {
		// the edit panicked: drop the transaction state so the doc stays usable
		d.tx = nil
		d.cleanups = d.cleanups[:0]
		panic(r)
	}
	finish := tx == d.cleanups[0]
	d.tx = nil
	if finish {
		defer func() {
			if r := recover(); r != nil {
				d.cleanups = d.cleanups[:0]
				panic(r)
			}
		}()
		d.cleanupTransactions(d.cleanups, 0)
	}
}

// OnUpdate registers fn to receive the v1 update of every transaction that
// changed the document, like Yjs doc.on('update').
func (d *Doc) OnUpdate(fn func(update []byte, origin any)) (unsubscribe func()) {
	o := &updateObserver{fn: fn}
	d.updateObservers = append(d.updateObservers, o)
	return func() {
		for i, x := range d.updateObservers {
			if x == o {
				d.updateObservers = append(d.updateObservers[:i:i], d.updateObservers[i+1:]...)
				return
			}
		}
	}
}

// UpdateRecorder receives the updates of TransactRecorded; its owner keeps
// it from one transaction to the next.
type UpdateRecorder struct {
	o       updateObserver
	Updates [][]byte // appended to, in order; the owner resets it
}

// OnAfterTransaction registers fn to run after every transaction.
func (d *Doc) OnAfterTransaction(fn func(tx *Transaction)) (unsubscribe func()) {
	return d.onAfterTransaction(&afterTxObserver{fn: fn})
}

// OnAfterTransactionScoped is OnAfterTransaction for an fn that does not
// keep tx once it returns: the document may then reuse the transaction's
// memory for the next one (what tx's methods return is fn's to keep).
func (d *Doc) OnAfterTransactionScoped(fn func(tx *Transaction)) (unsubscribe func()) {
	return d.onAfterTransaction(&afterTxObserver{fn: fn, scoped: true})
}

// ScopedObserver is an OnAfterTransactionScoped observer that its owner
// keeps and attaches around its own transactions (Attach, Detach), for a
// caller that observes every update it applies: registering it that way
// allocates nothing.
type ScopedObserver struct{ o afterTxObserver }

// NewScopedObserver returns an observer that calls fn after each
// transaction of the documents it is attached to, under the terms of
// OnAfterTransactionScoped.
func NewScopedObserver(fn func(tx *Transaction)) *ScopedObserver {
	return &ScopedObserver{afterTxObserver{fn: fn, scoped: true}}
}

// Attach registers o on d, after the observers registered before. o must
// not be attached to d already. Attach and Detach must not be called
// while a transaction of d runs (from an observer).
func (d *Doc) Attach(o *ScopedObserver) { d.afterTxObservers = append(d.afterTxObservers, &o.o) }

// Detach unregisters o from d, if attached. Detaching the observer
// attached last, the usual case, reuses the list's memory for the next
// Attach.
func (d *Doc) Detach(o *ScopedObserver) { d.afterTxObservers = without(d.afterTxObservers, &o.o) }

// without returns obs without o, if there. Removing the last, the usual
// case, keeps the backing array for the next append (no allocation).
func without[T any](obs []*T, o *T) []*T {
	for i, x := range obs {
		if x != o {
			continue
		}
		if i == len(obs)-1 {
			obs[i] = nil
			return obs[:i]
		}
		return append(obs[:i:i], obs[i+1:]...)
	}
	return obs
}

func (d *Doc) onAfterTransaction(o *afterTxObserver) (unsubscribe func()) {
	d.afterTxObservers = append(d.afterTxObservers, o)
	return func() {
		for i, x := range d.afterTxObservers {
			if x == o {
				d.afterTxObservers = append(d.afterTxObservers[:i:i], d.afterTxObservers[i+1:]...)
				return
			}
		}
	}
}

// ToJSON returns the Yjs toJSON value of every root, ready for
// encoding/json except for Undefined values (NaN and infinities become nil,
// as JSON.stringify writes them). Roots never typed by
// a Get* call are inferred from their content: text if the first visible
// list item is text, an array if it is other list content, otherwise a map;
// a list holding only XML nodes is rendered as an XML fragment; a root
// without visible content is left out (Yjs reports undefined).
func (d *Doc) ToJSON() map[string]any {
	out := make(map[string]any, len(d.share))
	for name, t := range d.share {
		switch t.kind {
		case typeUnknown:
			switch firstVisibleKind(t) {
			case kindType:
				if onlyXMLChildren(t) {
					out[name] = childrenString(t)
				} else {
					out[name] = t.listJSON()
				}
			case kindString, kindFormat, kindEmbed:
				out[name] = textString(t)
			case kindDeleted:
				if m := t.mapJSON(); len(m) > 0 {
					out[name] = m
				}
			default:
				out[name] = t.listJSON()
			}
		default:
			out[name] = toJSONValue(t.pub)
		}
	}
	return out
}

// onlyXMLChildren reports whether every visible list item of t is an XML
// element or XML text, i.e. t is most likely an XML fragment.
func onlyXMLChildren(t *typeBase) bool {
	for n := t.start; n != nil; n = n.right {
		if n.deleted() {
			continue
		}
		if n.content.kind != kindType {
			return false
		}
		if k := n.content.ext.typ.kind; k != typeXmlElement && k != typeXmlText {
			return false
		}
	}
	return true
}

// firstVisibleKind returns the content kind of the first undeleted list
// item, or kindDeleted if there is none.
func firstVisibleKind(t *typeBase) uint8 {
	for n := t.start; n != nil; n = n.right {
		if !n.deleted() {
			return n.content.kind
		}
	}
	return kindDeleted
}

// StateVector returns the next expected clock of every client.
func (d *Doc) StateVector() map[uint64]uint64 { return svToPublic(d.store.stateVector()) }

// ClientState returns the next clock of a client in d: the end of its
// structs, 0 for a client d has none of (its entry in StateVector).
func (d *Doc) ClientState(client uint64) uint64 { return uint64(d.store.getState(client)) }

// EncodeStateVector returns the document's encoded state vector.
func (d *Doc) EncodeStateVector() []byte { return EncodeStateVector(d.StateVector()) }

// Pending returns the document's pending state: structs whose dependencies
// have not arrived yet, and deletions of structs the document does not know
// yet, each as a v1 update (nil when there is none). Both are kept by
// ApplyUpdate until the missing updates arrive (see ApplyUpdate) and are
// part of EncodeStateAsUpdate. An update that left StateVector and the
// delete set alone but changed Pending was not a duplicate: it is needed
// to rebuild the document. The slices are the document's own: do not
// modify them. They stay valid (the document replaces, never changes them).
func (d *Doc) Pending() (structs, deletes []byte) {
	if d.pendingStructs != nil {
		structs = d.pendingStructs.update
	}
	return structs, d.pendingDs
}

// Holds reports whether d already has everything update holds: each of
// its structs, and each of its deletions applied. Applying such an update
// changes nothing. A read-only sync client that reconnects answers the
// server's step 1 with such an update (its whole delete set, the structs
// it has), which is not an attempt to write. Deletions of structs d does
// not have, or has not deleted, are not held.
func (d *Doc) Holds(update []byte) (bool, error) {
	u := DecodeUpdate(update)
	if u.err != nil {
		return false, u.err
	}
	return d.HoldsDecoded(u), nil
}

// HoldsDecoded is Holds with a decoded update, which a caller that holds a
// lock to check can decode first, outside it. It may be checked against
// any number of documents; it is not changed. A malformed update holds
// nothing.
func (d *Doc) HoldsDecoded(u *Update) bool {
	du, err := u.decoded()
	if err != nil {
		return false
	}
	store := &d.store
	for _, b := range du.blocks {
		if len(b.refs) > 0 && b.end() > store.getState(b.client) {
			return false
		}
	}
	for _, cd := range du.ds.clients {
		cs := store.clients[cd.client]
		state := store.getState(cd.client)
		for _, r := range cd.dels {
			end := r.clock + r.length
			if end > state {
				return false
			}
			// Structs are contiguous per client: walk those the range covers.
			for i := cs.findIndex(r.clock); i >= 0 && i < cs.len(); i++ {
				st := cs.at(i)
				if st.id.clock >= end {
					break
				}
				if !st.deleted() {
					return false
				}
			}
		}
	}
	return true
}

// ClockSum returns the sum of the document's state vector: it grows with
// everything ever inserted and never shrinks, so comparing it before and
// after a change tells insertions from deletions. It allocates nothing.
func (d *Doc) ClockSum() uint64 {
	var n uint64
	for _, cs := range d.store.order {
		n += uint64(cs.state())
	}
	return n
}

// StructCount returns how many structs (items and garbage-collected
// ranges) the document holds, pending ones not included. It grows by about
// one per inserted value or run of text and by splits, shrinks when
// adjacent structs merge, and is a fair measure of the document's memory.
// It costs one addition per client that ever wrote to the document.
func (d *Doc) StructCount() int {
	n := 0
	for _, cs := range d.store.order {
		n += cs.len()
	}
	return n
}
