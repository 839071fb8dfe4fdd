package bunstore

import (
	"database/sql"

	"github.com/yaps-dev/yaps/yaps"
)

// The writer's row cache (SQLite files). Every Update reads the list row
// and the writer's permission before it writes; on the writer connection
// both are usually what the previous write of this process left. PRAGMA
// data_version, read once per write transaction (under the write lock),
// tells whether any other connection (another process, or this process's
// pool) committed since: then the cache is dropped. Otherwise a cached row
// is exactly what the database holds, because this connection's own writes
// keep the cache in step:
//
//   - rows read inside a transaction are cached as read;
//   - a write that may change a cached row deletes it first, so a write
//     rolled back later (alone, to its savepoint) leaves no stale entry;
//   - a successful Update stores the list row it wrote, after its last
//     statement;
//   - when a whole transaction rolls back (or its COMMIT fails), the cache
//     is dropped.
//
// Missing rows are never cached.

type cachedList struct {
	list     yaps.List
	stateSeq int64
}

type writerCache struct {
	version int64
	lists   map[string]*cachedList
	perms   map[string]cachedPerm // permission id
	yaps    map[yapKey]yapTimes   // hints only, see PutYap
}

type yapKey struct{ listRef, id string }

// yapTimes are a yap row's indexed columns.
type yapTimes struct {
	created int64
	deleted sql.NullInt64
}

// maxCachedYaps bounds the yap hints, and maxCachedRows the list rows and
// the permissions; past them they start over (a missing entry is read from
// the database). Without a bound the cache would keep every list this
// process wrote since another connection last committed.
const (
	maxCachedYaps = 8192
	maxCachedRows = 8192
)

type cachedPerm struct {
	listRef string
	active  bool
}

func (c *writerCache) clear() {
	c.lists, c.perms, c.yaps = nil, nil, nil
}

// yapStored reports whether the yap row (listRef, id) was last written, as
// far as this connection knows, with these times.
func (c *writerCache) yapStored(listRef, id string, created int64, deleted sql.NullInt64) bool {
	t, ok := c.yaps[yapKey{listRef, id}]
	return ok && t.created == created && t.deleted == deleted
}

func (c *writerCache) putYap(listRef, id string, created int64, deleted sql.NullInt64) {
	if c.yaps == nil || len(c.yaps) >= maxCachedYaps {
		c.yaps = map[yapKey]yapTimes{}
	}
	c.yaps[yapKey{listRef, id}] = yapTimes{created: created, deleted: deleted}
}

// listOK returns a cached list row; c may be nil (no cache).
func (c *writerCache) listOK(ref string) (yaps.List, int64, bool) {
	if c == nil {
		return yaps.List{}, 0, false
	}
	e := c.lists[ref]
	if e == nil {
		return yaps.List{}, 0, false
	}
	return *e.list.Clone(), e.stateSeq, true
}

func (c *writerCache) putList(l *yaps.List, stateSeq int64) {
	if c.lists == nil || len(c.lists) >= maxCachedRows {
		c.lists = map[string]*cachedList{}
	}
	c.lists[l.Ref] = &cachedList{list: *l.Clone(), stateSeq: stateSeq}
}

func (c *writerCache) perm(id, listRef string) (active, ok bool) {
	p, ok := c.perms[id]
	if !ok || p.listRef != listRef {
		return false, false
	}
	return p.active, true
}

func (c *writerCache) putPerm(id, listRef string, active bool) {
	if c.perms == nil || len(c.perms) >= maxCachedRows {
		c.perms = map[string]cachedPerm{}
	}
	c.perms[id] = cachedPerm{listRef: listRef, active: active}
}

// storedList is l as saveList stores it and scanList reads it back: times
// at millisecond precision in UTC, created_at unchanged (saveList does not
// write it) and doc_version set to the log's last seq.
func storedList(l *yaps.List, createdAt yaps.List, docVersion int64) yaps.List {
	c := *l
	c.CreatedAt = createdAt.CreatedAt
	c.UpdatedAt = fromMs(ms(c.UpdatedAt))
	c.ArchivedAt = fromNullMs(msPtr(c.ArchivedAt))
	c.RolledUpAt = fromNullMs(msPtr(c.RolledUpAt))
	c.DocVersion = docVersion
	return c
}

// checkVersion drops the cache when another connection committed since
// this one last looked. It runs inside the write transaction.
func (w *writer) checkVersion() error {
	var (
		v   int64
		ok  bool // read on the handle (direct.go)
		err error
	)
	if w.direct != nil {
		v, ok, err = w.direct.queryInt(sqlDataVersion)
	}
	if !ok {
		var st *sql.Stmt
		if st, err = w.stmt(sqlDataVersion); err == nil {
			err = st.QueryRowContext(noCancel).Scan(&v)
		}
	}
	if err != nil {
		return err
	}
	if v != w.cache.version {
		w.cache.clear()
		w.cache.version = v
	}
	return nil
}
