package yaps

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Service. Zero fields take the defaults named in their
// comments (see WithDefaults).
type Config struct {
	// Store persists everything. Required.
	Store Store
	// Limiter enforces rate limits. Default: Unlimited{}.
	Limiter Limiter
	// Now is the clock. Default: time.Now. Tests pass a fake clock.
	Now func() time.Time
	// PublicURL is the externally visible origin used in sliceUrl and
	// apiBase, e.g. "https://yaps.example". Default: "http://127.0.0.1:4736".
	PublicURL string
	// Prefix is the API path prefix. Default: "/api/v1".
	Prefix string
	// DeletedRetention is how long a soft-deleted yap can be restored before
	// it is purged. Default: 30 days.
	DeletedRetention time.Duration
	// IdempotencyRetention is how long an Idempotency-Key replays the first
	// answer. An older record (by its CreatedAt against Now) counts as
	// absent: a retry with its key creates a new list or yap and replaces
	// the record. The background ticker (PurgeInterval) deletes expired
	// records. Default: 24 hours; negative keeps records forever.
	IdempotencyRetention time.Duration
	// CompactAfter decides when a list's update log is compacted into its
	// document state in the background: once more than CompactAfter
	// updates were logged since the last compaction and they add up to at
	// least four times the state's size (so large documents are not
	// rewritten for every few hundred small edits, and compaction writes
	// about 1.25 bytes of state per byte logged), or once more than 16×CompactAfter
	// plus one per 64 bytes of state were logged (which bounds the updates
	// a load replays to about half the cost of decoding the state).
	// Default: 200.
	CompactAfter int
	// Logger receives operational logs; it never sees codes or keys.
	// Default: slog.Default().
	Logger *slog.Logger
	// DocCacheSize bounds how many list documents a process keeps loaded.
	// Default: 1000.
	DocCacheSize int
	// DocCacheMemory bounds the memory of the list documents a process
	// keeps loaded, estimated as docStructMemory (256) bytes per struct
	// (yjs Doc.StructCount; see MaxDocItems): past it, the least recently
	// used documents that no request, sync room or watch holds are
	// unloaded, as past DocCacheSize. Documents in use stay loaded, so the
	// estimate can pass the bound by what they hold (sync's room and
	// connection caps bound those). Default: DefaultDocCacheMemory
	// (256 MiB); negative: no bound but DocCacheSize.
	DocCacheMemory int64
	// DocCacheGrace is how long after its last use a document stays loaded
	// past DocCacheSize and DocCacheMemory. Without it, a set of documents
	// in steady use that is larger than the bounds is unloaded after each
	// use and loaded again by the next, which costs far more than the
	// memory it saves: the HTTP benchmark's 16 lists of a few thousand
	// yaps each, created into over the 256 MiB bound, took twice the CPU
	// per create. The bounds thus hold for documents idle for longer than
	// the grace; the ones used within it add to them. Default:
	// DefaultDocCacheGrace (2s); negative: none (the bounds hold at every
	// release).
	DocCacheGrace time.Duration
	// DocIdleTimeout evicts a cached document not used for this long
	// (pinned documents excepted). Default: 10 minutes.
	DocIdleTimeout time.Duration
	// PollInterval is how often documents watched by sync (pinned, or used
	// by a sync call within DocIdleTimeout) are refreshed from the store,
	// so writes of other processes reach this process's rooms (RULINGS
	// R10: within a second). With a Notifier the poller is only the
	// fallback for lost notices. Default: 500ms without a Notifier, 5s
	// with one; negative disables polling.
	PollInterval time.Duration
	// AuditCoalesce bounds the audit entries of sync typing. A sync update
	// that edits an existing yap is recorded as "yap.update" with Detail
	// "sync, coalescing <AuditCoalesce>"; that entry also stands for every
	// further sync edit of the same yap by the same code (permission) on
	// this process within AuditCoalesce after its At, which are not
	// recorded separately. Creations, removals, list changes and every
	// HTTP mutation are always recorded one by one (sync edits the server
	// rejects and undoes change nothing and are not recorded). So the log still says who changed which yap and when, to within
	// AuditCoalesce, at one entry per window instead of one per keystroke.
	// Default: 10s; negative records every sync update (Detail "sync").
	AuditCoalesce time.Duration
	// AuthCacheTTL is how long this process answers reads for a code it
	// verified (and shows the list row it read with it) without asking the
	// store again. Revocations, rotations and list changes made through
	// this process, or announced by another one through the Notifier, take
	// effect at once; the TTL only bounds how long a change another
	// process made without a Notifier goes unseen by reads here (writes
	// always re-check the code and the archive state inside their own
	// transaction). Default: 1s; negative disables the cache.
	AuthCacheTTL time.Duration
	// Notifier carries notices between processes sharing the database
	// (store/pgnotify on Postgres): after each commit the Service
	// publishes one (document seq, revoked permission, list row change),
	// and on a notice of another process it refreshes the list at once if
	// the list is pinned or watched here, emitting the same events as the
	// poller. It also carries awareness (PublishAwareness,
	// EventAwareness). The Service does not close it. Default: nil,
	// polling only (e.g. SQLite).
	Notifier Notifier
	// PurgeInterval is how often the background purge, idempotency prune
	// (IdempotencyRetention) and compaction run; they also run once as the
	// service starts.
	// Default: 1 hour; negative disables them (Purge can still be called).
	PurgeInterval time.Duration
	// Render renders the body of a 201 answer that an Idempotency-Key
	// replay must repeat byte for byte. It is called with a *CreatedList
	// (POST /lists) or a *Yap (POST /lists/{ref}/yaps) inside the creating
	// transaction; its result is stored as IdempotencyRecord.Body and
	// handed back as the Replay of a retried request. Package httpapi does
	// not set it: it encodes its first answers with RenderJSON, so under
	// httpapi Render must stay RenderJSON (the default) or httpapi.Render,
	// the same encoder, for replays to be identical to first answers.
	// Default: RenderJSON.
	Render func(v any) ([]byte, error)
	// MaxDocBytes limits a list document's encoded size (Yjs update v1,
	// pending updates included). A client write (HTTP or sync) that
	// inserts anything and leaves the document over the limit is refused
	// as ETOOLARGE (HTTP 413, sync close 4413); nothing of it is stored or
	// kept in memory. Writes that only delete are accepted at any size
	// (for sync writes only the clients' updates count, not the server's
	// fixes and updatedAt stamps after them), and so are HTTP soft deletes
	// of yaps, archiving and the purge (each is bounded by the yaps or the
	// list there are). A document already over the limit loads and reads
	// as usual. The check uses the compacted state plus the update log
	// since, and encodes the document to measure it only when that is
	// over. Default: DefaultMaxDocBytes (16 MiB); negative disables it.
	MaxDocBytes int64
	// MaxDocItems limits the number of structs (Yjs items: one per map
	// value, also an overwritten one, per inserted array element, per run
	// of text, more where edits split runs; see yjs Doc.StructCount) a
	// list document holds, with the same rules as MaxDocBytes, except that
	// pending structs are not counted (they are in MaxDocBytes). Memory
	// grows with structs more than with bytes (an empty Y.Map is about 7
	// bytes encoded and 570 bytes of heap, a text struct about 150-190),
	// so this is the limit that bounds a document's memory: about 145 MB
	// at worst at the default. Default: DefaultMaxDocItems (250,000);
	// negative disables the limit.
	MaxDocItems int
}

