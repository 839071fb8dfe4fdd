package bunstore

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
)

// A process that read which migrations are applied just before another
// process applied the rest skips them. Before, it ran them again: the
// rebuild of doc_updates (migration 3) can run twice, so it dropped the
// column a later migration had added, and the store failed to prepare its
// statements ("no such column: n"), about one start in 25 when four servers
// opened a fresh SQLite file together.
func TestMigrationAppliedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "yaps.db")
	sqldb, err := openSQLite(path)
	require.NoError(t, err)
	s, err := New(bun.NewDB(sqldb, sqlitedialect.New()))
	require.NoError(t, err)
	s.ownsDB = true
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	// The file at the second migration.
	all, err := fs.Sub(migrationsFS, "migrations/sqlite")
	require.NoError(t, err)
	files, err := fs.Glob(all, "*.sql")
	require.NoError(t, err)
	slices.Sort(files)
	require.Greater(t, len(files), 3)
	early := fstest.MapFS{}
	for _, name := range files[:2] {
		data, err := fs.ReadFile(all, name)
		require.NoError(t, err)
		early[name] = &fstest.MapFile{Data: data}
	}
	m, queries, err := s.migrator(early)
	require.NoError(t, err)
	require.NoError(t, m.Init(ctx))
	require.NoError(t, s.applyMigrations(ctx, m, queries))

	// Another process migrates the file to the end right after s read
	// that only two migrations are applied.
	others := 0
	s.afterMigrationStatus = func() {
		if others++; others > 1 {
			return
		}
		other, err := Open(ctx, "sqlite:"+path)
		require.NoError(t, err)
		require.NoError(t, other.Close())
	}
	require.NoError(t, s.Migrate(ctx))
	require.Equal(t, 1, others, "s found every migration applied on its first read")

	var runs []int
	require.NoError(t, s.db.NewSelect().TableExpr(migrationsTable).ColumnExpr("count(*)").
		GroupExpr("name").Scan(ctx, &runs))
	require.Len(t, runs, len(files))
	for _, n := range runs {
		require.Equal(t, 1, n, "a migration ran twice")
	}
	var col int
	require.NoError(t, s.sqldb.QueryRowContext(ctx,
		`SELECT count(*) FROM pragma_table_info('doc_updates') WHERE name = 'n'`).Scan(&col))
	require.Equal(t, 1, col)
}
