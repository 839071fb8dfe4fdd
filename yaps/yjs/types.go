package yjs

import (
	"fmt"
	"math"
	"sort"
)

// typeKind values are the Yjs type refs written for ContentType.
type typeKind uint8

const (
	typeArray       typeKind = 0
	typeMap         typeKind = 1
	typeText        typeKind = 2
	typeXmlElement  typeKind = 3
	typeXmlFragment typeKind = 4
	typeXmlHook     typeKind = 5
	typeXmlText     typeKind = 6
	typeUnknown     typeKind = 255 // a root that was never typed by Get*
)

const maxSearchMarkers = 16 // Yjs uses 80; fewer markers are cheaper to keep up to date

// marker caches the index of an item in a list (Yjs ArraySearchMarker).
type marker struct {
	p         *item
	index     int
	timestamp uint64
}

// typeBase holds the state shared by all Yjs types.
type typeBase struct {
	doc           *Doc
	item          *item // nil for roots and prelim types
	name          string
	kind          typeKind
	markersOff    bool // Yjs drops search markers for texts with formatting
	hasFormatting bool
	nodeName      string // XmlElement node name, XmlHook hook name
	start         *item
	m             map[string]*item
	length        int
	markers       []marker
	markerClock   uint64 // orders markers by last use; per type, so docs share no state
	pub           any

	// prelim content, applied when the type is integrated into a document
	// (nil once it is, and for types read from updates): a list
	// document holds two shared types per yap, so it is kept out of them
	// (200 bytes a type instead of 280).
	prelim *typePrelim

	observers     []*observer
	deepObservers []*observer
}

// typePrelim is the content of a prelim type (typeBase.prelim).
type typePrelim struct {
	keys []string
	m    map[string]any
	list []any
	ops  []func(tx *Transaction, t *typeBase)
}

// pre returns t's prelim content, made on first use. Only prelim types
// (doc == nil) use it.
func (t *typeBase) pre() *typePrelim {
	if t.prelim == nil {
		t.prelim = &typePrelim{}
	}
	return t.prelim
}

type observer struct {
	fn   func(e *Event)
	deep func(events []*Event)
}

func newTypeBase(kind typeKind) *typeBase {
	switch kind {
	case typeMap:
		m := &Map{}
		m.kind, m.pub = kind, m
		return &m.typeBase
	case typeArray:
		a := &Array{}
		a.kind, a.pub = kind, a
		return &a.typeBase
	case typeText:
		t := &Text{}
		t.kind, t.pub = kind, t
		return &t.typeBase
	case typeXmlText:
		t := &XmlText{}
		t.kind, t.pub = kind, t
		return &t.typeBase
	case typeXmlElement:
		e := &XmlElement{}
		e.kind, e.pub = kind, e
		return &e.typeBase
	case typeXmlFragment:
		f := &XmlFragment{}
		f.kind, f.pub = kind, f
		return &f.typeBase
	case typeXmlHook:
		h := &XmlHook{}
		h.kind, h.pub = kind, h
		return &h.typeBase
	}
	u := &unknownType{}
	u.kind, u.pub = typeUnknown, u
	return &u.typeBase
}

// unknownType is a root created by a remote update before any Get* call.
type unknownType struct{ typeBase }

func (t *typeBase) public() any { return t.pub }

func (t *typeBase) useMarkers() bool {
	return !t.markersOff && (t.kind == typeArray || t.kind == typeText || t.kind == typeXmlText)
}

// integrate binds a (possibly prelim) type to a document and writes its
// prelim content.
func (t *typeBase) integrate(tx *Transaction, it *item) {
	t.doc = tx.doc
	t.item = it
	var p typePrelim // none for a type read from an update
	if t.prelim != nil {
		p, t.prelim = *t.prelim, nil
	}
	// the order decides the clocks: Yjs XML elements insert their children
	// before setting attributes
	if t.kind == typeXmlElement && len(p.list) > 0 {
		t.listInsert(tx, 0, p.list)
		p.list = nil
	}
	for _, k := range p.keys {
		t.mapSet(tx, k, p.m[k])
	}
	if len(p.list) > 0 {
		t.listInsert(tx, 0, p.list)
	}
	for _, op := range p.ops {
		op(tx, t)
	}
}