// Service carries out every operation of the list service against the
// interfaces it is given. It is safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger

	docs *docCache
	auth *authCache

	writeAheads atomic.Int64 // writes prepared before their transaction (writeahead.go)
	prepared    atomic.Int64 // of which a PreparedWriter store applied
	loads       atomic.Int64 // documents read from the store into the cache

	subMu  sync.RWMutex
	subs   map[int]func(Event)
	nextID int

	claims claimCache    // Yjs client IDs' writers (clients.go)
	holds  mutationHolds // sync senders whose yap-mutation budget is spent (syncbudget.go)

	compactions chan struct{} // a slot per running background compaction (maxCompactions)

	coalesceDetail string      // audit Detail of a coalescing sync update entry
	notices        chan Notice // outgoing, when cfg.Notifier != nil
	refresh        refresher

	wg sync.WaitGroup
	// ctx is cancelled by Close: background work stops with it, and what
	// waits on the store (compaction, purge, polling) is cut short.
	ctx    context.Context
	cancel context.CancelFunc
	// bgMu orders starting background work (wg.Add) against Close, which
	// cancels ctx under it: nothing starts once Close waits on wg.
	bgMu sync.Mutex
}

// CreateListInput is the body of POST /lists plus request metadata.
type CreateListInput struct {
	Title          Field[string]
	Kind           Field[string] // raw; plural spellings accepted
	IdempotencyKey string
	RequestHash    []byte // SHA-256 of the request body, for idempotency
	ClientIP       string
	Account        *Account // optional account credential
}

