package yjs

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// XmlFragment is a Yjs Y.XmlFragment: a list of XmlElement and XmlText nodes.
type XmlFragment struct{ typeBase }

// XmlElement is a Yjs Y.XmlElement: a named node with attributes and children.
type XmlElement struct{ typeBase }

// XmlText is a Yjs Y.XmlText: formatted text inside XML.
type XmlText struct{ typeBase }

// XmlHook is a Yjs Y.XmlHook: a named map inside XML.
type XmlHook struct{ typeBase }

// NewXmlFragment returns a prelim fragment.
func NewXmlFragment() *XmlFragment { return newTypeBase(typeXmlFragment).pub.(*XmlFragment) }

// NewXmlElement returns a prelim element with the given node name.
func NewXmlElement(nodeName string) *XmlElement {
	e := newTypeBase(typeXmlElement).pub.(*XmlElement)
	e.nodeName = nodeName
	return e
}

// NewXmlText returns a prelim XML text.
func NewXmlText(s string) *XmlText {
	t := newTypeBase(typeXmlText).pub.(*XmlText)
	if s != "" {
		t.pre().ops = append(t.pre().ops, func(tx *Transaction, tb *typeBase) { tb.insert(tx, 0, s, nil, false) })
	}
	return t
}

// xmlString renders a node like Yjs toString.
func xmlString(v any) string {
	switch x := v.(type) {
	case *XmlElement:
		return x.String()
	case *XmlText:
		return x.String()
	case *XmlFragment:
		return x.String()
	case *XmlHook:
		return "[object Object]"
	}
	return jsString(v)
}

