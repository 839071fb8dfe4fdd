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
