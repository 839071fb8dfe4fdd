package bunstore

import (
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Direct statements on the SQLite writer. Every write statement used to
// go through database/sql and the driver: arguments boxed and converted to
// driver values, each text and blob argument copied into C memory
// malloc'd and freed per call, a parameter-name lookup per argument, and
// a result object. In a profile of the sync benchmark that per-call work
// was a quarter of the writer's statements (their exec 26.7 % of the
// server's CPU, SQLite's own step 20.3 %), and it runs in the single
// writer's turn, which no other write can overlap.
//
// So the writer runs its exec statements (writer.exec) itself, on the
// driver connection's own SQLite handle: prepared once, every text and
// blob argument copied into one C buffer owned here and bound where it
// lies (SQLITE_STATIC, as the driver binds its own copies), stepped to
// the end, reset. A statement it cannot take (an argument of another type,
// parameters named other than ?N or $N, several statements in one string)
// goes through database/sql as before. Queries always do. In process
// (BenchmarkSyncRooms under callgrind, one P) a client update took 10 %
// fewer instructions, and 46 allocations instead of 64 (44 since
// directResult reads its counts only when asked).
//
// The handle comes from modernc.org/sqlite's unexported connection type,
// whose first two fields are the sqlite3* handle and the TLS its calls run
// with. directOf checks their names and types by reflection and declines
// when they differ (another driver, a modernc release that moved them);
// the writer then runs everything through database/sql, and
// TestWriterRunsDirect fails so the change is noticed. Both paths use the
// handle only under writeMu, one call at a time, as the driver does.

// direct runs statements on a SQLite handle (see above).
type direct struct {
	tls   *libc.TLS
	db    uintptr
	stmts map[string]*directStmt // nil entries: statements database/sql runs
	buf   uintptr                // C memory for text and blob arguments
	bufN  int
}

type directStmt struct {
	p   uintptr // sqlite3_stmt*
	arg []int   // the argument of each parameter, every argument once
}

// directOf returns a direct runner on the SQLite handle of the driver
// connection dc, or nil if dc is not modernc.org/sqlite's.
func directOf(dc any) *direct {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	e := v.Elem()
	t := e.Type()
	if t.PkgPath() != "modernc.org/sqlite" || t.Name() != "conn" || t.NumField() < 2 {
		return nil
	}
	f0, f1 := t.Field(0), t.Field(1)
	if f0.Name != "db" || f0.Type.Kind() != reflect.Uintptr ||
		f1.Name != "tls" || f1.Type != reflect.TypeFor[*libc.TLS]() {
		return nil
	}
	db := uintptr(e.Field(0).Uint())
	tls := *(**libc.TLS)(unsafe.Pointer(e.Field(1).UnsafeAddr()))
	if db == 0 || tls == nil {
		return nil
	}
	return &direct{tls: tls, db: db, stmts: map[string]*directStmt{}}
}

// directResult is the sql.Result of a direct statement. It reads the
// handle's counts when asked, so it holds for the writer's last statement
// only: every caller reads it at once. Most never do (BEGIN, COMMIT, most
// writes), and reading both after every statement cost two more calls
// into SQLite, each taking the connection's mutex, and an allocation.
type directResult struct{ d *direct }

func (r directResult) LastInsertId() (int64, error) {
	return sqlite3.Xsqlite3_last_insert_rowid(r.d.tls, r.d.db), nil
}

func (r directResult) RowsAffected() (int64, error) {
	return sqlite3.Xsqlite3_changes64(r.d.tls, r.d.db), nil
}

// directError is a SQLite error of a direct statement. Code gives the
// (extended) result code, as the driver's *sqlite.Error does, so sqliteCode
// reads both.
type directError struct {
	code int
	msg  string
}

func (e *directError) Error() string { return fmt.Sprintf("%s (%d)", e.msg, e.code) }
func (e *directError) Code() int     { return e.code }

// exec runs q with args. ok is false when q or args are not for this path
// (see above); nothing ran then.
func (d *direct) exec(q string, args []any) (res sql.Result, ok bool, err error) {
	size, ok := argBytes(args)
	if !ok {
		return nil, false, nil
	}
	st, err := d.stmt(q)
	if err != nil {
		return nil, true, err
	}
	if st == nil || len(st.arg) != len(args) {
		return nil, false, nil
	}
	if size > d.bufN || d.buf == 0 { // also for no bytes: put needs an address that is not 0
		if err := d.grow(size); err != nil {
			return nil, true, err
		}
	}
	if err := d.bind(st, args); err != nil {
		sqlite3.Xsqlite3_reset(d.tls, st.p)
		return nil, true, err
	}
	rc := sqlite3.Xsqlite3_step(d.tls, st.p)
	for rc == sqlite3.SQLITE_ROW { // RETURNING, run to the end as the driver's Exec does
		rc = sqlite3.Xsqlite3_step(d.tls, st.p)
	}
	if rc != sqlite3.SQLITE_DONE {
		err := d.error(rc)
		sqlite3.Xsqlite3_reset(d.tls, st.p)
		return nil, true, err
	}
	sqlite3.Xsqlite3_reset(d.tls, st.p) // the counts stay until the next statement
	return directResult{d}, true, nil
}

// queryInt runs q, a query without arguments whose first row's first
// column is an integer (PRAGMA data_version), and returns that value. ok
// is false when q is not for this path; nothing ran then.
func (d *direct) queryInt(q string) (v int64, ok bool, err error) {
	st, err := d.stmt(q)
	if err != nil {
		return 0, true, err
	}
	if st == nil || len(st.arg) != 0 {
		return 0, false, nil
	}
	defer sqlite3.Xsqlite3_reset(d.tls, st.p)
	rc := sqlite3.Xsqlite3_step(d.tls, st.p)
	if rc == sqlite3.SQLITE_DONE {
		return 0, true, sql.ErrNoRows
	}
	if rc == sqlite3.SQLITE_ROW {
		v = sqlite3.Xsqlite3_column_int64(d.tls, st.p, 0)
	}
	for rc == sqlite3.SQLITE_ROW {
		rc = sqlite3.Xsqlite3_step(d.tls, st.p)
	}
	if rc != sqlite3.SQLITE_DONE {
		return 0, true, d.error(rc)
	}
	return v, true, nil
}

// argKind is the kind of value an argument binds as.
type argKind uint8

const (
	argOther argKind = iota // a type bind does not take
	argNull
	argInt
	argFloat
	argText
	argBlob
)

// argOf returns what a binds as, reading through a pointer (writeArgs
// passes its values by pointer, which boxes without allocating), as
// database/sql's default converter does.
func argOf(a any) (kind argKind, i int64, f float64, b []byte) {
	switch v := a.(type) {
	case nil:
		return argNull, 0, 0, nil
	case int64:
		return argInt, v, 0, nil
	case *int64:
		return argInt, *v, 0, nil
	case int:
		return argInt, int64(v), 0, nil
	case int32:
		return argInt, int64(v), 0, nil
	case bool:
		return argInt, int64(libc.Bool32(v)), 0, nil
	case float64:
		return argFloat, 0, v, nil
	case string:
		return argText, 0, 0, stringBytes(v)
	case *string:
		return argText, 0, 0, stringBytes(*v)
	case []byte:
		if v == nil {
			return argNull, 0, 0, nil // as the driver binds a nil blob
		}
		return argBlob, 0, 0, v
	case *[]byte:
		return argOf(*v)
	case sql.NullInt64:
		return nullInt(v)
	case *sql.NullInt64:
		return nullInt(*v)
	case sql.NullString:
		return nullText(v)
	case *sql.NullString:
		return nullText(*v)
	}
	return argOther, 0, 0, nil
}

func nullInt(v sql.NullInt64) (argKind, int64, float64, []byte) {
	if !v.Valid {
		return argNull, 0, 0, nil
	}
	return argInt, v.Int64, 0, nil
}

func nullText(v sql.NullString) (argKind, int64, float64, []byte) {
	if !v.Valid {
		return argNull, 0, 0, nil
	}
	return argText, 0, 0, stringBytes(v.String)
}

// argBytes returns how many bytes of C memory args' texts and blobs need,
// or false if an argument has a type bind does not take, or is longer
// than SQLite's bind calls take (an int).
func argBytes(args []any) (int, bool) {
	n := 0
	for _, a := range args {
		kind, _, _, b := argOf(a)
		if kind == argOther || len(b) > math.MaxInt32 {
			return 0, false
		}
		n += len(b)
	}
	return n, true
}

// stmt returns q prepared, or nil if database/sql must run it.
func (d *direct) stmt(q string) (*directStmt, error) {
	if st, ok := d.stmts[q]; ok {
		return st, nil
	}
	st, err := d.prepare(q)
	if err != nil {
		return nil, err
	}
	d.stmts[q] = st
	return st, nil
}

func (d *direct) prepare(q string) (*directStmt, error) {
	z, err := libc.CString(q)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(d.tls, z)
	out := d.tls.Alloc(2 * int(unsafe.Sizeof(uintptr(0)))) // ppStmt, pzTail
	defer d.tls.Free(2 * int(unsafe.Sizeof(uintptr(0))))
	pp, ptail := out, out+unsafe.Sizeof(uintptr(0))
	rc := sqlite3.Xsqlite3_prepare_v3(d.tls, d.db, z, int32(len(q)), sqlite3.SQLITE_PREPARE_PERSISTENT, pp, ptail)
	if rc != sqlite3.SQLITE_OK {
		return nil, d.error(rc)
	}
	p := *(*uintptr)(cmem(pp))
	tail := *(*uintptr)(cmem(ptail))
	if p == 0 {
		return nil, nil // no statement in q (a comment)
	}
	st := &directStmt{p: p}
	if rest := q[tail-z:]; strings.TrimSpace(strings.Trim(rest, "; \t\n")) != "" || !st.mapArgs(d.tls) {
		sqlite3.Xsqlite3_finalize(d.tls, p)
		return nil, nil // several statements, or parameters with names
	}
	return st, nil
}

// mapArgs finds the argument of each of st's parameters, as the driver
// does: ? takes the argument of its position, ?N and $N the Nth. It
// reports false for other names (:a, @a, $a) and for arguments used by
// no parameter or by two.
func (st *directStmt) mapArgs(tls *libc.TLS) bool {
	n := int(sqlite3.Xsqlite3_bind_parameter_count(tls, st.p))
	st.arg = make([]int, n)
	used := make([]bool, n)
	for i := range n {
		k := i
		if z := sqlite3.Xsqlite3_bind_parameter_name(tls, st.p, int32(i+1)); z != 0 {
			name := libc.GoString(z)
			if len(name) < 2 || (name[0] != '$' && name[0] != '?') {
				return false
			}
			num, err := strconv.Atoi(name[1:])
			if err != nil || name[1:] != strconv.Itoa(num) {
				return false
			}
			k = num - 1
		}
		if k < 0 || k >= n || used[k] {
			return false
		}
		used[k] = true
		st.arg[i] = k
	}
	return true
}

// grow makes the argument buffer hold at least n bytes. Statements bound
// to the old buffer are reset and are bound again before they next run.
func (d *direct) grow(n int) error {
	n = max(n, 2*d.bufN, 4096)
	if d.buf != 0 {
		libc.Xfree(d.tls, d.buf)
		d.buf, d.bufN = 0, 0
	}
	if d.buf = libc.Xmalloc(d.tls, uint64(n)); d.buf == 0 {
		return fmt.Errorf("bunstore: direct statement: no memory for %d bytes of arguments", n)
	}
	d.bufN = n
	return nil
}

// bind binds args to st's parameters, texts and blobs copied into d.buf.
func (d *direct) bind(st *directStmt, args []any) error {
	// put copies b into d.buf and returns where: never 0, so an empty text
	// or blob binds as empty, not as NULL. exec sized d.buf by argBytes,
	// which counts what put copies; short would be a bug, reported rather
	// than bound.
	off, short := 0, false
	put := func(b []byte) uintptr {
		p := d.buf + uintptr(off)
		short = short || len(b) > d.bufN-off
		off += copy(unsafe.Slice((*byte)(cmem(p)), d.bufN-off), b)
		return p
	}
	for i, k := range st.arg {
		idx := int32(i + 1)
		var rc int32
		switch kind, n, f, b := argOf(args[k]); kind {
		case argNull:
			rc = sqlite3.Xsqlite3_bind_null(d.tls, st.p, idx)
		case argInt:
			rc = sqlite3.Xsqlite3_bind_int64(d.tls, st.p, idx, n)
		case argFloat:
			rc = sqlite3.Xsqlite3_bind_double(d.tls, st.p, idx, f)
		case argText:
			rc = sqlite3.Xsqlite3_bind_text(d.tls, st.p, idx, put(b), int32(len(b)), 0)
		case argBlob:
			rc = sqlite3.Xsqlite3_bind_blob(d.tls, st.p, idx, put(b), int32(len(b)), 0)
		}
		if short {
			return fmt.Errorf("bunstore: direct statement: argument buffer too small")
		}
		if rc != sqlite3.SQLITE_OK {
			return d.error(rc)
		}
	}
	return nil
}

// cmem turns an address of C memory (libc's heap or the TLS's stack,
// never Go's) into a pointer.
func cmem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// stringBytes returns s's bytes without a copy, for reading only.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// error returns rc as an error with the handle's message.
func (d *direct) error(rc int32) error {
	msg := libc.GoString(sqlite3.Xsqlite3_errmsg(d.tls, d.db))
	return &directError{code: int(rc), msg: msg}
}

// close finalizes d's statements and frees its buffer. The handle itself
// belongs to the driver connection, which closes it.
func (d *direct) close() {
	for _, st := range d.stmts {
		if st != nil {
			sqlite3.Xsqlite3_finalize(d.tls, st.p)
		}
	}
	clear(d.stmts)
	if d.buf != 0 {
		libc.Xfree(d.tls, d.buf)
		d.buf, d.bufN = 0, 0
	}
}
