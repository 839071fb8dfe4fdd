package yaps

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// docEntry is one list's live document in this process. mu serializes every
// use of doc (yjs documents are not safe for concurrent use) and every write
// to the list made by this process.
type docEntry struct {
	ref string
	mu  sync.Mutex

	// Guarded by mu.
	doc        *yjs.Doc        // nil: not loaded (or dropped after a failure)
	seq        int64           // last update seq doc reflects
	view       map[string]*Yap // valid yaps of doc, as projected into the store
	list       listFields      // list root of doc
	row        *List           // the list row as this process last wrote it at seq (nil: unknown)
	sinceState int64           // updates after the compacted state (for compaction)
	sinceBytes int64           // their size in bytes
	stateBytes int64           // size of the compacted state
	compacting bool            // a compaction was started for this entry
	// compactRunning: a compaction is writing without holding mu.
	compactRunning bool
	stale          bool                   // doc was dropped: rooms may lack what the reload finds
	perms          map[string]bool        // active permission ids seen by the poller
	permsAt        *ListVersion           // the counts ListVersions gave before perms was read; nil: unknown (a Notifier's resync reads perms without them)
	owners         map[any]string         // yap maps and their Y.Text/Y.Array members -> yap id; nil: rebuild
	auditAt        map[auditKey]time.Time // last committed coalescing sync audit entry per (code, yap)

	// Guarded by docCache.mu.
	memory     int64 // estimated memory of doc as of the last release
	users      int   // goroutines holding or waiting for the entry
	pins       int
	watchUntil time.Time // sync interest: poll the store for other processes' writes
	lastUsed   time.Time
	elem       *list.Element // on onList; nil while a user or a pin holds the entry
	onList     *list.List    // docCache.lru or docCache.watchedIdle
}

// docStructMemory estimates the heap a loaded document holds per struct:
// about 150-190 bytes for a run of text, 570 for an empty Y.Map, less per
// struct for the yaps' small maps of short values.
const docStructMemory = 256

// docCache maps list refs to live documents. Entries not in use, not
// pinned, not watched and not used within the grace are evicted when the
// cache is over its size or its memory (maxMemory, if positive), or idle
// too long.
//
// Only entries nobody holds (no user, no pin) are on the eviction lists, so
// a cache kept over its bounds by open rooms and requests in flight finds
// nothing to evict at once, instead of walking every entry on every
// acquire and release. A watched entry the eviction passes over moves to
// watchedIdle, and back to lru when an idle pass finds its watch over.
type docCache struct {
	mu          sync.Mutex
	entries     map[string]*docEntry
	lru         *list.List // entries nobody holds; front: most recently released
	watchedIdle *list.List // entries nobody holds that sync watched when last looked at
	max         int
	maxMemory   int64
	memory      int64 // sum of the entries' memory
	idle        time.Duration
	grace       time.Duration // Config.DocCacheGrace; 0 for none
	recheck     *time.Timer   // runs the eviction again once the grace of the oldest entry is over
	examined    int64         // entries the eviction looked at (tests)
}

func newDocCache(max int, maxMemory int64, idle time.Duration) *docCache {
	return &docCache{entries: map[string]*docEntry{}, lru: list.New(), watchedIdle: list.New(), max: max, maxMemory: maxMemory, idle: idle}
}

// hold takes e off the eviction lists: a user or a pin now holds it.
func (c *docCache) hold(e *docEntry) {
	if e.elem != nil {
		e.onList.Remove(e.elem)
		e.elem, e.onList = nil, nil
	}
}

// unheld puts e on lru once nobody holds it: at the front when released
// after use, at the back when unpinned (a closed room's document is as old
// as its last use, and sync's watch protects one used lately).
func (c *docCache) unheld(e *docEntry, front bool) {
	if e.users > 0 || e.pins > 0 || e.elem != nil {
		return
	}
	if front {
		e.elem = c.lru.PushFront(e)
	} else {
		e.elem = c.lru.PushBack(e)
	}
	e.onList = c.lru
}

// move puts e, on one of the lists, at the front of l.
func (c *docCache) move(e *docEntry, l *list.List) {
	e.onList.Remove(e.elem)
	e.elem, e.onList = l.PushFront(e), l
}

// remove evicts e, which nobody holds.
func (c *docCache) remove(e *docEntry) {
	c.hold(e)
	delete(c.entries, e.ref)
	c.memory -= e.memory
}

// memoryEstimate is the entry's document memory for docCache. mu must be
// held.
func (e *docEntry) memoryEstimate() int64 {
	if e.doc == nil {
		return 0
	}
	return int64(e.doc.StructCount()) * docStructMemory
}

