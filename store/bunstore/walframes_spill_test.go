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