// CreatedList is the answer to POST /lists.
type CreatedList struct {
	List      *List
	OwnerCode string // shown once
	SliceURL  string // link carrying the owner code in its k parameter
	APIBase   string // the list's API address
	// Replay holds the stored first answer when the request repeated an
	// Idempotency-Key; the edge writes it back verbatim.
	Replay *IdempotencyRecord
}

// YapPage is one page of GET /lists/{ref}/yaps.
type YapPage struct {
	Yaps       []*Yap
	NextCursor string // "" on the last page
}

// ListPage is one page of GET /lists.
type ListPage struct {
	Lists      []*List
	NextCursor string // "" on the last page
}

// AuditPage is one page of GET /lists/{ref}/audit.
type AuditPage struct {
	Entries    []*AuditEntry
	NextCursor string
}

// IssuedPermission is the answer to POST /lists/{ref}/permissions.
type IssuedPermission struct {
	Permission *Permission
	Code       string // shown once
}

// Event tells subscribers (the sync module) what changed.
type Event struct {
	Kind         EventKind
	ListRef      string
	Seq          int64  // EventDocUpdate: the update's seq
	Update       []byte // EventDocUpdate: the Yjs update as stored; EventAwareness: the awareness update
	PermissionID string // EventCodeRevoked
	Origin       any    // who caused it, e.g. a sync connection
	// More is set on an EventDocUpdate when further EventDocUpdates of
	// the same list follow at once (one write stored several updates). A
	// relay may hold the update back until the last one and send them
	// together; it must not wait for anything beyond that event.
	More bool
}

// EventKind names an Event.
type EventKind int

const (
	EventDocUpdate   EventKind = iota + 1 // a document update was stored
	EventCodeRevoked                      // a permission was revoked or the owner code rotated
	EventListChanged                      // archive state, rollup or other list row change
	// EventAwareness is an awareness update another process published
	// with PublishAwareness for a list pinned or watched here. Update is
	// the payload of the awareness message (shared; do not modify), Seq 0,
	// Origin nil. It is emitted from the notice listener goroutine, not
	// under the list's lock, and is not ordered with the list's other
	// events. Never emitted for this process's own PublishAwareness calls.
	EventAwareness
	// EventResync says notices of other processes may have been missed:
	// the Notifier listens again after a gap (a NoticeResync). It is
	// emitted once for every list pinned or watched here, after the list's
	// catch-up with the store was scheduled, from the notice listener
	// goroutine. Document updates, revocations and list changes are caught
	// up by the service; awareness published in the gap is not, so the
	// sync module asks the other processes for their states again.
	EventResync
)
