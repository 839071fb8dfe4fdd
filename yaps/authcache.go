package yaps

import (
	"slices"
	"sync"
	"time"
)

// authCache remembers, per list, the list row and the active permissions
// this process verified, so a read answers without asking the store (one
// joined query per request otherwise: most of a GET's cost on SQLite and a
// round trip on Postgres).
//
// It is only ever an accelerator for Authenticate:
//   - Only positive answers are cached; unknown lists, unknown, malformed
//     and revoked codes always go to the store.
//   - Every write re-checks its code and the archive state inside its own
//     transaction (stillActive, writable), so a stale entry can never let a
//     write through; it can only let a read through for a code that was
//     revoked, or show a list row that changed, in another process that
//     sent no notice, for at most Config.AuthCacheTTL.
//   - Changes made through this process update or drop the entry before
//     the call that made them returns (listWritten, forget), and notices of
//     other processes (Config.Notifier) drop it when they arrive.
//
// Races between a store read that fills the cache and a change that lands
// meanwhile are settled by a generation counter: every change bumps gen,
// and a fill that began before the latest change is discarded.
type authCache struct {
	ttl time.Duration // <= 0: disabled

	mu        sync.RWMutex
	gen       uint64
	lists     map[string]*authEntry
	suspended bool // the Notifier is not listening: nothing is cached
}

type authEntry struct {
	expires time.Time
	list    List
	perms   map[string]Permission // by string(code hash); active ones only
}

// Bounds of the cache: past them it starts over (a miss costs one query).
const (
	authCacheLists = 10000
	authCachePerms = 64
)

func newAuthCache(ttl time.Duration) *authCache {
	return &authCache{ttl: ttl, lists: map[string]*authEntry{}}
}

func (c *authCache) enabled() bool { return c != nil && c.ttl > 0 }

// actor returns copies of the cached list and permission for ref and
// hash, as an Actor of them: the three are allocated together
// (authenticate runs on every request).
func (c *authCache) actor(ref string, hash []byte) (*Actor, bool) {
	l, p, ok := c.lookup(ref, hash)
	if !ok {
		return nil, false
	}
	x := &struct {
		a Actor
		l List
		p Permission
	}{l: *l.Clone(), p: *clonePermission(&p)}
	x.a = Actor{List: &x.l, Permission: &x.p}
	return &x.a, true
}

// lookup returns the cached list and permission for ref and hash, which
// share memory with the cache (actor copies them).
func (c *authCache) lookup(ref string, hash []byte) (l List, p Permission, ok bool) {
	if !c.enabled() {
		return l, p, false
	}
	c.mu.RLock()
	e := c.lists[ref]
	if e != nil && !c.suspended && time.Now().Before(e.expires) {
		if p, ok = e.perms[string(hash)]; ok {
			l = e.list
		}
	}
	c.mu.RUnlock()
	return l, p, ok
}

// ticket is taken before a store read whose result may fill the cache.
func (c *authCache) ticket() uint64 {
	if !c.enabled() {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// fill records a verified, active permission and its list as read from the
// store after ticket t; it does nothing if anything changed since t.
func (c *authCache) fill(t uint64, l *List, p *Permission) {
	if !c.enabled() || !p.Active() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != t || c.suspended {
		return
	}
	e := c.lists[l.Ref]
	now := time.Now()
	if e == nil || !now.Before(e.expires) || len(e.perms) >= authCachePerms {
		if e == nil && len(c.lists) >= authCacheLists {
			c.lists = map[string]*authEntry{}
		}
		e = &authEntry{expires: now.Add(c.ttl), perms: map[string]Permission{}}
		c.lists[l.Ref] = e
	}
	// Both reads happened after the last change, so either row is current.
	e.list = *l.Clone()
	e.perms[string(p.CodeHash)] = *clonePermission(p)
}

// listWritten replaces the cached row of a list this process just wrote
// (called after the commit, under the list's lock, so calls for one list
// arrive in commit order).
func (c *authCache) listWritten(l *List) {
	if !c.enabled() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e := c.lists[l.Ref]; e != nil {
		e.list = *l.Clone()
	}
}

// forget drops what is cached for ref (a permission or the list row
// changed outside the write path, or another process says so).
func (c *authCache) forget(ref string) {
	if !c.enabled() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.lists, ref)
}

// suspend drops everything and, while on, caches nothing: notices of other
// processes are being missed (NoticeLost), so no entry can be trusted, and
// a revoking process does not wait for this one. Turning it off (NoticeResync)
// starts from an empty cache too.
func (c *authCache) suspend(on bool) {
	if !c.enabled() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.lists = map[string]*authEntry{}
	c.suspended = on
}

func clonePermission(p *Permission) *Permission {
	c := *p
	c.Scopes = slices.Clone(p.Scopes)
	c.CodeHash = slices.Clone(p.CodeHash)
	if p.RevokedAt != nil {
		r := *p.RevokedAt
		c.RevokedAt = &r
	}
	return &c
}
