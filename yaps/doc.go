// Package yaps is the core of the Yaps collaborative list service: domain
// types, error kinds, the Store and Limiter interfaces, and the Service
// that carries out every operation of the HTTP API and the sync endpoint.
//
// # The list document
//
// Each list is one Yjs document (RULINGS R9), handled by the pure-Go engine
// in package yjs. The document is the source of truth; the store's yap and
// list rows are its projection. Root map "list" holds title, kind and
// archivedAt; root map "yaps" maps a yap id to a nested Y.Map with id,
// kind, createdAt, updatedAt, deletedAt (absent when null) and the kind's
// members. Free text (task content, note title and body, event title) is
// Y.Text, tags a Y.Array of strings, everything else a plain string.
// Root types outside this schema are kept and relayed untouched, except
// that what an agent inserts there is deleted again (ApplyUpdate).
//
// Every mutation, by HTTP or sync, goes through one write path: lock the
// list in this process, open the store transaction (which serializes
// writers across processes), catch the cached document up with updates
// other processes stored, edit the document in one transaction, validate,
// append the update(s), project changed yaps and the list row, append
// audit entries, commit, then emit Events. A failure after the in-memory
// document changed drops it from the cache, so memory never diverges from
// the store. When the process already holds the document and the list row
// it last wrote, the edit, validation and projection run before the store
// transaction, which then only checks the row is unchanged, re-checks the
// code and replays the recorded writes (writeahead.go): a store with one
// writer (SQLite) is then held only for the writes. A store that
// implements PreparedWriter (Postgres) takes those writes as data and
// applies them, with the same checks, in one statement pipeline shared
// with other lists' writes. An HTTP PATCH of text
// is applied as a character-level diff of the old and new text (Myers'
// O(ND) over UTF-16 code units, never splitting a surrogate pair; see
// textdiff.go), so a sync client's concurrent edits elsewhere in the text
// survive the merge. Past the diff's work budget it falls back to one edit
// replacing the span between the common prefix and suffix.
//
// Sync clients write with ApplyUpdate. Their update is stored as sent; each
// yap it changed is validated (schema, kind unchanged, the code's scope for
// the old and new kind), and anything invalid is undone by a compensating
// update made by the server (previous values restored, an invalid new yap
// removed, missing server members of a new yap filled in), stored and
// emitted after the client's. The projection never holds an invalid yap.
// docVersion counts stored updates. ApplyUpdates does the same for several
// clients' updates of one list in a single write, each validated against
// what the earlier ones left; its events carry More on all but the last, so
// a relay can send them together.
//
// # Beyond the HTTP operations
//
//   - Subscribe delivers Events (document updates with their seq, revoked
//     permissions, list changes, other processes' awareness) in seq order
//     per list; handlers must not block.
//   - StateVector, EncodeState and ApplyUpdates serve the sync endpoint;
//     CanWrite says whether a connection may write at all.
//   - Several processes may share one database. Each write catches up
//     inside its transaction; Refresh catches a document up on demand, and
//     a poller (Config.PollInterval) refreshes documents that sync uses
//     (Pin, or any sync call within DocIdleTimeout), emitting the updates,
//     revocations and list changes other processes made. Each tick asks
//     the store for every such list's version in one call
//     (Store.ListVersions) and reads only the lists that changed.
//   - With a Config.Notifier (store/pgnotify: Postgres LISTEN/NOTIFY) the
//     processes push instead: after each commit the Service publishes a
//     Notice (NoticeDoc with the list's last seq, NoticePermission for a
//     revocation or owner rotation, NoticeList for a rollup) from a
//     background goroutine, merging document notices of one list that
//     queue up; a revocation is published by the call that revokes, which
//     returns once the other processes confirmed it (ConfirmingPublisher).
//     On another process's notice about a list that is pinned
//     or watched there, worker goroutines refresh it and emit exactly what
//     the poller would (EventDocUpdate per stored update in seq order,
//     EventCodeRevoked, EventListChanged); notices about other lists are
//     ignored (their readers and writers catch up with the store anyway).
//     A NoticeResync (the Notifier reconnected) refreshes every watched
//     list and has every sync connection's code checked again; from the
//     NoticeLost before it (the Notifier stopped listening) until then,
//     the auth cache is not used. Polling stays as the fallback for lost notices, every 5 s by
//     default instead of 500 ms. PublishAwareness and EventAwareness carry
//     sync awareness between processes the same way.
//   - Config.AuditCoalesce (10 s): a sync edit of an existing yap is
//     audited once per code, yap and window instead of once per
//     keystroke; see the field for the exact rule.
//   - Purge removes yaps deleted longer ago than Config.DeletedRetention; it
//     runs every Config.PurgeInterval and can be called directly (tests
//     with a fake Config.Now). CompactNow folds a list's update log into
//     one state; compaction also runs in the background once the log is
//     due (see Config.CompactAfter). Idempotency records older than
//     Config.IdempotencyRetention (24 h) are ignored and pruned.
//   - Config.AuthCacheTTL (1 s): codes this process verified are trusted
//     for reads without a store query; changes made here, or announced by
//     a Notifier, take effect at once, and writes always re-check.
//
// # Decisions
//
//   - Ids: list refs are 16 random bytes as unpadded base64url; server yap
//     ids, permission ids and account ids are UUIDv7 strings. Sync clients
//     may pick yap ids of 1–64 characters of A-Za-z0-9_-.
//   - Lengths count Unicode code points. One-line fields reject C0 controls
//     (including CR and LF) except TAB, and DEL; the note body also allows
//     LF. Invalid UTF-8 (or a lone surrogate from a sync client) is invalid.
//     Empty strings are valid for required text (a sync client creates a
//     yap first and types into it); tags must not be empty.
//   - Paging: limit 0 means 50, 1–200 allowed; cursors are opaque base64url
//     strings; a bad cursor is EINVALID.
//   - ETags: ListETag hashes the list's own members (yap edits do not change
//     it); YapETag hashes every member of the yap, so sync edits change it
//     too. If-Match accepts "*", lists and the W/ form.
//   - Idempotency: records are scoped "lists:acct:<id>" or "lists:ip:<ip>"
//     for POST /lists and "yaps:<ref>" for POST /lists/{ref}/yaps and are
//     stored in the creating transaction. Their Body is Config.Render of the
//     first answer (*CreatedList or *Yap); see Config.Render for which
//     renderers keep replays identical under httpapi. A replay returns
//     only the record.
//   - Permissions can be managed on an archived list; everything that
//     writes the document is EFORBIDDEN there, except the owner's or an
//     editor's PATCH that unarchives.
//   - A list created with an account credential belongs to that account
//     from the start.
//   - A failing Limiter lets requests through (logged).
//
// Codes and account keys are never logged; only their SHA-256 is stored.
package yaps
