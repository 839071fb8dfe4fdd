//go:build linux && (amd64 || arm64)

package bunstore

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// copyDBFiles copies the database file and its WAL as they are on disk now
// (what a crash of the process at this moment would leave) to a new dir.
func copyDBFiles(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst+suffix, b, 0o600))
	}
	return dst
}

// A commit whose transaction spilled pages to the WAL and then changed one
// of them again makes SQLite rewrite the frame headers at COMMIT
// (walRewriteChecksums: read the frame, write its 24-byte header, and so
// on). The last of those headers is the commit frame's, and no page write
// follows it: the hook must write it at once, not hold it, or the file
// holds a commit frame with a stale checksum until the connection's next
// call (SQLite store review).
func TestSpilledCommitHeaderWritten(t *testing.T) {
	installWALFrameWrites()
	path := filepath.Join(t.TempDir(), "spill.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"+
		"&_pragma=cache_size(10)&_pragma=wal_autocheckpoint(0)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)`)
	require.NoError(t, err)

	tx, err := db.Begin()
	require.NoError(t, err)
	blob := strings.Repeat("x", 2000)
	for i := 1; i <= 300; i++ { // far more dirty pages than the cache holds: spills
		_, err = tx.Exec(`INSERT INTO t (id, b) VALUES (?, ?)`, i, blob)
		require.NoError(t, err)
	}
	_, err = tx.Exec(`UPDATE t SET b = 'changed' WHERE id = 1`) // a page spilled above
	require.NoError(t, err)
	require.NoError(t, tx.Commit()) // acknowledged

	// The process dies now (no further call on the writer's WAL fd).
	copied := copyDBFiles(t, path)
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n))
	require.Equal(t, 300, n)

	crashed, err := sql.Open("sqlite", "file:"+copied)
	require.NoError(t, err)
	defer crashed.Close()
	require.NoError(t, crashed.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n))
	require.Equal(t, 300, n, "the committed transaction is lost after a crash")
}

// Every frame of a transaction is in the WAL file when its COMMIT returns,
// with no further call on the writer's descriptor (frames are buffered
// until the commit frame's page): a crash right after the acknowledgement
// loses nothing. Several transactions of several pages each, on one
// connection, each checked on a copy of the files as they are on disk.
func TestCommitFramesOnDiskAtCommit(t *testing.T) {
	installWALFrameWrites()
	path := filepath.Join(t.TempDir(), "commit.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(0)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE a (id INTEGER PRIMARY KEY, b BLOB); CREATE TABLE c (id INTEGER PRIMARY KEY, b BLOB)`)
	require.NoError(t, err)
	blob := strings.Repeat("y", 3000) // a page per row
	for round := 1; round <= 3; round++ {
		tx, err := db.Begin()
		require.NoError(t, err)
		for i := range 20 {
			_, err = tx.Exec(`INSERT INTO a (b) VALUES (?)`, blob)
			require.NoError(t, err)
			_, err = tx.Exec(`INSERT INTO c (id, b) VALUES (?, ?)`, round*100+i, blob)
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit())

		crashed, err := sql.Open("sqlite", "file:"+copyDBFiles(t, path))
		require.NoError(t, err)
		var na, nc int
		require.NoError(t, crashed.QueryRow(`SELECT (SELECT COUNT(*) FROM a), (SELECT COUNT(*) FROM c)`).Scan(&na, &nc))
		require.NoError(t, crashed.Close())
		require.Equal(t, []int{20 * round, 20 * round}, []int{na, nc}, "round %d: acknowledged rows lost", round)
	}
}