// acquire returns ref's entry with its mutex held; release it with release.
func (c *docCache) acquire(ref string) *docEntry {
	c.mu.Lock()
	e := c.entries[ref]
	if e == nil {
		e = &docEntry{ref: ref}
		c.entries[ref] = e
	}
	c.hold(e)
	e.users++
	c.evictLocked(time.Now(), false)
	c.mu.Unlock()
	e.mu.Lock()
	return e
}

func (c *docCache) release(e *docEntry) {
	memory := e.memoryEstimate()
	e.mu.Unlock()
	c.mu.Lock()
	e.users--
	e.lastUsed = time.Now()
	c.memory += memory - e.memory
	e.memory = memory
	c.unheld(e, true)
	c.evictLocked(e.lastUsed, false)
	c.mu.Unlock()
}

// pin keeps ref's document loaded until unpin is called.
func (c *docCache) pin(ref string) (unpin func()) {
	c.mu.Lock()
	e := c.entries[ref]
	if e == nil {
		e = &docEntry{ref: ref, lastUsed: time.Now()}
		c.entries[ref] = e
	}
	c.hold(e)
	e.pins++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			e.pins--
			e.lastUsed = time.Now()
			c.unheld(e, false)
			c.mu.Unlock()
		})
	}
}

// evictLocked drops entries nobody holds and sync does not watch: the
// least recently released ones while the cache is over its size or memory,
// and (idleToo) every one idle too long. Each entry it looks at is evicted
// or moved to watchedIdle, so a call costs in proportion to what it
// changes; an idle pass walks both lists.
func (c *docCache) evictLocked(now time.Time, idleToo bool) {
	watched := func(e *docEntry) bool { return now.Before(e.watchUntil) }
	if idleToo {
		for el := c.watchedIdle.Front(); el != nil; {
			next := el.Next()
			if e := el.Value.(*docEntry); !watched(e) {
				c.hold(e)
				c.unheld(e, false)
			}
			el = next
		}
		for el := c.lru.Front(); el != nil; {
			next := el.Next()
			e := el.Value.(*docEntry)
			switch {
			case watched(e):
				c.move(e, c.watchedIdle)
			case now.Sub(e.lastUsed) > c.idle:
				c.remove(e)
			}
			el = next
		}
	}
	for len(c.entries) > c.max || c.maxMemory > 0 && c.memory > c.maxMemory {
		el := c.lru.Back()
		if el == nil {
			return
		}
		c.examined++
		e := el.Value.(*docEntry)
		switch {
		case watched(e):
			c.move(e, c.watchedIdle)
		case now.Sub(e.lastUsed) < c.grace:
			// The least recently released entry was used within the
			// grace, and so, but for unpinned ones (at the back with
			// their unpinning time), were the others: look again once
			// its grace is over, if no release does first.
			c.recheckAfter(c.grace - now.Sub(e.lastUsed))
			return
		default:
			c.remove(e)
		}
	}
}

// recheckAfter runs the eviction for the bounds after d, unless a run is
// already set. c.mu must be held.
func (c *docCache) recheckAfter(d time.Duration) {
	if c.recheck != nil {
		return
	}
	c.recheck = time.AfterFunc(d, func() {
		c.mu.Lock()
		c.recheck = nil
		c.evictLocked(time.Now(), false)
		c.mu.Unlock()
	})
}

func (c *docCache) evictIdle() {
	c.mu.Lock()
	c.evictLocked(time.Now(), true)
	c.mu.Unlock()
}

// watch marks ref as watched by sync until now+d.
func (c *docCache) watch(ref string, d time.Duration) {
	c.mu.Lock()
	if e := c.entries[ref]; e != nil {
		if u := time.Now().Add(d); u.After(e.watchUntil) {
			e.watchUntil = u
		}
	}
	c.mu.Unlock()
}

// watched returns the refs that are pinned or watched.
func (c *docCache) watched() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	var out []string
	for ref, e := range c.entries {
		if e.pins > 0 || now.Before(e.watchUntil) {
			out = append(out, ref)
		}
	}
	return out
}

// interested reports whether ref is pinned or watched (sync rooms listen
// to its events).
func (c *docCache) interested(ref string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[ref]
	return e != nil && (e.pins > 0 || time.Now().Before(e.watchUntil))
}

// acquireWatched is acquire for a ref that is pinned or watched; it returns
// nil (creating nothing) otherwise.
func (c *docCache) acquireWatched(ref string) *docEntry {
	c.mu.Lock()
	e := c.entries[ref]
	if e == nil || (e.pins == 0 && !time.Now().Before(e.watchUntil)) {
		c.mu.Unlock()
		return nil
	}
	c.hold(e)
	e.users++
	c.mu.Unlock()
	e.mu.Lock()
	return e
}

// refs returns the refs of every entry (for background compaction).
func (c *docCache) refs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.entries))
	for ref := range c.entries {
		out = append(out, ref)
	}
	return out
}

