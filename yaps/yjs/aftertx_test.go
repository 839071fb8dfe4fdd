package yjs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// A scoped after-transaction observer sees each transaction as an
// unscoped one does, and lets the document reuse the transaction's memory:
// an edit allocates less under it.
func TestOnAfterTransactionScoped(t *testing.T) { // not parallel: AllocsPerRun
	edits := func(scoped bool) (seen [][]any, allocs float64) {
		d := yjs.NewDoc(yjs.WithClientID(1))
		m := d.GetMap("m")
		txt := yjs.NewText("")
		m.Set("t", txt)
		observe := d.OnAfterTransaction
		if scoped {
			observe = d.OnAfterTransactionScoped
		}
		observe(func(tx *yjs.Transaction) {
			var keys []any
			for _, ct := range tx.ChangedTypes() {
				if ct == any(m) {
					keys = append(keys, tx.ChangedKeys(m)...)
				} else {
					keys = append(keys, "text")
				}
			}
			seen = append(seen, keys)
		})
		m.Set("a", 1)
		txt.Insert(0, "x", nil)
		m.Set("b", 2)
		seen = seen[:0:0]
		m.Set("a", 3)
		txt.Insert(1, "y", nil)
		got := seen
		allocs = testing.AllocsPerRun(100, func() { txt.Insert(0, "z", nil) })
		return got, allocs
	}
	want, unscopedAllocs := edits(false)
	got, scopedAllocs := edits(true)
	require.Equal(t, [][]any{{"a"}, {"text"}}, want)
	require.Equal(t, want, got)
	require.Less(t, scopedAllocs, unscopedAllocs)
}

// A ScopedObserver sees the transactions of the documents it is attached
// to, and only while attached, in the order of registration; attaching
// and detaching it around each transaction allocates nothing.
func TestScopedObserver(t *testing.T) { // not parallel: AllocsPerRun
	d := yjs.NewDoc(yjs.WithClientID(1))
	m := d.GetMap("m")
	var order []string
	first := d.OnAfterTransactionScoped(func(*yjs.Transaction) { order = append(order, "first") })
	a := yjs.NewScopedObserver(func(*yjs.Transaction) { order = append(order, "a") })
	b := yjs.NewScopedObserver(func(*yjs.Transaction) { order = append(order, "b") })

	m.Set("k", 1)
	d.Attach(a)
	m.Set("k", 2)
	d.Attach(b)
	m.Set("k", 3)
	d.Detach(a) // not the last attached
	m.Set("k", 4)
	d.Detach(b)
	d.Detach(b) // no longer attached: nothing
	m.Set("k", 5)
	first()
	require.Equal(t, []string{"first", "first", "a", "first", "a", "b", "first", "b", "first"}, order)

	order = order[:0]
	allocs := testing.AllocsPerRun(100, func() {
		d.Attach(a)
		d.Detach(a)
	})
	require.Zero(t, allocs)
	d.Attach(a)
	m.Set("k", 6)
	d.Detach(a)
	require.Equal(t, []string{"a"}, order)
}

// TransactRecorded records the update of its own transaction, the one an
// OnUpdate observer gets, and nothing else: no update of the document's
// other transactions, none when nothing changed, none of its own when
// nested in another transaction (which gets the whole update).
func TestTransactRecorded(t *testing.T) {
	t.Parallel()
	d := yjs.NewDoc(yjs.WithClientID(1))
	m := d.GetMap("m")
	var seen [][]byte
	unsub := d.OnUpdate(func(u []byte, _ any) { seen = append(seen, u) })
	defer unsub()
	var a, b yjs.UpdateRecorder

	m.Set("k", 1)
	d.TransactRecorded(&a, func() { m.Set("k", 2) }, "o")
	d.TransactRecorded(&a, func() {}, nil) // no change: no update
	d.TransactRecorded(&a, func() {
		m.Set("k", 3)
		d.TransactRecorded(&b, func() { m.Set("j", 1) }, nil)
	}, nil)
	d.Transact(func(*yjs.Transaction) {
		d.TransactRecorded(&b, func() { m.Set("j", 2) }, nil)
	}, nil)
	m.Set("k", 4)
	require.Len(t, seen, 5)
	require.Equal(t, [][]byte{seen[1], seen[2]}, a.Updates)
	require.Empty(t, b.Updates)
}

// TransactRecorded makes the update Transact makes, and reuses the
// transaction's memory, which Transact hands to its fn and cannot.
func TestTransactRecordedAllocs(t *testing.T) { // not parallel: AllocsPerRun
	updates := func(recorded bool) (got [][]byte) {
		d := yjs.NewDoc(yjs.WithClientID(3))
		var r yjs.UpdateRecorder
		unsub := d.OnUpdate(func(u []byte, _ any) { got = append(got, u) })
		defer unsub()
		m := d.GetMap("m")
		for i := range 3 {
			edit := func() {
				m.Set("k", i)
				m.Set("t", yjs.NewText("abc"))
			}
			if recorded {
				d.TransactRecorded(&r, edit, nil)
			} else {
				d.Transact(func(*yjs.Transaction) { edit() }, nil)
			}
		}
		if recorded {
			require.Equal(t, got, r.Updates)
		}
		return got
	}
	require.Equal(t, updates(false), updates(true))

	d := yjs.NewDoc()
	var r yjs.UpdateRecorder
	d.TransactRecorded(&r, func() {}, nil)
	require.Zero(t, testing.AllocsPerRun(100, func() { d.TransactRecorded(&r, func() {}, nil) }))
	// A control that the measure sees the transaction, not a contract.
	require.NotZero(t, testing.AllocsPerRun(100, func() { d.Transact(func(*yjs.Transaction) {}, nil) }))
}

// A panic in TransactRecorded's fn leaves the recorder detached and the
// document usable.
func TestTransactRecordedPanic(t *testing.T) {
	t.Parallel()
	d := yjs.NewDoc()
	m := d.GetMap("m")
	var r yjs.UpdateRecorder
	require.PanicsWithValue(t, "boom", func() {
		d.TransactRecorded(&r, func() { m.Set("a", 1); panic("boom") }, nil)
	})
	r.Updates = nil
	m.Set("b", 2)
	require.Empty(t, r.Updates)
	v, ok := m.Get("b")
	require.True(t, ok)
	require.EqualValues(t, 2, v)
	d.TransactRecorded(&r, func() { m.Set("c", 3) }, nil)
	require.Len(t, r.Updates, 1)
}

// An observer handed the transaction's events keeps them: the document
// does not reuse the memory of a TransactRecorded transaction it exposed.
func TestTransactRecordedObservedTransactionKept(t *testing.T) {
	t.Parallel()
	d := yjs.NewDoc()
	m := d.GetMap("m")
	var evs []*yjs.Event
	m.Observe(func(e *yjs.Event) { evs = append(evs, e) })
	var r yjs.UpdateRecorder
	d.TransactRecorded(&r, func() { m.Set("a", 1) }, "o1")
	d.TransactRecorded(&r, func() { m.Set("b", 2) }, "o2")
	require.Len(t, evs, 2)
	require.Equal(t, "o1", evs[0].Transaction().Origin())
	require.Equal(t, []string{"a"}, evs[0].KeysChanged())
	require.Equal(t, "o2", evs[1].Transaction().Origin())
}
