package yjs

import "sort"

// Map is a Yjs Y.Map. Create detached ("prelim") maps with NewMap and
// insert them into a document; root maps come from Doc.GetMap.
type Map struct{ typeBase }

// NewMap returns a prelim map that is integrated when inserted into a document.
func NewMap() *Map { return newTypeBase(typeMap).pub.(*Map) }

// Doc returns the document the map belongs to (nil while prelim).
func (m *Map) Doc() *Doc { return m.doc }

// Set stores value under key. Values: nil, bool, numbers, string, []any,
// map[string]any, []byte, prelim shared types and *Doc. It panics on
// values Yjs cannot store; use TrySet to get an error instead.
func (m *Map) Set(key string, value any) {
	if err := m.TrySet(key, value); err != nil {
		panic(err)
	}
}

// TrySet is Set returning an error for unsupported values.
func (m *Map) TrySet(key string, value any) error {
	if err := checkValue(value); err != nil {
		return err
	}
	if m.doc == nil {
		p := m.pre()
		if p.m == nil {
			p.m = map[string]any{}
		}
		if _, ok := p.m[key]; !ok {
			if p.keys == nil {
				// A prelim map is usually filled with a handful of keys
				// (a yap's members): grow once, not at 1, 2, 4 and 8.
				p.keys = make([]string, 0, 8)
			}
			p.keys = append(p.keys, key)
		}
		p.m[key] = value
		return nil
	}
	tx, initial := m.doc.begin(nil, true)
	defer m.doc.end(tx, initial)
	return m.mapSet(tx, key, value)
}

// Get returns the value stored under key.
func (m *Map) Get(key string) (any, bool) {
	if m.doc == nil {
		v, ok := m.pre().m[key]
		return v, ok
	}
	return m.mapGet(key)
}

// Delete removes key.
func (m *Map) Delete(key string) {
	if m.doc == nil {
		p := m.pre()
		if _, ok := p.m[key]; ok {
			delete(p.m, key)
			for i, k := range p.keys {
				if k == key {
					p.keys = append(p.keys[:i], p.keys[i+1:]...)
					break
				}
			}
		}
		return
	}
	m.transact(func(tx *Transaction) { m.mapDelete(tx, key) })
}

// Has reports whether key is set.
func (m *Map) Has(key string) bool {
	_, ok := m.Get(key)
	return ok
}

// Keys returns the keys in sorted order.
func (m *Map) Keys() []string {
	if m.doc == nil {
		keys := append([]string(nil), m.pre().keys...)
		sort.Strings(keys)
		return keys
	}
	return m.mapKeys()
}

// Len returns the number of keys.
func (m *Map) Len() int {
	if m.doc == nil {
		return len(m.pre().keys)
	}
	n := 0
	for _, it := range m.m {
		if !it.deleted() {
			n++
		}
	}
	return n
}

// ToJSON returns the map with nested types converted like Yjs toJSON.
func (m *Map) ToJSON() map[string]any {
	if m.doc == nil {
		out := make(map[string]any, len(m.pre().m))
		for k, v := range m.pre().m {
			out[k] = toJSONValue(v)
		}
		return out
	}
	return m.mapJSON()
}

func (t *typeBase) mapJSON() map[string]any {
	out := make(map[string]any, len(t.m))
	for k, it := range t.m {
		if !it.deleted() {
			out[k] = toJSONValue(it.content.lastValue())
		}
	}
	return out
}

// Observe registers fn for changes of this map; see Event.
func (m *Map) Observe(fn func(e *Event)) (unsubscribe func()) { return m.observe(fn) }

// ObserveDeep registers fn for changes of this map and everything nested in it.
func (m *Map) ObserveDeep(fn func(events []*Event)) (unsubscribe func()) {
	return m.observeDeep(fn)
}
