package bunstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/yaps-dev/yaps/yaps"
)

// directConn opens a SQLite file with a table t and returns a direct runner
// on one connection and that connection, for database/sql's side.
func directConn(t *testing.T) (*direct, *sql.Conn) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "direct.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	c, err := db.Conn(ctx)
	require.NoError(t, err)
	_, err = c.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v ANY) STRICT`)
	require.NoError(t, err)
	var d *direct
	require.NoError(t, c.Raw(func(dc any) error { d = directOf(dc); return nil }))
	require.NotNil(t, d, "modernc.org/sqlite's connection no longer has the fields direct.go reads")
	t.Cleanup(func() {
		d.close()
		_ = c.Close()
	})
	return d, c
}

// stored returns the type and SQL literal of row k's value.
func stored(t *testing.T, c *sql.Conn, k string) string {
	t.Helper()
	var typ, lit string
	require.NoError(t, c.QueryRowContext(context.Background(),
		`SELECT typeof(v), quote(v) FROM t WHERE k = ?`, k).Scan(&typ, &lit))
	return typ + " " + lit
}

// Every argument type the direct path binds is stored exactly as
// database/sql and the driver store it.
func TestDirectBindsAsTheDriver(t *testing.T) {
	t.Parallel()
	d, c := directConn(t)
	ctx := context.Background()
	const insert = `INSERT INTO t (k, v) VALUES (?, ?)`
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"nil", nil, "null NULL"},
		{"int64", int64(-1) << 40, "integer -1099511627776"},
		{"int", 42, "integer 42"},
		{"int32", int32(-7), "integer -7"},
		{"true", true, "integer 1"},
		{"false", false, "integer 0"},
		{"float64", 1.5, "real 1.5"},
		{"valid NullInt64", sql.NullInt64{Int64: 9, Valid: true}, "integer 9"},
		{"null NullInt64", sql.NullInt64{}, "null NULL"},
		{"valid NullString", sql.NullString{String: "x", Valid: true}, "text 'x'"},
		{"null NullString", sql.NullString{}, "null NULL"},
		{"string", "héllo, 'world'", "text 'héllo, ''world'''"},
		{"empty string", "", "text ''"},
		{"string with NUL", "a\x00b", "text 'a'"}, // quote() stops at the NUL; length below
		{"blob", []byte{0, 1, 0xff}, "blob X'0001FF'"},
		{"empty blob", []byte{}, "blob X''"},
		{"nil blob", []byte(nil), "null NULL"},
		// Through a pointer, as writeArgs passes them.
		{"*int64", ptr(int64(1) << 40), "integer 1099511627776"},
		{"*string", ptr("héllo"), "text 'héllo'"},
		{"*blob", ptr([]byte{7}), "blob X'07'"},
		{"*nil blob", ptr([]byte(nil)), "null NULL"},
		{"*valid NullInt64", ptr(sql.NullInt64{Int64: -3, Valid: true}), "integer -3"},
		{"*null NullInt64", ptr(sql.NullInt64{}), "null NULL"},
		{"*valid NullString", ptr(sql.NullString{String: "y", Valid: true}), "text 'y'"},
		{"*null NullString", ptr(sql.NullString{}), "null NULL"},
	}
	for _, tt := range tests {
		_, ok, err := d.exec(insert, []any{"direct " + tt.name, tt.v})
		require.True(t, ok, tt.name)
		require.NoError(t, err, tt.name)
		_, err = c.ExecContext(ctx, insert, "driver "+tt.name, tt.v)
		require.NoError(t, err, tt.name)
		got := stored(t, c, "direct "+tt.name)
		require.Equal(t, tt.want, got, tt.name)
		require.Equal(t, stored(t, c, "driver "+tt.name), got, tt.name)
	}
	var n int
	require.NoError(t, c.QueryRowContext(ctx, `SELECT length(CAST(v AS BLOB)) FROM t WHERE k = 'direct string with NUL'`).Scan(&n))
	require.Equal(t, 3, n)
}

func ptr[T any](v T) *T { return &v }

// The result carries the rows changed and the last rowid; RETURNING runs
// to its end; a failed statement reports SQLite's code and can run again.
func TestDirectResultsAndErrors(t *testing.T) {
	t.Parallel()
	d, c := directConn(t)
	res, ok, err := d.exec(`INSERT INTO t (k, v) VALUES (?, ?), (?, ?)`, []any{"a", 1, "b", 2})
	require.True(t, ok)
	require.NoError(t, err)
	n, _ := res.RowsAffected()
	id, _ := res.LastInsertId()
	require.Equal(t, int64(2), n)
	require.Equal(t, int64(2), id)

	res, ok, err = d.exec(`UPDATE t SET v = v + 1 WHERE id > ? RETURNING id`, []any{0})
	require.True(t, ok)
	require.NoError(t, err)
	n, _ = res.RowsAffected()
	require.Equal(t, int64(2), n, "every returned row was stepped")
	require.Equal(t, "integer 3", stored(t, c, "b"))

	_, ok, err = d.exec(`INSERT INTO t (k, v) VALUES (?, ?)`, []any{"a", 3})
	require.True(t, ok)
	require.ErrorContains(t, err, "UNIQUE constraint failed: t.k")
	code, isSQLite := sqliteCode(err)
	require.True(t, isSQLite)
	require.Equal(t, 19, code) // SQLITE_CONSTRAINT

	_, ok, err = d.exec(`INSERT INTO t (k, v) VALUES (?, ?)`, []any{"c", 3})
	require.True(t, ok)
	require.NoError(t, err, "the statement was reset after its error")
	require.Equal(t, "integer 3", stored(t, c, "c"))

	_, ok, err = d.exec(`INSERT INTO t (k, v) VALUES (?, ?)`, []any{"d", "text in an integer column"})
	require.True(t, ok)
	require.NoError(t, err) // v is ANY
	_, ok, err = d.exec(`INSERT INTO nowhere VALUES (?)`, []any{1})
	require.True(t, ok)
	require.ErrorContains(t, err, "no such table: nowhere")
}

// Statements and arguments the direct path does not take are left to
// database/sql, untouched.
func TestDirectDeclines(t *testing.T) {
	t.Parallel()
	d, c := directConn(t)
	tests := []struct {
		name string
		q    string
		args []any
	}{
		{"time argument", `INSERT INTO t (k, v) VALUES (?, ?)`, []any{"a", time.Now()}},
		{"other type", `INSERT INTO t (k, v) VALUES (?, ?)`, []any{"a", uint8(1)}},
		{"named parameters", `INSERT INTO t (k, v) VALUES (:k, :v)`, []any{"a", 1}},
		{"$name parameters", `INSERT INTO t (k, v) VALUES ($k, $v)`, []any{"a", 1}},
		{"an argument twice", `INSERT INTO t (k, v) VALUES (?1, $1)`, []any{"a", 1}},
		{"an argument unused", `INSERT INTO t (k, v) VALUES ($1, $3)`, []any{"a", 1, 2}},
		{"a leading zero", `INSERT INTO t (k, v) VALUES ($01, $2)`, []any{"a", 1}},
		{"two statements", `INSERT INTO t (k, v) VALUES (?, ?); DELETE FROM t`, []any{"a", 1}},
		{"too few arguments", `INSERT INTO t (k, v) VALUES (?, ?)`, []any{"a"}},
		{"too many arguments", `INSERT INTO t (k, v) VALUES (?, ?)`, []any{"a", 1, 2}},
		{"no statement", `-- nothing`, nil},
	}
	for _, tt := range tests {
		res, ok, err := d.exec(tt.q, tt.args)
		require.False(t, ok, tt.name)
		require.NoError(t, err, tt.name)
		require.Nil(t, res, tt.name)
	}
	var n int
	require.NoError(t, c.QueryRowContext(context.Background(), `SELECT count(*) FROM t`).Scan(&n))
	require.Zero(t, n, "a declined statement ran")
	// A trailing semicolon is still one statement.
	_, ok, err := d.exec(`INSERT INTO t (k, v) VALUES (?, ?);  `, []any{"a", 1})
	require.True(t, ok)
	require.NoError(t, err)
}

// Numbered parameters take the argument of their number, as the driver
// reads them, in whatever order they appear.
func TestDirectNumberedParameters(t *testing.T) {
	t.Parallel()
	d, c := directConn(t)
	for i, q := range []string{
		`INSERT INTO t (v, k) VALUES ($2, $1)`,
		`INSERT INTO t (v, k) VALUES (?2, ?1)`,
		`INSERT INTO t (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = $2 || '!'`,
	} {
		k := fmt.Sprint("k", i)
		_, ok, err := d.exec(q, []any{k, "v"})
		require.True(t, ok, q)
		require.NoError(t, err, q)
		require.Equal(t, "text 'v'", stored(t, c, k), q)
	}
	_, ok, err := d.exec(`UPDATE t SET v = $3 WHERE k = $1 AND v = $2`, []any{"k1", "v", "w"})
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, "text 'w'", stored(t, c, "k1"))
	require.Equal(t, "text 'v'", stored(t, c, "k0"))
}

// The argument buffer grows for a large blob, and later smaller arguments
// are bound from its start.
func TestDirectArgumentBuffer(t *testing.T) {
	t.Parallel()
	d, c := directConn(t)
	big := []byte(strings.Repeat("0123456789", 100_000))
	_, ok, err := d.exec(`INSERT INTO t (k, v) VALUES (?, ?)`, []any{"big", big})
	require.True(t, ok)
	require.NoError(t, err)
	require.GreaterOrEqual(t, d.bufN, len(big)+len("big"))
	_, ok, err = d.exec(`INSERT INTO t (k, v) VALUES (?, ?)`, []any{"small", "s"})
	require.True(t, ok)
	require.NoError(t, err)
	var got []byte
	require.NoError(t, c.QueryRowContext(context.Background(), `SELECT v FROM t WHERE k = 'big'`).Scan(&got))
	require.Equal(t, big, got)
	require.Equal(t, "text 's'", stored(t, c, "small"))
}

// directOf takes modernc.org/sqlite's connection only.
func TestDirectOfOtherConnections(t *testing.T) {
	t.Parallel()
	type conn struct { // the right field names, in another package
		db  uintptr
		tls *libc.TLS
	}
	for _, dc := range []any{nil, 1, conn{}, &conn{db: 1, tls: &libc.TLS{}}, (*conn)(nil)} {
		require.Nil(t, directOf(dc), "%T", dc)
	}
}

// A SQLite store's writer runs its statements directly, so a modernc
// release that moves the connection's fields fails here instead of
// quietly making every write slower.
func TestWriterRunsDirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
	require.NoError(t, err)
	defer s.Close()
	now := time.Now()
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "direct", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))
	require.NoError(t, s.Update(ctx, "direct", func(tx yaps.Tx) error {
		_, err := tx.AppendUpdate([]byte("u1"))
		return err
	}))
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	require.NotNil(t, s.writer)
	require.NotNil(t, s.writer.direct)
	ran := 0
	for _, st := range s.writer.direct.stmts {
		if st != nil {
			ran++
		}
	}
	require.Positive(t, ran, "no statement ran directly")
}

// Random texts and blobs (invalid UTF-8, NUL bytes, lengths across the
// buffer's growth) are stored byte for byte as the driver stores them.
func TestDirectRandomArguments(t *testing.T) {
	t.Parallel()
	d, c := directConn(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	const insert = `INSERT INTO t (k, v) VALUES (?, ?)`
	for i := range 300 {
		b := make([]byte, rng.IntN(1<<uint(rng.IntN(15))+1))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		var v any = b
		if i%2 == 0 {
			v = string(b)
		}
		k := fmt.Sprint(i)
		_, ok, err := d.exec(insert, []any{"direct " + k, v})
		require.True(t, ok)
		require.NoError(t, err)
		_, err = c.ExecContext(ctx, insert, "driver "+k, v)
		require.NoError(t, err)
		var typ1, hex1, typ2, hex2 string
		q := `SELECT typeof(v), hex(v) FROM t WHERE k = ?`
		require.NoError(t, c.QueryRowContext(ctx, q, "direct "+k).Scan(&typ1, &hex1))
		require.NoError(t, c.QueryRowContext(ctx, q, "driver "+k).Scan(&typ2, &hex2))
		require.Equal(t, typ2+" "+hex2, typ1+" "+hex1, "argument %d (%d bytes)", i, len(b))
		require.Equal(t, len(b)*2, len(hex1))
	}
}

// Without the direct path (another driver), the writer's statements take
// writeArgs' pointers through database/sql, which reads through them: an
// edit's yap row, update row and list row are stored the same way.
func TestWriterArgsWithoutDirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
	require.NoError(t, err)
	defer s.Close()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "l", Title: "t", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))
	s.writeMu.Lock()
	require.NotNil(t, s.writer)
	s.writer.direct.close()
	s.writer.direct = nil
	s.writeMu.Unlock()

	archived := now.Add(time.Minute)
	y := &yaps.Yap{ID: "y", ListRef: "l", Kind: yaps.KindNote, Content: "héllo", CreatedAt: now, UpdatedAt: now}
	for _, content := range []string{"héllo", "héllo, world"} { // the second rewrites the row's data only
		y.Content = content
		require.NoError(t, s.Update(ctx, "l", func(tx yaps.Tx) error {
			if _, err := tx.AppendUpdate([]byte("u-" + content)); err != nil {
				return err
			}
			l := tx.List().Clone()
			l.Title, l.ArchivedAt = content, &archived
			if err := tx.SaveList(l); err != nil {
				return err
			}
			if err := tx.AppendAudit(&yaps.AuditEntry{ListRef: "l", At: now, PermissionID: "p", Role: yaps.RoleOwner,
				Action: "yap.update", YapID: "y", Detail: content}); err != nil {
				return err
			}
			return tx.PutYap(y)
		}))
	}
	audit, err := s.Audit(ctx, "l", 0, 0)
	require.NoError(t, err)
	require.Len(t, audit, 2)
	for i, content := range []string{"héllo", "héllo, world"} {
		require.Equal(t, yaps.AuditEntry{Seq: audit[i].Seq, ListRef: "l", At: now, PermissionID: "p", Role: yaps.RoleOwner,
			Action: "yap.update", YapID: "y", Detail: content}, *audit[i])
	}
	got, err := s.Yap(ctx, "l", "y")
	require.NoError(t, err)
	require.Equal(t, "héllo, world", got.Content)
	l, err := s.List(ctx, "l")
	require.NoError(t, err)
	require.Equal(t, "héllo, world", l.Title)
	require.Equal(t, archived, *l.ArchivedAt)
	require.Equal(t, int64(3), l.DocVersion)
	log, err := s.Doc(ctx, "l", 1)
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("u-héllo"), []byte("u-héllo, world")}, log.Updates)
}

// queryInt reads the first column of a query's first row as database/sql
// does, declines a query with arguments, and reports no rows and errors.
func TestDirectQueryInt(t *testing.T) {
	t.Parallel()
	d, c := directConn(t)
	ctx := context.Background()
	_, err := c.ExecContext(ctx, `INSERT INTO t (k, v) VALUES ('a', 1), ('b', 2), ('c', 3)`)
	require.NoError(t, err)
	for _, q := range []string{`PRAGMA data_version`, `SELECT count(*) FROM t`, `SELECT sum(v) FROM t`, `SELECT v FROM t ORDER BY v DESC`} {
		got, ok, err := d.queryInt(q)
		require.True(t, ok, q)
		require.NoError(t, err, q)
		var want int64
		require.NoError(t, c.QueryRowContext(ctx, q).Scan(&want), q)
		require.Equal(t, want, got, q)
	}
	_, ok, err := d.queryInt(`SELECT v FROM t WHERE k = ?`)
	require.False(t, ok)
	require.NoError(t, err)
	_, ok, err = d.queryInt(`SELECT v FROM t WHERE k = 'none'`)
	require.True(t, ok)
	require.ErrorIs(t, err, sql.ErrNoRows)
	_, ok, err = d.queryInt(`SELECT nothing FROM t`)
	require.True(t, ok)
	require.Error(t, err)
	// Each call runs its statement to the end and resets it: one left
	// mid-rows would hold a read transaction open.
	const q = `SELECT v FROM t ORDER BY v`
	got, ok, err := d.queryInt(q)
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, int64(1), got)
	require.Zero(t, sqlite3.Xsqlite3_stmt_busy(d.tls, d.stmts[q].p))
}
