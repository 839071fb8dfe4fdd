package yaps

import (
	"context"
	"errors"
	"time"
)

// Store persists everything the service keeps. Adapters live in store/
// (Bun on SQLite and Postgres, and an in-memory one for tests); all of them
// pass the conformance suite in store/storetest.
//
// Lookups return an *Error with code ENOTFOUND when nothing matches. Times are
// stored with millisecond precision in UTC and read back exactly.
//
// Each list has a document: an append-only log of Yjs updates numbered
// 1, 2, 3... (the list's DocVersion is the last number) plus a compacted
// state that replaces a prefix of the log. Loading the state and then the
// updates after StateSeq in order rebuilds the document.
type Store interface {
	// CreateList stores a new list with its owner permission and the
	// document's first update (seq 1) in one transaction. If idem is not nil
	// the idempotency record is stored in the same transaction, as
	// Tx.PutIdempotency would (ECONFLICT if the key is taken).
	CreateList(ctx context.Context, l *List, owner *Permission, firstUpdate []byte, idem *IdempotencyRecord) error

	// List returns the list with the given ref.
	List(ctx context.Context, ref string) (*List, error)

	// ListsByAccount returns the lists rolled up into an account ordered
	// by (CreatedAt, Ref), strictly after after (nil: from the first), at
	// most limit of them (limit <= 0: all). An empty accountID matches no
	// list.
	ListsByAccount(ctx context.Context, accountID string, after *ListCursor, limit int) ([]*List, error)

	// PermissionByHash returns the permission (revoked or not) whose code
	// hashes to hash.
	PermissionByHash(ctx context.Context, hash []byte) (*Permission, error)

	// Permissions returns a list's permissions that are not revoked, oldest first.
	Permissions(ctx context.Context, listRef string) ([]*Permission, error)

	// Yap returns one projected yap, deleted or not.
	Yap(ctx context.Context, listRef, id string) (*Yap, error)

	// Yaps returns projected yaps ordered by (CreatedAt, ID) strictly after
	// q.After, at most q.Limit of them.
	Yaps(ctx context.Context, listRef string, q YapQuery) ([]*Yap, error)

	// Doc returns the list document's compacted state and every update
	// after max(afterSeq, StateSeq). With afterSeq >= StateSeq the state is
	// omitted (nil) and only the updates after afterSeq are returned.
	Doc(ctx context.Context, listRef string, afterSeq int64) (*DocLog, error)

	// Update runs fn in one transaction that holds the list's write lock,
	// serializing writers to the list across processes. When fn returns an
	// error nothing is written and that error is returned.
	Update(ctx context.Context, listRef string, fn func(tx Tx) error) error

	// CompactDoc replaces the state and all updates with seq <= seq by state.
	// Updates after seq are kept, so compaction never loses a concurrent write.
	CompactDoc(ctx context.Context, listRef string, seq int64, state []byte) error

	// ListVersions returns, for each ref in refs that names a list, what
	// tells whether the list changed (see ListVersion), keyed by ref; refs
	// of no list are left out, and duplicates are allowed. Each list's
	// values come from one snapshot. The poller calls it once per tick
	// for every list that sync watches, and reads a list's document and
	// permissions only when its values differ from those it last saw, so
	// it must cost one query (or a few, for many refs), not one per ref.
	ListVersions(ctx context.Context, refs []string) (map[string]ListVersion, error)

	// UpdateCount returns how many log updates follow the compacted state.
	UpdateCount(ctx context.Context, listRef string) (int64, error)

	// DeletedYapsBefore returns (list ref, yap id) pairs of yaps deleted
	// before t, at most limit of them, for the purge.
	DeletedYapsBefore(ctx context.Context, t time.Time, limit int) ([]YapKey, error)

	// CreateAccount stores an account.
	CreateAccount(ctx context.Context, a *Account) error

	// AccountByHash returns the account whose key hashes to hash.
	AccountByHash(ctx context.Context, hash []byte) (*Account, error)

	// Account returns the account with the given id.
	Account(ctx context.Context, id string) (*Account, error)

	// Audit returns a list's audit entries with Seq > afterSeq, oldest first,
	// at most limit.
	Audit(ctx context.Context, listRef string, afterSeq int64, limit int) ([]*AuditEntry, error)

	// Idempotency returns the stored record for (scope, key).
	Idempotency(ctx context.Context, scope, key string) (*IdempotencyRecord, error)

	// DeleteIdempotencyBefore deletes idempotency records created before t,
	// oldest first and at most limit of them (limit <= 0: all), and returns
	// how many it deleted. The service prunes expired records with it
	// (Config.IdempotencyRetention).
	DeleteIdempotencyBefore(ctx context.Context, t time.Time, limit int) (int, error)

	// ClaimClients records permissionID as the writer of each of the list's
	// Yjs client IDs in clients that has no writer yet, and returns the
	// writer of every one of them. A claim is never changed; concurrent
	// claims of one ID leave exactly one writer.
	ClaimClients(ctx context.Context, listRef, permissionID string, clients []uint64) (map[uint64]string, error)

	// Close releases the store's resources.
	Close() error
}