// drop forgets the entry's document after a failure so the next use
// reloads it from the store. mu must be held.
func (e *docEntry) drop() {
	if e.doc != nil {
		e.stale = true
	}
	e.doc, e.seq, e.view, e.list, e.sinceState, e.owners = nil, 0, nil, listFields{}, 0, nil
	e.sinceBytes, e.stateBytes, e.row = 0, 0, nil
}

// ownerIndex returns (building it if needed) the map from each yap's Y.Map
// and its shared-type members to the yap id, so the yaps a sync update
// touched are found without scanning the list. mu must be held.
func (e *docEntry) ownerIndex() map[any]string {
	if e.owners != nil {
		return e.owners
	}
	idx := map[any]string{}
	ym := e.doc.GetMap(rootYaps)
	for _, id := range ym.Keys() {
		v, _ := ym.Get(id)
		m, ok := v.(*yjs.Map)
		if !ok {
			continue
		}
		idx[m] = id
		for _, k := range m.Keys() {
			switch fv := mustGet(m, k).(type) {
			case *yjs.Text, *yjs.Array, *yjs.Map:
				idx[fv] = id
			}
		}
	}
	e.owners = idx
	return idx
}

// load (re)builds the entry's document from the store. mu must be held.
// When a document was loaded before, the difference between the old and
// the new state is emitted as an EventDocUpdate, so sync rooms holding the
// old state learn what other processes wrote.
func (s *Service) load(ctx context.Context, e *docEntry) error {
	dl, err := s.cfg.Store.Doc(ctx, e.ref, 0)
	if err != nil {
		return err
	}
	return s.loadLog(e, dl)
}

// loadLog is load of the document dl holds.
func (s *Service) loadLog(e *docEntry, dl *DocLog) error {
	s.loads.Add(1)
	d := yjs.NewDoc()
	if dl.State != nil {
		if err := d.ApplyUpdate(dl.State, nil); err != nil {
			return internal(err, "could not load the list document")
		}
	}
	for _, u := range dl.Updates {
		if err := d.ApplyUpdate(u, nil); err != nil {
			return internal(err, "could not load the list document")
		}
	}
	old, oldList := e.doc, e.list
	e.doc, e.seq, e.sinceState, e.owners = d, dl.LastSeq, int64(len(dl.Updates)), nil
	e.stateBytes, e.sinceBytes, e.row = int64(len(dl.State)), 0, nil
	for _, u := range dl.Updates {
		e.sinceBytes += int64(len(u))
	}
	e.view, _ = projectDoc(e.ref, d)
	e.list, _ = readList(d)
	switch {
	case old != nil:
		if diff, err := d.EncodeStateAsUpdate(old.EncodeStateVector()); err == nil && !emptyUpdate(diff) {
			s.emit(Event{Kind: EventDocUpdate, ListRef: e.ref, Seq: e.seq, Update: diff})
		}
	case e.stale:
		// The previous copy was dropped after a failure: what rooms have
		// is unknown, so they get the whole state (clients skip what they
		// already have).
		if full, err := d.EncodeStateAsUpdate(nil); err == nil && !emptyUpdate(full) {
			s.emit(Event{Kind: EventDocUpdate, ListRef: e.ref, Seq: e.seq, Update: full})
		}
	}
	// A reload after compaction, or after a dropped copy, may be how this
	// process learns that another archived or unarchived the list.
	if (old != nil || e.stale) && listFieldsChanged(oldList, e.list) {
		s.emit(Event{Kind: EventListChanged, ListRef: e.ref})
	}
	e.stale = false
	return nil
}

// listFieldsChanged reports whether the members rooms care about differ.
func listFieldsChanged(a, b listFields) bool {
	return a.Title != b.Title || a.Kind != b.Kind || !sameTime(a.ArchivedAt, b.ArchivedAt)
}

// emptyUpdate reports whether u is the v1 encoding of an update with no
// structs and no deletions.
func emptyUpdate(u []byte) bool { return len(u) == 2 && u[0] == 0 && u[1] == 0 }

// applyLogged applies updates seq+1... that other processes wrote, emits
// them, and refreshes the projection caches. mu must be held.
func (s *Service) applyLogged(e *docEntry, updates [][]byte) error {
	for _, u := range updates {
		if err := e.doc.ApplyUpdate(u, nil); err != nil {
			return internal(err, "could not apply a logged update")
		}
		e.seq++
		e.sinceState++
		e.sinceBytes += int64(len(u))
		e.row = nil
		s.emit(Event{Kind: EventDocUpdate, ListRef: e.ref, Seq: e.seq, Update: u})
	}
	if len(updates) > 0 {
		e.owners = nil
		old := e.list
		e.view, _ = projectDoc(e.ref, e.doc)
		e.list, _ = readList(e.doc)
		if listFieldsChanged(old, e.list) {
			s.emit(Event{Kind: EventListChanged, ListRef: e.ref})
		}
	}
	return nil
}

