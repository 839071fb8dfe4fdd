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
