package yjs

// Array is a Yjs Y.Array.
type Array struct{ typeBase }

// NewArray returns a prelim array that is integrated when inserted.
func NewArray() *Array { return newTypeBase(typeArray).pub.(*Array) }

// Doc returns the document the array belongs to (nil while prelim).
func (a *Array) Doc() *Doc { return a.doc }

// Len returns the number of elements.
func (a *Array) Len() int {
	if a.doc == nil {
		return len(a.pre().list)
	}
	return a.length
}

// Get returns the element at index, or nil if out of range.
func (a *Array) Get(index int) any {
	if a.doc == nil {
		if index < 0 || index >= len(a.pre().list) {
			return nil
		}
		return a.pre().list[index]
	}
	v, _ := a.listGet(index)
	return v
}

// Insert inserts values at index. It panics if index is out of range or a
// value is unsupported; TryInsert returns an error instead.
func (a *Array) Insert(index int, values ...any) {
	if err := a.TryInsert(index, values...); err != nil {
		panic(err)
	}
}

// TryInsert is Insert returning errors.
func (a *Array) TryInsert(index int, values ...any) error {
	if a.doc == nil {
		p := a.pre()
		if index < 0 || index > len(p.list) {
			return errLength(index, len(p.list))
		}
		for _, v := range values {
			if err := checkValue(v); err != nil {
				return err
			}
		}
		p.list = append(p.list[:index], append(append([]any(nil), values...), p.list[index:]...)...)
		return nil
	}
	tx, initial := a.doc.begin(nil, true)
	defer a.doc.end(tx, initial)
	return a.listInsert(tx, index, values)
}

// Push appends values.
func (a *Array) Push(values ...any) { a.Insert(a.Len(), values...) }

// Unshift prepends values.
func (a *Array) Unshift(values ...any) { a.Insert(0, values...) }

// Delete removes length elements starting at index. It panics when the
// range is out of bounds; TryDelete returns an error instead.
func (a *Array) Delete(index, length int) {
	if err := a.TryDelete(index, length); err != nil {
		panic(err)
	}
}

// TryDelete is Delete returning errors.
func (a *Array) TryDelete(index, length int) error {
	if a.doc == nil {
		p := a.pre()
		if index < 0 || length < 0 || index+length > len(p.list) {
			return errLength(index+length, len(p.list))
		}
		p.list = append(p.list[:index], p.list[index+length:]...)
		return nil
	}
	var err error
	a.transact(func(tx *Transaction) { err = a.listDelete(tx, index, length) })
	return err
}

// ToSlice returns the elements; nested types are returned as *Map, *Array, ...
func (a *Array) ToSlice() []any {
	if a.doc == nil {
		return append([]any(nil), a.pre().list...)
	}
	return a.listToSlice()
}

// ToJSON returns the elements with nested types converted like Yjs toJSON.
func (a *Array) ToJSON() []any {
	if a.doc == nil {
		list := a.pre().list
		out := make([]any, len(list))
		for i, v := range list {
			out[i] = toJSONValue(v)
		}
		return out
	}
	return a.listJSON()
}

func (t *typeBase) listJSON() []any {
	vals := t.listToSlice()
	for i, v := range vals {
		vals[i] = toJSONValue(v)
	}
	return vals
}

// Observe registers fn for changes of this array.
func (a *Array) Observe(fn func(e *Event)) (unsubscribe func()) { return a.observe(fn) }

// ObserveDeep registers fn for changes of this array and nested types.
func (a *Array) ObserveDeep(fn func(events []*Event)) (unsubscribe func()) {
	return a.observeDeep(fn)
}