// transact runs fn in the type's document transaction; it reports false for
// prelim types (no document yet).
func (t *typeBase) transact(fn func(tx *Transaction)) bool {
	if t.doc == nil {
		return false
	}
	t.doc.transact(fn, nil, true)
	return true
}

// ---- search markers ----

func (t *typeBase) overwriteMarker(m *marker, p *item, index int) {
	m.p.setMarker(false)
	m.p = p
	p.setMarker(true)
	m.index = index
	t.markerClock++
	m.timestamp = t.markerClock
}

func (t *typeBase) markPosition(p *item, index int) *marker {
	t.markerClock++
	if len(t.markers) >= maxSearchMarkers {
		oldest := &t.markers[0]
		for i := range t.markers {
			if t.markers[i].timestamp < oldest.timestamp {
				oldest = &t.markers[i]
			}
		}
		t.overwriteMarker(oldest, p, index)
		return oldest
	}
	p.setMarker(true)
	t.markers = append(t.markers, marker{p: p, index: index, timestamp: t.markerClock})
	return &t.markers[len(t.markers)-1]
}

// findMarker returns a marker at or near index (Yjs findMarker).
func (t *typeBase) findMarker(index int) *marker {
	if t.start == nil || index == 0 || !t.useMarkers() {
		return nil
	}
	var m *marker
	for i := range t.markers {
		if m == nil || abs(index-t.markers[i].index) < abs(index-m.index) {
			m = &t.markers[i]
		}
	}
	p := t.start
	pindex := 0
	if m != nil {
		p = m.p
		pindex = m.index
		t.markerClock++
		m.timestamp = t.markerClock
	}
	for p.right != nil && pindex < index {
		if p.visible() {
			if index < pindex+p.length {
				break
			}
			pindex += p.length
		}
		p = p.right
	}
	for p.left != nil && pindex > index {
		p = p.left
		if p.visible() {
			pindex -= p.length
		}
	}
	// move to the start of a run that will likely be merged
	for p.left != nil && p.left.id.client == p.id.client && p.left.id.clock+p.left.length == p.id.clock {
		p = p.left
		if p.visible() {
			pindex -= p.length
		}
	}
	if m != nil && float64(abs(m.index-pindex)) < float64(t.length)/maxSearchMarkers {
		t.overwriteMarker(m, p, pindex)
		return m
	}
	return t.markPosition(p, pindex)
}

