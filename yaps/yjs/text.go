package yjs

import (
	"math"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Text is a Yjs Y.Text. Indices and lengths count UTF-16 code units, like
// JavaScript strings.
type Text struct{ typeBase }

// NewText returns a prelim text with initial content s.
func NewText(s string) *Text {
	t := newTypeBase(typeText).pub.(*Text)
	if s != "" {
		t.pre().ops = append(t.pre().ops, func(tx *Transaction, tb *typeBase) { tb.insert(tx, 0, s, nil, false) })
	}
	return t
}

// Doc returns the document the text belongs to (nil while prelim).
func (t *Text) Doc() *Doc { return t.doc }

// attr is one formatting attribute; attrList keeps insertion order like a
// JavaScript Map, which decides the order in which format items are created.
type attr struct {
	key string
	val any
}

type attrList []attr

func (l attrList) get(key string) (any, bool) {
	for _, a := range l {
		if a.key == key {
			return a.val, true
		}
	}
	return nil, false
}

func (l *attrList) set(key string, val any) {
	for i := range *l {
		if (*l)[i].key == key {
			(*l)[i].val = val
			return
		}
	}
	*l = append(*l, attr{key, val})
}

func (l *attrList) del(key string) {
	for i := range *l {
		if (*l)[i].key == key {
			*l = append((*l)[:i], (*l)[i+1:]...)
			return
		}
	}
}

func (l attrList) clone() attrList { return append(attrList(nil), l...) }

func (l attrList) toMap() map[string]any {
	if len(l) == 0 {
		return nil
	}
	m := make(map[string]any, len(l))
	for _, a := range l {
		m[a.key] = a.val
	}
	return m
}

// attrsFromMap orders attributes like a JavaScript object and converts the
// values to their JSON form, the form format values are stored and read
// back in (so 3 and 3.0 compare equal, as JavaScript numbers do).
func attrsFromMap(m map[string]any) attrList {
	l := make(attrList, 0, len(m))
	for _, k := range jsKeyOrder(m) {
		l = append(l, attr{validString(k), jsonValue(m[k])})
	}
	return l
}

// jsonValue returns v as JSON.parse(JSON.stringify(v)) would. Values that
// are already in that form are returned as they are, keeping their identity.
func jsonValue(v any) any {
	if isJSONForm(v) {
		return v
	}
	out, err := parseJSON([]byte(jsonString(v)))
	if err != nil {
		return nil
	}
	return out
}

func updateCurrentAttributes(l *attrList, f *content) {
	if f.ext.val == nil {
		l.del(f.ext.key)
	} else {
		l.set(f.ext.key, f.ext.val)
	}
}

// strictEqual is JavaScript ===: objects and arrays compare by identity.
// Identity matters: a negating format item reuses the very value object of
// the format it undoes, and Yjs's cleanup relies on that.
func strictEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case []any:
		y, ok := b.([]any)
		return ok && len(x) > 0 && len(x) == len(y) && &x[0] == &y[0]
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

// equalAttrs is Yjs equalAttrs: === or a flat comparison of two objects.
func equalAttrs(a, b any) bool {
	if strictEqual(a, b) {
		return true
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !strictEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !strictEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func isJSONForm(v any) bool {
	switch x := v.(type) {
	case nil, bool:
		return true
	case string:
		return utf8.ValidString(x)
	case float64:
		return !math.IsInf(x, 0) && !math.IsNaN(x)
	case []any:
		for _, el := range x {
			if !isJSONForm(el) {
				return false
			}
		}
		return true
	case map[string]any:
		for k, el := range x {
			if !utf8.ValidString(k) || !isJSONForm(el) {
				return false
			}
		}
		return true
	}
	return false
}

// textPos is a cursor between left and right (Yjs ItemTextListPosition).
type textPos struct {
	left, right *item
	index       int
	attrs       attrList
}

func (p *textPos) forward() {
	r := p.right
	if !r.deleted() {
		if r.content.kind == kindFormat {
			updateCurrentAttributes(&p.attrs, &r.content)
		} else {
			p.index += r.length
		}
	}
	p.left = r
	p.right = r.right
}

func (t *typeBase) findNextPosition(tx *Transaction, p *textPos, count int) *textPos {
	for p.right != nil && count > 0 {
		r := p.right
		if !r.deleted() {
			if r.content.kind == kindFormat {
				updateCurrentAttributes(&p.attrs, &r.content)
			} else {
				if count < r.length {
					tx.doc.store.getItemCleanStart(tx, id{r.id.client, r.id.clock + count})
				}
				p.index += r.length
				count -= r.length
			}
		}
		p.left = r
		p.right = r.right
	}
	return p
}

func (t *typeBase) findPosition(tx *Transaction, index int, useMarker bool) *textPos {
	if useMarker {
		if m := t.findMarker(index); m != nil {
			p := &textPos{left: m.p.left, right: m.p, index: m.index}
			return t.findNextPosition(tx, p, index-m.index)
		}
	}
	return t.findNextPosition(tx, &textPos{right: t.start}, index)
}

func (t *typeBase) newFormat(tx *Transaction, p *textPos, key string, val any) *item {
	c := content{kind: kindFormat, ext: &contentExt{contentMore: &contentMore{key: key, val: val}}}
	it := tx.newLocalItem(p.left, p.right, t, c, 1)
	it.integrate(tx, 0)
	return it
}

func (t *typeBase) insertNegatedAttributes(tx *Transaction, p *textPos, negated attrList) {
	for p.right != nil {
		r := p.right
		if !r.deleted() {
			if r.content.kind != kindFormat {
				break
			}
			v, ok := negated.get(r.content.ext.key)
			if !ok || !equalAttrs(v, r.content.ext.val) {
				break
			}
			negated.del(r.content.ext.key)
		}
		p.forward()
	}
	for _, a := range negated {
		p.right = t.newFormat(tx, p, a.key, a.val)
		p.forward()
	}
}

func minimizeAttributeChanges(p *textPos, attrs attrList) {
	for p.right != nil {
		r := p.right
		if !r.deleted() {
			if r.content.kind != kindFormat {
				return
			}
			v, _ := attrs.get(r.content.ext.key)
			if !equalAttrs(v, r.content.ext.val) {
				return
			}
		}
		p.forward()
	}
}

func (t *typeBase) insertAttributes(tx *Transaction, p *textPos, attrs attrList) attrList {
	var negated attrList
	for _, a := range attrs {
		cur, _ := p.attrs.get(a.key)
		if !equalAttrs(cur, a.val) {
			negated.set(a.key, cur)
			p.right = t.newFormat(tx, p, a.key, a.val)
			p.forward()
		}
	}
	return negated
}

// insertContent inserts a string, embed or type at p (Yjs insertText).
func (t *typeBase) insertContent(tx *Transaction, p *textPos, c content, length int, attrs attrList) {
	for _, a := range p.attrs {
		if _, ok := attrs.get(a.key); !ok {
			attrs = append(attrs, attr{a.key, nil})
		}
	}
	minimizeAttributeChanges(p, attrs)
	negated := t.insertAttributes(tx, p, attrs)
	if t.useMarkers() {
		t.updateMarkerChanges(p.index, length)
	}
	index := p.index
	it := tx.newLocalItem(p.left, p.right, t, c, length)
	it.integrate(tx, 0)
	p.right = it
	p.index = index
	p.forward()
	t.insertNegatedAttributes(tx, p, negated)
}

func (t *typeBase) insert(tx *Transaction, index int, s string, attrs map[string]any, explicit bool) {
	if s == "" {
		return
	}
	p := t.findPosition(tx, index, !explicit)
	var al attrList
	if explicit {
		al = attrsFromMap(attrs)
	} else {
		al = p.attrs.clone()
	}
	str := []byte(validString(s))
	t.insertContent(tx, p, content{kind: kindString, str: str}, utf16Len(str), al)
}

func (t *typeBase) formatText(tx *Transaction, p *textPos, length int, attrs attrList) {
	minimizeAttributeChanges(p, attrs)
	negated := t.insertAttributes(tx, p, attrs)
loop:
	for p.right != nil && (length > 0 || (len(negated) > 0 && (p.right.deleted() || p.right.content.kind == kindFormat))) {
		r := p.right
		if !r.deleted() {
			if r.content.kind == kindFormat {
				key, value := r.content.ext.key, r.content.ext.val
				if a, ok := attrs.get(key); ok {
					if equalAttrs(a, value) {
						negated.del(key)
					} else {
						if length == 0 {
							break loop
						}
						negated.set(key, value)
					}
					r.delete(tx)
				} else {
					p.attrs.set(key, value)
				}
			} else {
				if length < r.length {
					tx.doc.store.getItemCleanStart(tx, id{r.id.client, r.id.clock + length})
				}
				length -= r.length
			}
		}
		p.forward()
	}
	if length > 0 {
		nl := []byte(strings.Repeat("\n", length))
		it := tx.newLocalItem(p.left, p.right, t, content{kind: kindString, str: nl}, length)
		it.integrate(tx, 0)
		p.right = it
		p.forward()
	}
	t.insertNegatedAttributes(tx, p, negated)
}

// cleanupFormattingGap removes format items between start and the next
// countable item that no longer have an effect.
func cleanupFormattingGap(tx *Transaction, start, curr *item, startAttrs attrList, currAttrs *attrList) int {
	end := start
	var endFormats map[string]*item // allocated only when there are formats
	for end != nil && (!end.countable() || end.deleted()) {
		if !end.deleted() && end.content.kind == kindFormat {
			if endFormats == nil {
				endFormats = map[string]*item{}
			}
			endFormats[end.content.ext.key] = end
		}
		end = end.right
	}
	cleanups := 0
	reachedCurr := false
	for start != end {
		if curr == start {
			reachedCurr = true
		}
		if !start.deleted() && start.content.kind == kindFormat {
			key, value := start.content.ext.key, start.content.ext.val
			startVal, _ := startAttrs.get(key)
			if endFormats[key] != start || strictEqual(startVal, value) {
				start.delete(tx)
				cleanups++
				cur, _ := currAttrs.get(key)
				if !reachedCurr && strictEqual(cur, value) && !strictEqual(startVal, value) {
					if startVal == nil {
						currAttrs.del(key)
					} else {
						currAttrs.set(key, startVal)
					}
				}
			}
			if !reachedCurr && !start.deleted() {
				updateCurrentAttributes(currAttrs, &start.content)
			}
		}
		start = start.right
	}
	return cleanups
}

func cleanupContextlessFormattingGap(tx *Transaction, it *item) {
	for it != nil && it.right != nil && (it.right.deleted() || !it.right.countable()) {
		it = it.right
	}
	seen := map[string]bool{}
	for it != nil && (it.deleted() || !it.countable()) {
		if !it.deleted() && it.content.kind == kindFormat {
			if seen[it.content.ext.key] {
				it.delete(tx)
			} else {
				seen[it.content.ext.key] = true
			}
		}
		it = it.left
	}
}

func cleanupTextFormatting(tx *Transaction, t *typeBase) {
	start, end := t.start, t.start
	var startAttrs, curAttrs attrList
	for end != nil {
		if !end.deleted() {
			if end.content.kind == kindFormat {
				updateCurrentAttributes(&curAttrs, &end.content)
			} else {
				cleanupFormattingGap(tx, start, end, startAttrs, &curAttrs)
				startAttrs = curAttrs.clone()
				start = end
			}
		}
		end = end.right
	}
}

// cleanupTextAfterTransaction removes redundant formatting after remote
// changes to formatted texts (Yjs cleanupYTextAfterTransaction).
func cleanupTextAfterTransaction(tx *Transaction) {
	d := tx.doc
	var full []*typeBase
	inFull := map[*typeBase]bool{}
	addFull := func(t *typeBase) {
		if !inFull[t] {
			inFull[t] = true
			full = append(full, t)
		}
	}
	for i, e := range tx.touched {
		client, after := e.client, tx.afterState[i].clock
		before := e.clock
		if after == before {
			continue
		}
		cs := d.store.clients[client]
		for i := max(cs.findIndex(before), 0); i < cs.len(); i++ {
			it := cs.at(i)
			if !it.deleted() && it.content.kind == kindFormat {
				addFull(it.parent)
			}
		}
	}
	d.transact(func(t *Transaction) {
		for _, cd := range tx.deleteSet.clients {
			cs, dels := d.store.clients[cd.client], cd.dels
			if cs == nil {
				continue
			}
			state := cs.state()
			for _, del := range dels {
				if del.clock >= state {
					break
				}
				iterateStructs(tx, cs, del.clock, del.length, func(it *item) {
					if it.isGC() || it.parent == nil || !it.parent.hasFormatting || inFull[it.parent] {
						return
					}
					if it.content.kind == kindFormat {
						addFull(it.parent)
					} else {
						cleanupContextlessFormattingGap(t, it)
					}
				})
			}
		}
		for _, yt := range full {
			cleanupTextFormatting(t, yt)
		}
	}, nil, true)
}

// iterateStructs calls f for every struct in [clock, clock+length), splitting
// at the boundaries.
func iterateStructs(tx *Transaction, cs *clientStructs, clock, length int, f func(*item)) {
	if length == 0 {
		return
	}
	end := clock + length
	s := &tx.doc.store
	i := s.findIndexCleanStart(tx, cs, clock)
	if i < 0 {
		return
	}
	for {
		st := cs.at(i)
		i++
		if end < st.id.clock+st.length {
			s.findIndexCleanStart(tx, cs, end)
		}
		f(st)
		if i >= cs.len() || cs.at(i).id.clock >= end {
			return
		}
	}
}

func (t *typeBase) deleteText(tx *Transaction, p *textPos, length int) {
	startLength := length
	startAttrs := p.attrs.clone()
	start := p.right
	for length > 0 && p.right != nil {
		r := p.right
		if !r.deleted() {
			switch r.content.kind {
			case kindType, kindEmbed, kindString:
				if length < r.length {
					tx.doc.store.getItemCleanStart(tx, id{r.id.client, r.id.clock + length})
				}
				length -= r.length
				r.delete(tx)
			}
		}
		p.forward()
	}
	if start != nil && t.hasFormatting { // without format items there is nothing to clean
		cleanupFormattingGap(tx, start, p.right, startAttrs, &p.attrs)
	}
	if t.useMarkers() {
		t.updateMarkerChanges(p.index, -startLength+length)
	}
}

// ---- public API ----

// Len returns the length in UTF-16 code units (embeds count 1).
func (t *Text) Len() int {
	if t.doc == nil {
		return t.scratch().length
	}
	return t.length
}

// String returns the text without embeds and formatting.
func (t *Text) String() string {
	if t.doc == nil {
		return textString(&t.scratch().typeBase)
	}
	return textString(&t.typeBase)
}

func textString(t *typeBase) string {
	var b strings.Builder
	b.Grow(t.length)
	for n := t.start; n != nil; n = n.right {
		if n.content.kind == kindString && !n.deleted() {
			b.Write(n.content.str)
		}
	}
	return b.String()
}

// scratch integrates a copy of a prelim text's pending edits into a
// throwaway document so prelim texts can be read.
func (t *Text) scratch() *Text {
	d := NewDoc(WithClientID(0))
	s := d.GetText("t")
	d.Transact(func(tx *Transaction) {
		for _, op := range t.pre().ops {
			op(tx, &s.typeBase)
		}
	}, nil)
	return s
}

// Insert inserts s at index. With attrs == nil the text inherits the
// formatting at index (like Yjs insert without attributes); otherwise attrs
// are applied exactly (a nil value removes an attribute).
func (t *Text) Insert(index int, s string, attrs map[string]any) {
	explicit := attrs != nil
	if t.doc == nil {
		t.pre().ops = append(t.pre().ops, func(tx *Transaction, tb *typeBase) { tb.insert(tx, index, s, attrs, explicit) })
		return
	}
	tx, initial := t.doc.begin(nil, true)
	defer t.doc.end(tx, initial)
	t.insert(tx, index, s, attrs, explicit)
}

// InsertEmbed inserts an embed (a JSON value) or a prelim shared type at index.
func (t *Text) InsertEmbed(index int, embed any, attrs map[string]any) {
	var c content
	if tb := asTypeBase(embed); tb != nil {
		c = content{kind: kindType, ext: &contentExt{typ: tb}}
	} else {
		c = content{kind: kindEmbed, ext: &contentExt{contentMore: &contentMore{val: jsonValue(embed)}}}
	}
	t.run(func(tx *Transaction, tb *typeBase) {
		p := tb.findPosition(tx, index, attrs == nil)
		tb.insertContent(tx, p, c, 1, attrsFromMap(attrs))
	})
}

// Delete removes length code units starting at index.
func (t *Text) Delete(index, length int) {
	if length == 0 {
		return
	}
	if t.doc == nil {
		t.run(func(tx *Transaction, tb *typeBase) { tb.deleteText(tx, tb.findPosition(tx, index, true), length) })
		return
	}
	tx, initial := t.doc.begin(nil, true)
	defer t.doc.end(tx, initial)
	t.deleteText(tx, t.findPosition(tx, index, true), length)
}

// Format applies attrs to [index, index+length); a nil value removes an attribute.
func (t *Text) Format(index, length int, attrs map[string]any) {
	if length == 0 {
		return
	}
	t.run(func(tx *Transaction, tb *typeBase) {
		p := tb.findPosition(tx, index, false)
		if p.right == nil {
			return
		}
		tb.formatText(tx, p, length, attrsFromMap(attrs))
	})
}

// run applies op now, or queues it while the text is prelim.
func (t *typeBase) run(op func(tx *Transaction, tb *typeBase)) {
	if t.doc == nil {
		t.pre().ops = append(t.pre().ops, op)
		return
	}
	t.doc.transact(func(tx *Transaction) { op(tx, t) }, nil, true)
}

// ApplyDelta applies a Quill-style delta (insert, retain with attributes,
// delete), like Yjs applyDelta: inserts take exactly the given attributes.
func (t *Text) ApplyDelta(delta []Delta) { t.applyDelta(delta) }

func (t *typeBase) applyDelta(delta []Delta) {
	t.run(func(tx *Transaction, tb *typeBase) {
		p := &textPos{right: tb.start}
		for _, op := range delta {
			switch {
			case op.Insert != nil:
				attrs := attrsFromMap(op.Attributes)
				switch v := op.Insert.(type) {
				case string:
					if v != "" {
						str := []byte(validString(v))
						tb.insertContent(tx, p, content{kind: kindString, str: str}, utf16Len(str), attrs)
					}
				default:
					c := content{kind: kindEmbed, ext: &contentExt{contentMore: &contentMore{val: jsonValue(v)}}}
					if typ := asTypeBase(v); typ != nil {
						c = content{kind: kindType, ext: &contentExt{typ: typ}}
					}
					tb.insertContent(tx, p, c, 1, attrs)
				}
			case op.Retain > 0:
				tb.formatText(tx, p, op.Retain, attrsFromMap(op.Attributes))
			case op.Delete > 0:
				tb.deleteText(tx, p, op.Delete)
			}
		}
	})
}

// ToDelta returns the content as a Quill-style delta.
func (t *Text) ToDelta() []Delta {
	if t.doc == nil {
		return t.scratch().ToDelta()
	}
	return textDelta(&t.typeBase)
}

func textDelta(t *typeBase) []Delta {
	ops := []Delta{}
	var cur attrList
	var sb strings.Builder
	pack := func() {
		if sb.Len() > 0 {
			ops = append(ops, Delta{Insert: sb.String(), Attributes: cur.toMap()})
			sb.Reset()
		}
	}
	for n := t.start; n != nil; n = n.right {
		if n.deleted() {
			continue
		}
		switch n.content.kind {
		case kindString:
			sb.Write(n.content.str)
		case kindType, kindEmbed:
			pack()
			ops = append(ops, Delta{Insert: n.content.values()[0], Attributes: cur.toMap()})
		case kindFormat:
			pack()
			updateCurrentAttributes(&cur, &n.content)
		}
	}
	pack()
	return ops
}

// ToJSON returns the string content, like Yjs toJSON.
func (t *Text) ToJSON() string { return t.String() }

// Observe registers fn for changes of this text.
func (t *Text) Observe(fn func(e *Event)) (unsubscribe func()) { return t.observe(fn) }

// ObserveDeep registers fn for changes of this text and embedded types.
func (t *Text) ObserveDeep(fn func(events []*Event)) (unsubscribe func()) {
	return t.observeDeep(fn)
}

// textDelta computes the text change delta of an event (Yjs YTextEvent.delta,
// without its side effect of deleting redundant formats).
func (e *Event) textDelta() []Delta {
	tx := e.tx
	var delta []Delta
	var cur, old attrList
	changedAttrs := map[string]any{}
	action := ""
	var insert any
	var sb strings.Builder
	retain, deleteLen := 0, 0
	addOp := func() {
		switch action {
		case "delete":
			if deleteLen > 0 {
				delta = append(delta, Delta{Delete: deleteLen})
			}
			deleteLen = 0
		case "insert":
			if insert != nil || sb.Len() > 0 {
				op := Delta{Insert: insert}
				if insert == nil {
					op.Insert = sb.String()
				}
				if len(cur) > 0 {
					op.Attributes = map[string]any{}
					for _, a := range cur {
						if a.val != nil {
							op.Attributes[a.key] = a.val
						}
					}
				}
				delta = append(delta, op)
			}
			insert = nil
			sb.Reset()
		case "retain":
			if retain > 0 {
				op := Delta{Retain: retain}
				if len(changedAttrs) > 0 {
					op.Attributes = map[string]any{}
					for k, v := range changedAttrs {
						op.Attributes[k] = v
					}
				}
				delta = append(delta, op)
			}
			retain = 0
		}
		action = ""
	}
	for it := e.target.start; it != nil; it = it.right {
		adds, deletes := tx.adds(it), tx.deleteSet.contains(it.id)
		switch it.content.kind {
		case kindType, kindEmbed:
			if adds {
				if !deletes {
					addOp()
					action = "insert"
					insert = it.content.values()[0]
					addOp()
				}
			} else if deletes {
				if action != "delete" {
					addOp()
					action = "delete"
				}
				deleteLen++
			} else if !it.deleted() {
				if action != "retain" {
					addOp()
					action = "retain"
				}
				retain++
			}
		case kindString:
			if adds {
				if !deletes {
					if action != "insert" {
						addOp()
						action = "insert"
					}
					sb.Write(it.content.str)
				}
			} else if deletes {
				if action != "delete" {
					addOp()
					action = "delete"
				}
				deleteLen += it.length
			} else if !it.deleted() {
				if action != "retain" {
					addOp()
					action = "retain"
				}
				retain += it.length
			}
		case kindFormat:
			key, value := it.content.ext.key, it.content.ext.val
			if adds {
				if !deletes {
					curVal, _ := cur.get(key)
					if !equalAttrs(curVal, value) {
						if action == "retain" {
							addOp()
						}
						oldVal, _ := old.get(key)
						if equalAttrs(value, oldVal) {
							delete(changedAttrs, key)
						} else {
							changedAttrs[key] = value
						}
					}
				}
			} else if deletes {
				old.set(key, value)
				curVal, _ := cur.get(key)
				if !equalAttrs(curVal, value) {
					if action == "retain" {
						addOp()
					}
					changedAttrs[key] = curVal
				}
			} else if !it.deleted() {
				old.set(key, value)
				if a, ok := changedAttrs[key]; ok && !equalAttrs(a, value) {
					if action == "retain" {
						addOp()
					}
					if value == nil {
						delete(changedAttrs, key)
					} else {
						changedAttrs[key] = value
					}
				}
			}
			if !it.deleted() {
				if action == "insert" {
					addOp()
				}
				updateCurrentAttributes(&cur, &it.content)
			}
		}
	}
	addOp()
	for len(delta) > 0 {
		last := delta[len(delta)-1]
		if last.Retain > 0 && last.Attributes == nil {
			delta = delta[:len(delta)-1]
		} else {
			break
		}
	}
	return delta
}