// Tx is the view of one list inside Store.Update. It must not be used after
// fn returns.
type Tx interface {
	// List returns the locked list as of the start of the transaction.
	List() *List
	// SaveList writes the list's row (title, kind, archive and rollup
	// markers, account, updatedAt, docVersion).
	SaveList(l *List) error
	// UpdatesSince returns the log updates with seq > seq, in order. It
	// fails with ENOTFOUND if some of them were compacted away.
	UpdatesSince(seq int64) ([][]byte, error)
	// AppendUpdate appends a document update and returns its seq, which is
	// the previous last seq + 1.
	AppendUpdate(update []byte) (int64, error)
	// AppendUpdates appends updates in order, as AppendUpdate would one
	// after the other, and returns the seq of the last (the seq before plus
	// len(updates)). A store may keep them together: bunstore writes them
	// as one row, which costs a batch of sync updates far less.
	AppendUpdates(updates [][]byte) (int64, error)
	// PutYap inserts or replaces a yap's projection.
	PutYap(y *Yap) error
	// DeleteYap removes a yap's projection (after the purge).
	DeleteYap(id string) error
	// Permission returns one of the list's permissions, revoked or not.
	Permission(id string) (*Permission, error)
	// CreatePermission stores a new permission of the list.
	CreatePermission(p *Permission) error
	// RevokePermission marks a permission revoked at t.
	RevokePermission(id string, t time.Time) error
	// ActiveOwners counts the list's unrevoked owner permissions.
	ActiveOwners() (int, error)
	// AppendAudit records an audit entry and assigns its Seq.
	AppendAudit(e *AuditEntry) error
	// PutIdempotency stores an idempotency record. It fails with ECONFLICT
	// when a record of the same (scope, key) exists, unless that record was
	// created before r.ReplaceBefore: it is then replaced.
	PutIdempotency(r *IdempotencyRecord) error
}

// ReplayableUpdater is an optional interface of a Store. UpdateReplayable
// is Update for an fn that can run again from the start with the same
// effect: it reads through tx and writes what it recorded before the
// transaction (a write prepared ahead, writeahead.go). A store that commits
// several writes together may then skip what it does to undo one of them
// alone, and run them all again in the rare case one fails part way.
type ReplayableUpdater interface {
	UpdateReplayable(ctx context.Context, listRef string, fn func(tx Tx) error) error
}

// PermissionActiveTx is an optional interface of a Tx: PermissionActive
// reports whether one of the list's permissions exists (found) and is not
// revoked (active), as Permission would, without reading the whole row.
// The service re-checks the writer's permission in every write, so this is
// on the hot path.
type PermissionActiveTx interface {
	PermissionActive(id string) (found, active bool, err error)
}

// DocTx is an optional interface of a Tx: Doc returns the list's document
// as Store.Doc(ctx, ref, 0) would, read inside the transaction, where the
// list's write lock keeps other writers and compactions out. A write whose
// cached document another process's compaction overtook reloads it; its
// last try reloads through Doc, so no timing of other processes can make
// it give up.
type DocTx interface {
	Doc() (*DocLog, error)
}