// updateMarkerChanges shifts markers after an insert (len>0) or delete (len<0) at index.
func (t *typeBase) updateMarkerChanges(index, length int) {
	for i := len(t.markers) - 1; i >= 0; i-- {
		m := &t.markers[i]
		if length > 0 {
			p := m.p
			p.setMarker(false)
			for p != nil && (p.deleted() || !p.countable()) {
				p = p.left
				if p != nil && p.visible() {
					m.index -= p.length
				}
			}
			if p == nil || p.marked() {
				t.markers = append(t.markers[:i], t.markers[i+1:]...)
				continue
			}
			m.p = p
			p.setMarker(true)
		}
		if index < m.index || (length > 0 && index == m.index) {
			m.index = max(index, m.index+length)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// ---- list operations ----

func errLength(index, length int) error {
	return fmt.Errorf("yjs: index %d out of range (length %d)", index, length)
}

// newLocalItem creates an item with the next local id.
func (tx *Transaction) newLocalItem(left, right *item, parent *typeBase, c content, length int) *item {
	d := tx.doc
	it := &item{
		id:      id{d.clientID, d.store.getState(d.clientID)},
		length:  length,
		left:    left,
		right:   right,
		parent:  parent,
		content: c,
	}
	if left != nil {
		it.origin = left.lastID()
		it.info |= flagHasOrigin
	}
	if right != nil {
		it.rightOrigin = right.id
		it.info |= flagHasRightOrigin
	}
	if c.countable() {
		it.info |= flagCountable
	}
	return it
}

// contentFor converts a Go value into item content (array and map rules).
func contentFor(v any) (content, int, bool, error) {
	if err := checkValue(v); err != nil {
		return content{}, 0, false, err
	}
	switch x := v.(type) {
	case []byte:
		return content{kind: kindBinary, ext: &contentExt{contentMore: &contentMore{bin: x}}}, 1, false, nil
	case *Doc:
		opts := map[string]any{}
		if !x.gc {
			opts["gc"] = false // like Yjs ContentDoc options
		}
		return content{kind: kindDoc, ext: &contentExt{contentMore: &contentMore{key: x.guid, doc: x, val: opts}}}, 1, false, nil
	}
	if t := asTypeBase(v); t != nil {
		return content{kind: kindType, ext: &contentExt{typ: t}}, 1, false, nil
	}
	return content{}, 0, true, nil
}

// checkValue returns the error contentFor returns for v, if any, without
// building the content: for the callers that only validate.
func checkValue(v any) error {
	switch v.(type) {
	case []byte, *Doc:
		return nil
	}
	if t := asTypeBase(v); t != nil {
		if t.doc != nil || t.item != nil {
			return fmt.Errorf("%w: type is already part of a document", ErrUnsupported)
		}
		return nil
	}
	return checkAny(v)
}

func asTypeBase(v any) *typeBase {
	switch x := v.(type) {
	case *Map:
		return &x.typeBase
	case *Array:
		return &x.typeBase
	case *Text:
		return &x.typeBase
	case *XmlFragment:
		return &x.typeBase
	case *XmlElement:
		return &x.typeBase
	case *XmlText:
		return &x.typeBase
	case *XmlHook:
		return &x.typeBase
	}
	return nil
}

// publicTypeBase is asTypeBase that also accepts the *unknownType a
// transaction reports for a root not yet given a type (see Changed).
func publicTypeBase(t any) *typeBase {
	if tb := asTypeBase(t); tb != nil {
		return tb
	}
	if u, ok := t.(*unknownType); ok {
		return &u.typeBase
	}
	return nil
}

// listInsertAfter inserts values after ref, packing JSON-like values into
// one ContentAny like Yjs typeListInsertGenericsAfter.
func (t *typeBase) listInsertAfter(tx *Transaction, ref *item, values []any) error {
	left := ref
	var right *item
	if ref == nil {
		right = t.start
	} else {
		right = ref.right
	}
	var pending []any
	flush := func() {
		if len(pending) > 0 {
			c := content{kind: kindAny, ext: &contentExt{vals: pending}}
			left = tx.newLocalItem(left, right, t, c, len(pending))
			left.integrate(tx, 0)
			pending = nil
		}
	}
	for _, v := range values {
		c, n, isAny, err := contentFor(v)
		if err != nil {
			return err
		}
		if isAny {
			pending = append(pending, normalizeAny(v))
			continue
		}
		flush()
		left = tx.newLocalItem(left, right, t, c, n)
		left.integrate(tx, 0)
	}
	flush()
	return nil
}

func (t *typeBase) listInsert(tx *Transaction, index int, values []any) error {
	if index > t.length || index < 0 {
		return errLength(index, t.length)
	}
	if len(values) == 0 {
		return nil
	}
	for _, v := range values { // validate before changing anything
		if err := checkValue(v); err != nil {
			return err
		}
	}
	if index == 0 {
		if len(t.markers) > 0 {
			t.updateMarkerChanges(index, len(values))
		}
		return t.listInsertAfter(tx, nil, values)
	}
	start := index
	m := t.findMarker(index)
	n := t.start
	if m != nil {
		n = m.p
		index -= m.index
		if index == 0 {
			n = n.prev()
			if n != nil && n.visible() {
				index += n.length
			}
		}
	}
	for ; n != nil; n = n.right {
		if n.visible() {
			if index <= n.length {
				if index < n.length {
					tx.doc.store.getItemCleanStart(tx, id{n.id.client, n.id.clock + index})
				}
				break
			}
			index -= n.length
		}
	}
	if len(t.markers) > 0 {
		t.updateMarkerChanges(start, len(values))
	}
	return t.listInsertAfter(tx, n, values)
}

func (t *typeBase) listDelete(tx *Transaction, index, length int) error {
	if length == 0 {
		return nil
	}
	if index < 0 || length < 0 || index+length > t.length {
		return errLength(index+length, t.length)
	}
	start, startLen := index, length
	m := t.findMarker(index)
	n := t.start
	if m != nil {
		n = m.p
		index -= m.index
	}
	store := &tx.doc.store
	for ; n != nil && index > 0; n = n.right {
		if n.visible() {
			if index < n.length {
				store.getItemCleanStart(tx, id{n.id.client, n.id.clock + index})
			}
			index -= n.length
		}
	}
	for length > 0 && n != nil {
		if !n.deleted() {
			if length < n.length {
				store.getItemCleanStart(tx, id{n.id.client, n.id.clock + length})
			}
			n.delete(tx)
			length -= n.length
		}
		n = n.right
	}
	if len(t.markers) > 0 {
		t.updateMarkerChanges(start, -startLen+length)
	}
	return nil
}

func (t *typeBase) listGet(index int) (any, bool) {
	if index < 0 || index >= t.length {
		return nil, false
	}
	m := t.findMarker(index)
	n := t.start
	if m != nil {
		n = m.p
		index -= m.index
	}
	for ; n != nil; n = n.right {
		if n.visible() {
			if index < n.length {
				return n.contentAt(index), true
			}
			index -= n.length
		}
	}
	return nil, false
}

func (it *item) contentAt(i int) any {
	switch it.content.kind {
	case kindAny, kindJSON:
		return it.content.ext.vals[i]
	case kindString:
		s := it.content.str
		if len(s) != it.length {
			_, s = splitUTF16(s, i)
			r, _ := splitUTF16(s, 1)
			return string(r)
		}
		return string(s[i : i+1])
	}
	return it.content.values()[0]
}

func (t *typeBase) listToSlice() []any {
	out := make([]any, 0, t.length)
	for n := t.start; n != nil; n = n.right {
		if n.visible() {
			if n.content.kind == kindString {
				for i := 0; i < n.length; i++ {
					out = append(out, n.contentAt(i))
				}
				continue
			}
			out = append(out, n.content.values()...)
		}
	}
	return out
}

// ---- map operations ----

func (t *typeBase) mapSet(tx *Transaction, key string, v any) error {
	c, n, isAny, err := contentFor(v)
	if err != nil {
		return err
	}
	if isAny {
		c = content{kind: kindAny, ext: newAnyExt(normalizeAny(v))}
		n = 1
	}
	key = validString(key)
	left := t.m[key]
	it := tx.newLocalItem(left, nil, t, c, n)
	it.parentSub = key
	it.info |= flagHasParentSub
	it.integrate(tx, 0)
	return nil
}

func (t *typeBase) mapDelete(tx *Transaction, key string) {
	if it := t.m[key]; it != nil {
		it.delete(tx)
	}
}

func (t *typeBase) mapGet(key string) (any, bool) {
	it := t.m[key]
	if it == nil || it.deleted() {
		return nil, false
	}
	return it.content.lastValue(), true
}

func (t *typeBase) mapKeys() []string {
	keys := make([]string, 0, len(t.m))
	for k, it := range t.m {
		if !it.deleted() {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// toJSONValue converts a stored value to its Yjs toJSON form.
func toJSONValue(v any) any {
	switch x := v.(type) {
	case *Map:
		return x.ToJSON()
	case *Array:
		return x.ToJSON()
	case *Text:
		return x.String()
	case *XmlFragment:
		return x.String()
	case *XmlElement:
		return x.String()
	case *XmlText:
		return x.String()
	case *XmlHook:
		return x.ToJSON()
	}
	if !finiteJSON(v) {
		return nonFiniteToNil(v)
	}
	return v
}

// finiteJSON reports whether v holds no NaN or infinite numbers, which JSON
// cannot represent (JSON.stringify writes them as null).
func finiteJSON(v any) bool {
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case []any:
		for _, el := range x {
			if !finiteJSON(el) {
				return false
			}
		}
	case map[string]any:
		for _, el := range x {
			if !finiteJSON(el) {
				return false
			}
		}
	}
	return true
}

// nonFiniteToNil copies v with NaN and infinities replaced by nil.
func nonFiniteToNil(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = nonFiniteToNil(el)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, el := range x {
			out[k] = nonFiniteToNil(el)
		}
		return out
	}
	return v
}

// RootName returns the name of the root type that t (a shared type, as
// Transaction.Changed reports them) belongs to, following its parents up.
// ok is false for a type not (or no longer) reachable from a root: a
// prelim type, or one whose parent was garbage collected.
func RootName(t any) (name string, ok bool) {
	return rootOf(publicTypeBase(t))
}

// rootOf returns the name of the root type tb belongs to (see RootName).
func rootOf(tb *typeBase) (string, bool) {
	for tb != nil && tb.item != nil {
		tb = tb.item.parent
	}
	if tb == nil || tb.doc == nil || tb.doc.share[tb.name] == nil {
		return "", false
	}
	return tb.name, true
}
