package yjs

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Delta is one operation of a text or array delta, like Yjs delta entries:
// exactly one of Insert, Delete and Retain is set. For text, Insert holds a
// string or an embed; for arrays it holds []any.
type Delta struct {
	Insert     any            `json:"insert,omitempty"`
	Delete     int            `json:"delete,omitempty"`
	Retain     int            `json:"retain,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// String renders the operation as Yjs delta JSON.
func (d Delta) String() string {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Sprintf("%#v", d)
	}
	return string(b)
}

// KeyChange describes how one map key changed in a transaction.
type KeyChange struct {
	Action   string // "add", "update" or "delete"
	OldValue any
}

// Event describes the changes of one shared type in a transaction, like
// Yjs YEvent. Read it inside the observer callback: garbage collection after
// the transaction drops the content it refers to.
type Event struct {
	target        *typeBase
	currentTarget *typeBase
	tx            *Transaction
	changes       *changeSet
	delta         []Delta
	deltaDone     bool
}

// Target returns the shared type that changed.
func (e *Event) Target() any { return e.target.public() }

// CurrentTarget returns the type the observer was registered on.
func (e *Event) CurrentTarget() any { return e.currentTarget.public() }

// Transaction returns the transaction that caused the event.
func (e *Event) Transaction() *Transaction { return e.tx }

// Path returns the keys (string) and indices (int) leading from the
// current target to the target.
func (e *Event) Path() []any {
	path := []any{}
	child := e.target
	for child.item != nil && child != e.currentTarget {
		it := child.item
		if it.hasParentSub() {
			path = append(path, it.parentSub)
		} else {
			i := 0
			for c := it.parent.start; c != nil && c != it; c = c.right {
				if c.visible() {
					i += c.length
				}
			}
			path = append(path, i)
		}
		child = it.parent
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// KeysChanged returns the changed map keys, sorted.
func (e *Event) KeysChanged() []string {
	keys := make([]string, 0, len(e.changes.keys))
	for k := range e.changes.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Keys describes how each changed key changed.
func (e *Event) Keys() map[string]KeyChange {
	out := map[string]KeyChange{}
	tx := e.tx
	for key := range e.changes.keys {
		it := e.target.m[key]
		if it == nil {
			continue
		}
		if tx.adds(it) {
			prev := it.left
			for prev != nil && tx.adds(prev) {
				prev = prev.left
			}
			if tx.deleteSet.contains(it.id) {
				if prev != nil && tx.deleteSet.contains(prev.id) {
					out[key] = KeyChange{Action: "delete", OldValue: prev.content.lastValue()}
				}
			} else if prev != nil && tx.deleteSet.contains(prev.id) {
				out[key] = KeyChange{Action: "update", OldValue: prev.content.lastValue()}
			} else {
				out[key] = KeyChange{Action: "add"}
			}
		} else if tx.deleteSet.contains(it.id) {
			out[key] = KeyChange{Action: "delete", OldValue: it.content.lastValue()}
		}
	}
	return out
}

// Delta returns the list changes of an array or text.
func (e *Event) Delta() []Delta {
	if !e.deltaDone {
		e.deltaDone = true
		if e.target.kind == typeText || e.target.kind == typeXmlText {
			e.delta = e.textDelta()
		} else {
			e.delta = e.listDelta()
		}
	}
	return e.delta
}

func (e *Event) listDelta() []Delta {
	tx := e.tx
	var delta []Delta
	var last *Delta
	pack := func() {
		if last != nil {
			delta = append(delta, *last)
		}
	}
	for it := e.target.start; it != nil; it = it.right {
		if it.deleted() {
			if tx.deleteSet.contains(it.id) && !tx.adds(it) {
				if last == nil || last.Delete == 0 {
					pack()
					last = &Delta{}
				}
				last.Delete += it.length
			}
		} else if tx.adds(it) {
			if last == nil || last.Insert == nil {
				pack()
				last = &Delta{Insert: []any{}}
			}
			last.Insert = append(last.Insert.([]any), valuesOf(it)...)
		} else {
			if last == nil || last.Retain == 0 {
				pack()
				last = &Delta{}
			}
			last.Retain += it.length
		}
	}
	if last != nil && last.Retain == 0 {
		pack()
	}
	return delta
}

func valuesOf(it *item) []any {
	if it.content.kind == kindString {
		out := make([]any, 0, it.length)
		for i := 0; i < it.length; i++ {
			out = append(out, it.contentAt(i))
		}
		return out
	}
	return it.content.values()
}

// observe/observeDeep register listeners on a type.
func (t *typeBase) observe(fn func(e *Event)) func() {
	o := &observer{fn: fn}
	t.observers = append(t.observers, o)
	return func() { t.observers = removeObserver(t.observers, o) }
}

func (t *typeBase) observeDeep(fn func(events []*Event)) func() {
	o := &observer{deep: fn}
	t.deepObservers = append(t.deepObservers, o)
	return func() { t.deepObservers = removeObserver(t.deepObservers, o) }
}

func removeObserver(list []*observer, o *observer) []*observer {
	for i, x := range list {
		if x == o {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// callObservers emits events for every changed type, then deep events.
func (d *Doc) callObservers(tx *Transaction) {
	if len(tx.changed) == 0 {
		return
	}
	var parents map[*typeBase][]*Event
	for i := range tx.changed {
		cs := &tx.changed[i]
		t := cs.t
		if cs.removed || t.item != nil && t.item.deleted() {
			continue
		}
		if !tx.local {
			for _, m := range t.markers {
				m.p.setMarker(false)
			}
			t.markers = t.markers[:0]
			if t.hasFormatting && (t.kind == typeText || t.kind == typeXmlText) {
				tx.needFormattingCleanup = true
			}
		}
		if len(t.observers) == 0 && !d.hasDeepObservers(t) {
			continue
		}
		tx.exposed = true
		ev := &Event{target: t, currentTarget: t, tx: tx, changes: cs}
		if parents == nil {
			parents = map[*typeBase][]*Event{}
		}
		for p := t; ; {
			parents[p] = append(parents[p], ev)
			if p.item == nil || p.item.parent == nil {
				break
			}
			p = p.item.parent
		}
		for _, o := range append([]*observer(nil), t.observers...) {
			o.fn(ev)
		}
	}
	for t, events := range parents {
		if len(t.deepObservers) == 0 || (t.item != nil && t.item.deleted()) {
			continue
		}
		list := make([]*Event, 0, len(events))
		for _, ev := range events {
			if ev.target.item == nil || !ev.target.item.deleted() {
				c := *ev
				c.currentTarget = t
				list = append(list, &c)
			}
		}
		sort.SliceStable(list, func(i, j int) bool { return len(list[i].Path()) < len(list[j].Path()) })
		for _, o := range append([]*observer(nil), t.deepObservers...) {
			o.deep(list)
		}
	}
}

func (d *Doc) hasDeepObservers(t *typeBase) bool {
	for p := t; p != nil; {
		if len(p.deepObservers) > 0 {
			return true
		}
		if p.item == nil {
			return false
		}
		p = p.item.parent
	}
	return false
}