// jsString formats a value like JavaScript string conversion.
func jsString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return map[bool]string{true: "Infinity", false: "NaN"}[math.IsInf(x, 1)]
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case undefinedValue:
		return "undefined"
	case []any:
		parts := make([]string, len(x))
		for i, el := range x {
			if el != nil {
				parts[i] = jsString(el)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

func childrenString(t *typeBase) string {
	var b strings.Builder
	for _, c := range t.listToSlice() {
		b.WriteString(xmlString(c))
	}
	return b.String()
}

// Doc returns the document (nil while prelim).
func (f *XmlFragment) Doc() *Doc { return f.doc }

// Len returns the number of child nodes.
func (f *XmlFragment) Len() int { return xmlLen(&f.typeBase) }

// Get returns the child at index.
func (f *XmlFragment) Get(index int) any { return xmlGet(&f.typeBase, index) }

// ToSlice returns the children.
func (f *XmlFragment) ToSlice() []any { return xmlSlice(&f.typeBase) }

// Insert inserts prelim XmlElement/XmlText nodes at index.
func (f *XmlFragment) Insert(index int, nodes ...any) { xmlInsert(&f.typeBase, index, nodes) }

// Push appends nodes.
func (f *XmlFragment) Push(nodes ...any) { f.Insert(f.Len(), nodes...) }

// Delete removes length children at index.
func (f *XmlFragment) Delete(index, length int) { xmlDelete(&f.typeBase, index, length) }

// String renders the fragment like Yjs toString.
func (f *XmlFragment) String() string { return childrenString(&f.typeBase) }

// ToJSON is String, like Yjs.
func (f *XmlFragment) ToJSON() string { return f.String() }

// Observe registers fn for changes of the fragment.
func (f *XmlFragment) Observe(fn func(e *Event)) func() { return f.observe(fn) }

// ObserveDeep registers fn for changes of the fragment and its descendants.
func (f *XmlFragment) ObserveDeep(fn func(events []*Event)) func() { return f.observeDeep(fn) }

func xmlLen(t *typeBase) int {
	if t.doc == nil {
		return len(t.pre().list)
	}
	return t.length
}

func xmlGet(t *typeBase, i int) any {
	if t.doc == nil {
		if i < 0 || i >= len(t.pre().list) {
			return nil
		}
		return t.pre().list[i]
	}
	v, _ := t.listGet(i)
	return v
}

func xmlSlice(t *typeBase) []any {
	if t.doc == nil {
		return append([]any(nil), t.pre().list...)
	}
	return t.listToSlice()
}

func xmlInsert(t *typeBase, index int, nodes []any) {
	if t.doc == nil {
		p := t.pre()
		if index < 0 || index > len(p.list) {
			panic(errLength(index, len(p.list)))
		}
		p.list = append(p.list[:index], append(append([]any(nil), nodes...), p.list[index:]...)...)
		return
	}
	var err error
	t.transact(func(tx *Transaction) { err = t.listInsert(tx, index, nodes) })
	if err != nil {
		panic(err)
	}
}

func xmlDelete(t *typeBase, index, length int) {
	if t.doc == nil {
		p := t.pre()
		p.list = append(p.list[:index], p.list[index+length:]...)
		return
	}
	var err error
	t.transact(func(tx *Transaction) { err = t.listDelete(tx, index, length) })
	if err != nil {
		panic(err)
	}
}

// Doc returns the document (nil while prelim).
func (e *XmlElement) Doc() *Doc { return e.doc }

// NodeName returns the element's node name.
func (e *XmlElement) NodeName() string { return e.nodeName }

// Len returns the number of child nodes.
func (e *XmlElement) Len() int { return xmlLen(&e.typeBase) }

// Get returns the child at index.
func (e *XmlElement) Get(index int) any { return xmlGet(&e.typeBase, index) }

// ToSlice returns the children.
func (e *XmlElement) ToSlice() []any { return xmlSlice(&e.typeBase) }

// Insert inserts prelim nodes at index.
func (e *XmlElement) Insert(index int, nodes ...any) { xmlInsert(&e.typeBase, index, nodes) }

// Push appends nodes.
func (e *XmlElement) Push(nodes ...any) { e.Insert(e.Len(), nodes...) }

// Delete removes length children at index.
func (e *XmlElement) Delete(index, length int) { xmlDelete(&e.typeBase, index, length) }

// SetAttribute sets an attribute (usually a string).
func (e *XmlElement) SetAttribute(key string, value any) { setAttr(&e.typeBase, key, value) }

// RemoveAttribute deletes an attribute.
func (e *XmlElement) RemoveAttribute(key string) {
	if e.doc == nil {
		delete(e.pre().m, key)
		return
	}
	e.transact(func(tx *Transaction) { e.mapDelete(tx, key) })
}

// GetAttribute returns an attribute value.
func (e *XmlElement) GetAttribute(key string) (any, bool) {
	if e.doc == nil {
		v, ok := e.pre().m[key]
		return v, ok
	}
	return e.mapGet(key)
}

// Attributes returns all attributes.
func (e *XmlElement) Attributes() map[string]any {
	if e.doc == nil {
		out := map[string]any{}
		for k, v := range e.pre().m {
			out[k] = v
		}
		return out
	}
	out := map[string]any{}
	for k, it := range e.m {
		if !it.deleted() {
			out[k] = it.content.lastValue()
		}
	}
	return out
}

func setAttr(t *typeBase, key string, value any) {
	if t.doc == nil {
		p := t.pre()
		if p.m == nil {
			p.m = map[string]any{}
		}
		if _, ok := p.m[key]; !ok {
			p.keys = append(p.keys, key)
		}
		p.m[key] = value
		return
	}
	var err error
	t.transact(func(tx *Transaction) { err = t.mapSet(tx, key, value) })
	if err != nil {
		panic(err)
	}
}

// String renders the element like Yjs toString.
func (e *XmlElement) String() string {
	attrs := e.Attributes()
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	name := strings.ToLower(e.nodeName)
	b.WriteString("<" + name)
	for _, k := range keys {
		b.WriteString(" " + k + `="` + jsString(attrs[k]) + `"`)
	}
	b.WriteString(">")
	b.WriteString(childrenString(&e.typeBase))
	b.WriteString("</" + name + ">")
	return b.String()
}

// ToJSON is String, like Yjs.
func (e *XmlElement) ToJSON() string { return e.String() }

// Observe registers fn for changes of the element.
func (e *XmlElement) Observe(fn func(ev *Event)) func() { return e.observe(fn) }

// ObserveDeep registers fn for changes of the element and its descendants.
func (e *XmlElement) ObserveDeep(fn func(events []*Event)) func() { return e.observeDeep(fn) }

// Doc returns the document (nil while prelim).
func (t *XmlText) Doc() *Doc { return t.doc }

// Len returns the length in UTF-16 code units.
func (t *XmlText) Len() int {
	if t.doc == nil {
		return t.asText().Len()
	}
	return t.length
}

// asText views the XmlText as a Text for reading prelim content.
func (t *XmlText) asText() *Text {
	if t.doc == nil {
		x := &Text{}
		x.kind, x.pub, x.pre().ops = typeText, x, t.pre().ops
		return x
	}
	return nil
}

// Insert inserts s at index (see Text.Insert).
func (t *XmlText) Insert(index int, s string, attrs map[string]any) {
	explicit := attrs != nil
	t.run(func(tx *Transaction, tb *typeBase) { tb.insert(tx, index, s, attrs, explicit) })
}

// Delete removes length code units at index.
func (t *XmlText) Delete(index, length int) {
	if length == 0 {
		return
	}
	t.run(func(tx *Transaction, tb *typeBase) { tb.deleteText(tx, tb.findPosition(tx, index, true), length) })
}

// Format formats [index, index+length).
func (t *XmlText) Format(index, length int, attrs map[string]any) {
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

// ApplyDelta applies a Quill-style delta (see Text.ApplyDelta).
func (t *XmlText) ApplyDelta(delta []Delta) { t.applyDelta(delta) }

// ToDelta returns the content as a delta.
func (t *XmlText) ToDelta() []Delta {
	if t.doc == nil {
		return t.asText().ToDelta()
	}
	return textDelta(&t.typeBase)
}

// String renders the text with formatting as nested tags, like Yjs toString.
func (t *XmlText) String() string {
	var b strings.Builder
	for _, d := range t.ToDelta() {
		names := make([]string, 0, len(d.Attributes))
		for n := range d.Attributes {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			b.WriteString("<" + n)
			if m, ok := d.Attributes[n].(map[string]any); ok {
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					b.WriteString(" " + k + `="` + jsString(m[k]) + `"`)
				}
			}
			b.WriteString(">")
		}
		if s, ok := d.Insert.(string); ok {
			b.WriteString(s)
		} else {
			b.WriteString(xmlString(d.Insert))
		}
		for i := len(names) - 1; i >= 0; i-- {
			b.WriteString("</" + names[i] + ">")
		}
	}
	return b.String()
}

// ToJSON is String, like Yjs.
func (t *XmlText) ToJSON() string { return t.String() }

// Observe registers fn for changes of the text.
func (t *XmlText) Observe(fn func(e *Event)) func() { return t.observe(fn) }

// ObserveDeep registers fn for changes of the text and embedded types.
func (t *XmlText) ObserveDeep(fn func(events []*Event)) func() { return t.observeDeep(fn) }

// Doc returns the document (nil while prelim).
func (h *XmlHook) Doc() *Doc { return h.doc }

// NewXmlHook returns a prelim hook (a named map inside XML).
func NewXmlHook(hookName string) *XmlHook {
	h := newTypeBase(typeXmlHook).pub.(*XmlHook)
	h.nodeName = hookName
	return h
}

// Set stores a value in the hook's map (values as for Map.Set).
func (h *XmlHook) Set(key string, value any) { setAttr(&h.typeBase, key, value) }

// HookName returns the hook name.
func (h *XmlHook) HookName() string { return h.nodeName }

// Get returns a value of the hook's map.
func (h *XmlHook) Get(key string) (any, bool) {
	if h.doc == nil {
		v, ok := h.pre().m[key]
		return v, ok
	}
	return h.mapGet(key)
}

// ToJSON returns the hook's map content.
func (h *XmlHook) ToJSON() map[string]any { return h.mapJSON() }
