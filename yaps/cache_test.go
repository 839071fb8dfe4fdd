package yaps

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// docWith returns a document of n structs (one map value each).
func docWith(t *testing.T, n int) *yjs.Doc {
	t.Helper()
	d := yjs.NewDoc()
	d.Transact(func(*yjs.Transaction) {
		m := d.GetMap("m")
		for i := range n {
			m.Set(fmt.Sprint(i), i)
		}
	}, nil)
	require.Equal(t, n, d.StructCount())
	return d
}

// TestDocCacheMemory checks the memory bound: past it the least recently
// used documents are unloaded, except those in use or pinned.
func TestDocCacheMemory(t *testing.T) {
	t.Parallel()
	const structs = 100
	per := int64(structs * docStructMemory)
	c := newDocCache(100, 3*per, time.Hour)
	load := func(ref string) {
		e := c.acquire(ref)
		if e.doc == nil {
			e.doc = docWith(t, structs)
		}
		c.release(e)
	}
	loaded := func() map[string]bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		out := map[string]bool{}
		var sum int64
		for ref, e := range c.entries {
			out[ref] = true
			sum += e.memory
		}
		require.Equal(t, sum, c.memory, "the cache's sum is its entries'")
		return out
	}

	for _, ref := range []string{"a", "b", "c"} {
		load(ref)
	}
	require.Equal(t, map[string]bool{"a": true, "b": true, "c": true}, loaded())
	require.Equal(t, 3*per, c.memory)

	load("a") // a is now the most recently used
	load("d") // over the bound: b, the least recently used, goes
	require.Equal(t, map[string]bool{"a": true, "c": true, "d": true}, loaded())

	// In use or pinned: kept, whatever the bound.
	unpin := c.pin("c")
	held := c.acquire("a")
	load("e")
	load("f")
	require.Equal(t, map[string]bool{"a": true, "c": true, "f": true}, loaded())
	c.release(held)
	unpin()
	load("f")
	require.Equal(t, map[string]bool{"a": true, "c": true, "f": true}, loaded())
	require.Equal(t, 3*per, c.memory)

	// A document that grows is counted as it is at its last release; c,
	// unpinned, is now the least recently used.
	e := c.acquire("f")
	e.doc = docWith(t, 2*structs)
	c.release(e)
	require.Equal(t, map[string]bool{"a": true, "f": true}, loaded())

	// A dropped document counts nothing.
	e = c.acquire("f")
	e.drop()
	c.release(e)
	require.Equal(t, per, c.memory)

	// No bound: only the size counts.
	unbounded := newDocCache(100, -1, time.Hour)
	for i := range 10 {
		e := unbounded.acquire(fmt.Sprint(i))
		e.doc = docWith(t, structs)
		unbounded.release(e)
	}
	require.Len(t, unbounded.entries, 10)
}
