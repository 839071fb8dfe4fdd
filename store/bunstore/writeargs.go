package bunstore

import (
	"database/sql"

	"github.com/yaps-dev/yaps/yaps"
)

// writeArgs holds the arguments of the SQLite writer's most frequent
// statements: every edit writes its yap's row, an update row and its
// list's row, and every HTTP write an audit row. Boxing a string, a slice
// or a large integer into an any allocates, a quarter of an edit's
// allocations in BenchmarkSyncRooms; boxing a pointer does not. So these statements' arguments are pointers
// to the fields here, set for each call. A statement reads them during
// its call only (direct.bind copies them into C memory, database/sql
// converts them through the pointers), and the writer runs one statement
// at a time, so each statement can reuse its own. Off the writer (nil
// *writeArgs, see wtx.args) the methods box the arguments as usual.
type writeArgs struct {
	yap struct {
		ref, id string
		created int64
		deleted sql.NullInt64
		data    []byte // reused: appendYap writes into its array
		args    [5]any
	}
	update struct {
		ref    string
		seq, n int64
		data   []byte
		args   [4]any
	}
	list struct {
		ref, title, kind   string
		updated            int64
		archived, rolledUp sql.NullInt64
		account            sql.NullString
		docVersion         int64
		args               [8]any
	}
	audit struct {
		ref                               string
		at                                int64
		perm, role, action, yapID, detail string
		args                              [7]any
	}
}

// args returns the writer's writeArgs, or nil off the SQLite writer.
func (t *wtx) args() *writeArgs {
	if t.w == nil {
		return nil
	}
	return &t.w.args
}

// yapArgs are yapArgs(ref, y) (codec.go), through a.
func (a *writeArgs) yapArgs(ref string, y *yaps.Yap) []any {
	if a == nil {
		return yapArgs(ref, y)
	}
	r := &a.yap
	r.ref, r.id, r.created, r.deleted = ref, y.ID, ms(y.CreatedAt), msPtr(y.DeletedAt)
	r.data = appendYap(r.data[:0], y)
	r.args = [...]any{&r.ref, &r.id, &r.created, &r.deleted, &r.data}
	return r.args[:]
}

// updateArgs are insertUpdate's arguments, through a.
func (a *writeArgs) updateArgs(ref string, seq, n int64, data []byte) []any {
	if a == nil {
		return []any{ref, seq, n, data}
	}
	r := &a.update
	r.ref, r.seq, r.n, r.data = ref, seq, n, data
	r.args = [...]any{&r.ref, &r.seq, &r.n, &r.data}
	return r.args[:]
}

// saveListArgs are saveListArgs(l, docVersion) (codec.go), through a.
func (a *writeArgs) saveListArgs(l *yaps.List, docVersion int64) []any {
	if a == nil {
		return saveListArgs(l, docVersion)
	}
	r := &a.list
	r.ref, r.title, r.kind, r.updated = l.Ref, l.Title, string(l.Kind), ms(l.UpdatedAt)
	r.archived, r.rolledUp, r.account, r.docVersion = msPtr(l.ArchivedAt), msPtr(l.RolledUpAt), nullString(l.AccountID), docVersion
	r.args = [...]any{&r.ref, &r.title, &r.kind, &r.updated, &r.archived, &r.rolledUp, &r.account, &r.docVersion}
	return r.args[:]
}

// auditArgs are auditArgs(ref, e) (codec.go), through a.
func (a *writeArgs) auditArgs(ref string, e *yaps.AuditEntry) []any {
	if a == nil {
		return auditArgs(ref, e)
	}
	r := &a.audit
	r.ref, r.at, r.perm, r.role = ref, ms(e.At), e.PermissionID, string(e.Role)
	r.action, r.yapID, r.detail = e.Action, e.YapID, e.Detail
	r.args = [...]any{&r.ref, &r.at, &r.perm, &r.role, &r.action, &r.yapID, &r.detail}
	return r.args[:]
}
