// Package bunstore is the SQL yaps.Store: SQLite (file or in-memory,
// through the pure-Go modernc.org/sqlite driver) and Postgres (through
// pgx's database/sql driver), with Bun providing the dialects and the
// migration runner.
//
// Postgres 13 or newer is required (prepared writes use
// pg_current_xact_id). Open takes a DSN and returns a migrated store; New wraps a *bun.DB an
// application already has. The schema lives in embedded SQL migrations,
// one directory per dialect, applied by Migrate.
//
// Importing the package registers both database/sql drivers it opens:
// pgx's "pgx" and modernc.org/sqlite's "sqlite" (walframes.go also relies
// on modernc). A host that registers another driver named "sqlite" (e.g.
// github.com/glebarez/go-sqlite) panics at start with "Register called
// twice"; such a host must use modernc.org/sqlite for its own SQLite too.
// A Postgres-only host still links the SQLite driver.
//
// Design notes:
//   - Times are BIGINT unix milliseconds: exact and zone-free in both
//     dialects, which is the precision the service keeps.
//   - A yap is stored as its ordering columns (created_at, id, deleted_at)
//     plus a compact binary blob of the other fields (see encodeYap): the
//     store never queries them, new yap fields need no migration, and a
//     page of 200 yaps decodes several times faster than from JSON.
//   - Update serializes writers of a list across processes: Postgres locks
//     the list row (SELECT ... FOR UPDATE), SQLite takes the database write
//     lock at BEGIN (BEGIN IMMEDIATE) and, within one process, a mutex
//     first so writers queue in Go instead of polling in SQLite's busy
//     handler. The update log's (list_ref, seq) primary key makes a forked
//     document impossible even if that locking were bypassed.
//   - On Postgres, writes the service prepared ahead (yaps.PreparedWriter)
//     go as one pgx pipeline per batch of lists: guarded statements, one
//     Sync, one implicit transaction (prepared.go, prepgroup.go). With a
//     *bun.DB on another driver than pgx's, the store declines them and
//     every write takes Update.
//   - A SQLite file's WAL frames are written with one pwrite each instead
//     of SQLite's two (walframes.go). This wraps the unix VFS's system
//     calls, which affects every modernc SQLite database in the process.
//   - Hot queries are plain database/sql calls with placeholders rather
//     than Bun's query builder, which formats arguments into the SQL text
//     and so defeats pgx's per-connection prepared statement cache.
package bunstore
