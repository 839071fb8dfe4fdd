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

// Entries held by a pin, a user or sync's watch are never evicted, and a
// cache kept over its bounds by them does not look at them again on every
// acquire and release: each step of an eviction evicts an entry or sets a
// watched one aside until its watch is over.
func TestDocCacheHeldEntriesAreNotRescanned(t *testing.T) {
	t.Parallel()
	c := newDocCache(2, -1, time.Hour)
	present := func(refs ...string) {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ref := range refs {
			require.Contains(t, c.entries, ref)
		}
	}
	var pinned, watched []string
	var unpins []func()
	for i := range 100 {
		ref := fmt.Sprint("pinned", i)
		pinned = append(pinned, ref)
		unpins = append(unpins, c.pin(ref))
	}
	held := c.acquire("held")
	for i := range 100 {
		ref := fmt.Sprint("watched", i)
		watched = append(watched, ref)
		e := c.acquire(ref)
		c.watch(ref, time.Hour)
		c.release(e) // over the size: set aside once
	}
	require.EqualValues(t, 100, c.examined)
	for range 50 {
		e := c.acquire("x")
		c.release(e) // the one entry nobody holds: evicted
	}
	require.EqualValues(t, 150, c.examined, "held and watched entries were looked at again")
	present(pinned...)
	present(watched...)
	present("held")
	require.NotContains(t, c.entries, "x")

	// Once their watch is over, watched entries go like any other.
	c.mu.Lock()
	c.evictLocked(time.Now().Add(2*time.Hour), true)
	for _, ref := range watched {
		require.NotContains(t, c.entries, ref)
	}
	c.mu.Unlock()
	present(pinned...)

	// Released and unpinned, the rest go down to the size.
	c.release(held)
	for _, unpin := range unpins {
		unpin()
	}
	e := c.acquire("y")
	c.release(e)
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.entries, 2)
	require.Contains(t, c.entries, "y", "the most recently used stays")
	require.Equal(t, c.lru.Len(), len(c.entries))
}

// TestDocCacheGrace checks that documents used within the grace stay
// loaded past the bounds, and go, least recently used first, once the
// grace is over.
func TestDocCacheGrace(t *testing.T) {
	t.Parallel()
	const structs = 100
	per := int64(structs * docStructMemory)
	for _, tc := range []struct {
		name   string
		max    int
		memory int64
	}{
		{"memory", 100, per},
		{"size", 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newDocCache(tc.max, tc.memory, time.Hour)
			c.grace = time.Minute
			for _, ref := range []string{"a", "b", "c"} {
				e := c.acquire(ref)
				e.doc = docWith(t, structs)
				c.release(e)
			}
			require.Len(t, c.entries, 3, "used within the grace: kept past the bound")
			require.Equal(t, 3*per, c.memory)

			c.mu.Lock()
			c.evictLocked(time.Now().Add(30*time.Second), false)
			require.Len(t, c.entries, 3)
			c.evictLocked(time.Now().Add(2*time.Minute), false)
			require.Len(t, c.entries, 1, "past the grace: evicted down to the bound")
			require.Contains(t, c.entries, "c", "the most recently used stays")
			c.mu.Unlock()
			require.Equal(t, per, c.memory)
		})
	}
}

// Past the grace, documents over the bounds go without waiting for another
// use of the cache: the eviction that found them within the grace runs
// again when it is over.
func TestDocCacheGraceRecheck(t *testing.T) {
	t.Parallel()
	const structs = 100
	per := int64(structs * docStructMemory)
	c := newDocCache(100, per, time.Hour)
	c.grace = 50 * time.Millisecond
	for _, ref := range []string{"a", "b", "c"} {
		e := c.acquire(ref)
		e.doc = docWith(t, structs)
		c.release(e)
	}
	count := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.entries)
	}
	require.Equal(t, 3, count(), "within the grace")
	require.Eventually(t, func() bool { return count() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the documents over the bound stayed after the grace")
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Contains(t, c.entries, "c")
	require.Equal(t, per, c.memory)
}