// PreparedWriter is an optional interface of a Store: it applies a write
// that the service prepared before any transaction (see writeahead.go) as
// one statement pipeline, where Update's callback would make a round trip
// per statement. The Postgres store implements it.
type PreparedWriter interface {
	// WritePrepared applies p atomically if the list row still holds
	// p.Expect's values and, when p.PermissionID is set, that permission
	// of the list is not revoked. When either check fails it writes
	// nothing and reports applied false. A store that cannot take this
	// write returns ErrPreparedUnsupported, also having written nothing.
	WritePrepared(ctx context.Context, p *PreparedWrite) (applied bool, err error)
}

// ErrPreparedUnsupported is returned by PreparedWriter.WritePrepared when the
// store declines the write; the service then writes through Update.
var ErrPreparedUnsupported = errors.New("yaps: prepared writes are not supported")

// PreparedWrite is a write to one list prepared ahead of its transaction.
// It always appends at least one document update.
type PreparedWrite struct {
	Expect       *List  // the row the write was prepared against
	PermissionID string // "" for system writes
	// List is the row to store: Expect, or the last SaveList, with
	// DocVersion advanced by the updates among Ops.
	List *List
	Ops  []PreparedOp // in order
}

// PreparedOp is one write of a PreparedWrite; exactly one of Update,
// PutYap, DeleteYapID and Audit is set.
type PreparedOp struct {
	Update      []byte      // append as the next seq
	PutYap      *Yap        // insert or replace the projection
	DeleteYapID string      // delete the projection, if there is one
	Audit       *AuditEntry // append; the store sets Seq
	// NewYap, with PutYap, says the list's projection had no row for the
	// yap when the write was prepared. A store may then insert without
	// looking for one first, but must still write correctly if a row
	// exists after all.
	NewYap bool
}

// YapQuery selects a page of yaps.
type YapQuery struct {
	After          *YapCursor // nil for the first page
	Limit          int
	IncludeDeleted bool
}

// YapCursor is the position of a yap in the (CreatedAt, ID) order.
type YapCursor struct {
	CreatedAt time.Time
	ID        string
}

// ListCursor is the position of a list in the (CreatedAt, Ref) order.
type ListCursor struct {
	CreatedAt time.Time
	Ref       string
}

// YapKey names one yap.
type YapKey struct {
	ListRef string
	ID      string
}

// ListVersion is what Store.ListVersions reports of one list.
//
// DocVersion is the list's DocVersion: the last seq of its update log,
// the LastSeq Doc would return. Every append raises it, and compaction
// leaves it alone.
//
// Permissions counts the list's permissions, revoked or not, and Revoked
// those of them that are revoked. Stores never delete a permission nor
// clear a revocation (revoking a revoked permission changes nothing), so
// creating a permission raises Permissions and revoking one raises
// Revoked: the pair changes whenever the set of the list's unrevoked
// permissions (Store.Permissions) does.
type ListVersion struct {
	DocVersion  int64
	Permissions int64
	Revoked     int64
}

// DocLog is a list document as stored.
type DocLog struct {
	State    []byte   // compacted state (a Yjs update), nil if not requested or none
	StateSeq int64    // last seq folded into State
	Updates  [][]byte // updates StateSeq+1 (or afterSeq+1) ... LastSeq
	LastSeq  int64
}

// IdempotencyRecord is the first answer to a request carrying an
// Idempotency-Key, replayed for retries with the same key and body.
type IdempotencyRecord struct {
	Scope       string // who may replay it, e.g. "lists:<ip>" or "yaps:<list ref>"
	Key         string
	RequestHash []byte // SHA-256 of the request body
	Status      int
	Body        []byte
	// ETag is the answer's entity tag, replayed with it. It travels sealed
	// inside Body (see sealRecord), so stores keep no column for it.
	ETag      string
	CreatedAt time.Time
	// ReplaceBefore is not stored: it tells PutIdempotency and CreateList
	// that a stored record of the same (Scope, Key) created before it has
	// expired and is replaced (in the same transaction) instead of being a
	// conflict. Zero replaces nothing. Records read back have it zero.
	ReplaceBefore time.Time
}