// fresh brings the entry's document up to the store's last update, outside
// any store transaction. mu must be held.
func (s *Service) fresh(ctx context.Context, e *docEntry) error {
	if e.doc == nil {
		return s.load(ctx, e)
	}
	dl, err := s.cfg.Store.Doc(ctx, e.ref, e.seq)
	if err != nil {
		return err
	}
	if dl.State != nil && dl.StateSeq > e.seq {
		return s.load(ctx, e) // compacted past what we have
	}
	if dl.LastSeq < e.seq {
		return s.load(ctx, e) // the store lost updates we saw: trust the store
	}
	if err := s.applyLogged(e, dl.Updates); err != nil {
		e.drop()
		return err
	}
	return nil
}

// withDoc runs fn with ref's document brought up to date and locked.
func (s *Service) withDoc(ctx context.Context, ref string, fn func(e *docEntry) error) error {
	e := s.docs.acquire(ref)
	defer s.docs.release(e)
	if err := s.fresh(ctx, e); err != nil {
		return err
	}
	return fn(e)
}

// Pin keeps the list's document loaded in this process, and polled for
// other processes' writes every Config.PollInterval (refreshed at once on
// their notices when a Config.Notifier is set, and given their awareness
// as EventAwareness), until the returned function is called. The sync module should pin the document of each open
// room. Without a pin, a document is polled for DocIdleTimeout after the
// last sync call (StateVector, EncodeState, ApplyUpdate) on it.
func (s *Service) Pin(ref string) (unpin func()) { return s.docs.pin(ref) }

// poll refreshes every pinned or watched document, so sync rooms on this
// process relay what other processes wrote (RULINGS R10). One
// Store.ListVersions call tells which of them changed; only those are read,
// so a tick over idle rooms costs a query, not two per room.
func (s *Service) poll(ctx context.Context) {
	refs := s.docs.watched()
	if len(refs) == 0 {
		return
	}
	versions, err := s.cfg.Store.ListVersions(ctx, refs)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("yaps: polling watched lists failed", "lists", len(refs), "err", err)
		}
		return
	}
	for _, ref := range refs {
		if ctx.Err() != nil {
			return
		}
		v, ok := versions[ref]
		if !ok {
			continue // no such list: nothing to catch up with
		}
		if err := s.pollList(ctx, ref, v); err != nil && ctx.Err() == nil && !IsCode(err, ENOTFOUND) {
			s.log.Warn("yaps: refreshing a list document failed", "list", ref, "err", err)
		}
	}
}

// pollList catches ref's document up and emits revocations if v, read
// before, says they changed since the entry last looked.
func (s *Service) pollList(ctx context.Context, ref string, v ListVersion) error {
	e := s.docs.acquireWatched(ref)
	if e == nil {
		return nil // no longer watched
	}
	defer s.docs.release(e)
	// A seq this process wrote after v was read differs too: fresh then
	// finds nothing, which is rare and harmless.
	if e.doc == nil || e.seq != v.DocVersion {
		if err := s.fresh(ctx, e); err != nil {
			return err
		}
	}
	if e.perms == nil || e.permsAt == nil || e.permsAt.Permissions != v.Permissions || e.permsAt.Revoked != v.Revoked {
		return s.pollPermissions(ctx, e, &v)
	}
	return nil
}

// pollPermissions emits EventCodeRevoked for permissions of the list that
// were revoked since the last poll (by any process), so sync connections
// using them are closed. at is the list's version read before (nil:
// unknown, so the next poll reads the permissions again). mu must be held.
func (s *Service) pollPermissions(ctx context.Context, e *docEntry, at *ListVersion) error {
	ps, err := s.cfg.Store.Permissions(ctx, e.ref)
	if err != nil {
		return err
	}
	now := make(map[string]bool, len(ps))
	for _, p := range ps {
		now[p.ID] = true
	}
	if e.perms != nil {
		for id := range e.perms {
			if !now[id] {
				s.emit(Event{Kind: EventCodeRevoked, ListRef: e.ref, PermissionID: id})
			}
		}
	}
	e.perms = now
	// at was read before ps, so ps is at least as new: a change between
	// the two makes the next poll read the permissions again, never skip
	// one.
	e.permsAt = at
	return nil
}

// Refresh brings this process's copy of the list document up to date with
// the store and emits an EventDocUpdate for every update other processes
// stored since. The poller and the notices of a Config.Notifier do this for
// pinned and watched lists; callers need it only to force a catch-up.
func (s *Service) Refresh(ctx context.Context, ref string) error {
	return s.withDoc(ctx, ref, func(*docEntry) error { return nil })
}
