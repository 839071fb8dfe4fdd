package storetest

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" database/sql driver
)

// PostgresEnv names the environment variable holding the DSN of the
// Postgres database tests may use, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const PostgresEnv = "YAPS_TEST_POSTGRES"

// PostgresDSN returns a DSN for a fresh, empty schema in the database named
// by $YAPS_TEST_POSTGRES; the schema is dropped when t ends. Open a store
// with it (bunstore.Open migrates it) and the test sees only its own rows,
// even with other tests running against the same database.
//
// It skips t when the variable is unset and fails t when the database is
// unreachable, so CI that configures Postgres cannot silently skip.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		t.Skipf("%s is not set; skipping the Postgres test", PostgresEnv)
	}
	return PostgresSchema(t, dsn)
}

// PostgresSchema is PostgresDSN for an explicit base DSN.
func PostgresSchema(t testing.TB, dsn string) string {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schema := id("yaps_test_")
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		_ = db.Close()
		t.Fatalf("postgres %s: create schema: %v", PostgresEnv, err)
	}
	t.Cleanup(func() {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
			t.Errorf("postgres: drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(dsn, schema)
}

// withSearchPath adds search_path to a URL or keyword/value DSN; pgx sends
// unknown parameters to the server as run-time settings.
func withSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}
