package bunstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// lastMigration is a recent migration that creates a table, which the
// upgrade test undoes and runs again: its version and the table.
const lastMigration, lastMigrationTable = "20261122000006", "doc_clients"

// failRecord fails the INSERT that records migration name (its context is
// cancelled), as a signal or a dropped connection at that moment would.
type failRecord struct{ name string }

func (h failRecord) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if strings.HasPrefix(strings.TrimSpace(e.Query), "INSERT") && strings.Contains(e.Query, "yaps_migrations") &&
		strings.Contains(e.Query, h.name) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c
	}
	return ctx
}

func (failRecord) AfterQuery(context.Context, *bun.QueryEvent) {}

// An upgrade that fails while recording a migration leaves it undone, so
// the next start runs it again. Before, bun recorded it after its own
// COMMIT: the schema was changed, the migration unrecorded, and every later
// start failed on "table doc_clients already exists".
// hostDB is a database the migration tests run on: a fresh one, and how a
// host application would open it itself with bun.
type hostDB struct {
	name     string
	dsn      func(t *testing.T) string
	hostDB   func(dsn string) (*bun.DB, error)
	hasTable string // counts the tables named ?
}

var hostDBs = []hostDB{
	{"SQLite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "yaps.db") },
		func(dsn string) (*bun.DB, error) {
			sqldb, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(dsn, "sqlite:")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
			return bun.NewDB(sqldb, sqlitedialect.New()), err
		},
		`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`},
	{"Postgres", func(t *testing.T) string { return storetest.PostgresDSN(t) },
		func(dsn string) (*bun.DB, error) {
			sqldb, err := sql.Open("pgx", dsn)
			return bun.NewDB(sqldb, pgdialect.New()), err
		},
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?`},
}

// onHostDBs runs fn on each of hostDBs, in parallel, with a fresh database.
func onHostDBs(t *testing.T, fn func(t *testing.T, tc hostDB, dsn string)) {
	t.Parallel()
	for _, tc := range hostDBs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn(t, tc, tc.dsn(t))
		})
	}
}

func TestMigrationRecordedWithItsChanges(t *testing.T) {
	onHostDBs(t, func(t *testing.T, tc hostDB, dsn string) {
		ctx := context.Background()
		db, err := tc.hostDB(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		tables := func() int {
			var n int
			require.NoError(t, db.QueryRowContext(ctx, tc.hasTable, lastMigrationTable).Scan(&n))
			return n
		}
		records := func() int {
			var n int
			require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM yaps_migrations WHERE name = ?`, lastMigration).Scan(&n))
			return n
		}

		// A database at the previous release's schema.
		s, err := bunstore.Open(ctx, dsn)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		_, err = db.ExecContext(ctx, `DROP TABLE `+lastMigrationTable)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `DELETE FROM yaps_migrations WHERE name = ?`, lastMigration)
		require.NoError(t, err)

		// The upgrade fails as it records the migration: nothing of it
		// stays.
		st, err := bunstore.New(db.WithQueryHook(failRecord{lastMigration}))
		require.NoError(t, err)
		require.Error(t, st.Migrate(ctx))
		require.NoError(t, st.Close())
		require.Zero(t, tables(), "the migration's table outlived its failed record")
		require.Zero(t, records())

		// The next start upgrades.
		s, err = bunstore.Open(ctx, dsn)
		require.NoError(t, err, "the store no longer opens after an interrupted upgrade")
		require.NoError(t, s.Close())
		require.Equal(t, 1, tables())
		require.Equal(t, 1, records())
	})
}

// A database migrated by a newer build (a migration this one does not
// know) is refused: this build could misread what the newer one writes,
// such as an update row holding several updates.
func TestNewerDatabaseRefused(t *testing.T) {
	onHostDBs(t, func(t *testing.T, tc hostDB, dsn string) {
		ctx := context.Background()
		s, err := bunstore.Open(ctx, dsn)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		db, err := tc.hostDB(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		_, err = db.ExecContext(ctx, `INSERT INTO yaps_migrations (name, group_id, migrated_at) VALUES (?, ?, ?)`,
			"29991231000000", 99, time.Now())
		require.NoError(t, err)

		_, err = bunstore.Open(ctx, dsn)
		require.ErrorContains(t, err, "migrated by a newer version of yaps (migration 29991231000000)")
	})
}

// On a Postgres server built with lz4, the compacted state is compressed
// with it (migration 20261129000008); a server without lz4, or older than
// Postgres 14, keeps pglz and the migration still succeeds.
func TestPostgresStateCompression(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	s, err := bunstore.Open(context.Background(), dsn)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	var version int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version))
	if version < 140000 {
		return // no per-column compression: opening above is the test
	}
	want := "l"
	if _, err := db.ExecContext(ctx, `CREATE TEMP TABLE lz4_probe (b bytea COMPRESSION lz4)`); err != nil {
		require.ErrorContains(t, err, "lz4")
		want = "" // the default method
	}
	var got string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT attcompression::text FROM pg_attribute
		WHERE attrelid = 'lists'::regclass AND attname = 'state'`).Scan(&got))
	require.Equal(t, want, got)
}

// The audit log has one index, its primary key (list_ref, seq), which
// serves its reads by list (migration 20261129000009); audit entries keep
// their seqs and their order through the migration.
func TestPostgresAuditKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.PostgresDSN(t)
	s, err := bunstore.Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	for _, ref := range []string{"a", "b"} {
		require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: ref, Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))
		for i := range 3 {
			require.NoError(t, s.Update(ctx, ref, func(tx yaps.Tx) error {
				return tx.AppendAudit(&yaps.AuditEntry{ListRef: ref, At: now, PermissionID: "p", Role: yaps.RoleOwner,
					Action: "yap.create", YapID: fmt.Sprint(i)})
			}))
		}
	}
	for _, ref := range []string{"a", "b"} {
		got, err := s.Audit(ctx, ref, 0, 0)
		require.NoError(t, err)
		require.Len(t, got, 3)
		for i, e := range got {
			require.Equal(t, ref, e.ListRef)
			require.Equal(t, fmt.Sprint(i), e.YapID)
			if i > 0 {
				require.Greater(t, e.Seq, got[i-1].Seq)
			}
		}
		page, err := s.Audit(ctx, ref, got[0].Seq, 1)
		require.NoError(t, err)
		require.Equal(t, []*yaps.AuditEntry{got[1]}, page)
	}

	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'audit' AND schemaname = current_schema()`)
	require.NoError(t, err)
	defer rows.Close()
	var indexes []string
	for rows.Next() {
		var name, def string
		require.NoError(t, rows.Scan(&name, &def))
		indexes = append(indexes, name+": "+def[strings.Index(def, " USING "):])
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"audit_pkey:  USING btree (list_ref, seq)"}, indexes)
}
