package bunstore

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// Times are stored as unix milliseconds: exact, zone-free and the same in
// both dialects.

func ms(t time.Time) int64 { return t.UnixMilli() }

func msPtr(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMs(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMs(v.Int64)
	return &t
}

// nullString maps "" to NULL (account_id of anonymous lists).
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// nullBytes maps an empty hash to NULL so UNIQUE ignores it.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// A yap is stored as its ordering columns plus a compact binary blob of the
// other fields (version byte, presence flags, then the fields in order;
// strings are uvarint-length-prefixed, times varint unix milliseconds).
// JSON did the same job at several times the decoding cost, and page reads
// decode up to 200 yaps per request.
const yapFormat = 1

const (
	hasPriority = 1 << iota
	hasDueAt
	hasTags
	hasTitle
	hasStartsAt
	hasEndsAt
	hasLocation
)

func encodeYap(y *yaps.Yap) []byte { return appendYap(nil, y) }

// appendYap appends y's encoding to b.
func appendYap(b []byte, y *yaps.Yap) []byte {
	var flags uint64
	set := func(ok bool, bit uint64) {
		if ok {
			flags |= bit
		}
	}
	set(y.Priority != nil, hasPriority)
	set(y.DueAt != nil, hasDueAt)
	set(y.Tags != nil, hasTags)
	set(y.Title != nil, hasTitle)
	set(y.StartsAt != nil, hasStartsAt)
	set(y.EndsAt != nil, hasEndsAt)
	set(y.Location != nil, hasLocation)

	n := 24 + len(y.Kind) + len(y.Content) + len(y.Status) + len(y.Body)
	for _, t := range y.Tags {
		n += len(t) + 2
	}
	b = slices.Grow(b, n+64)
	b = append(b, yapFormat)
	b = binary.AppendUvarint(b, flags)
	b = appendString(b, string(y.Kind))
	b = binary.AppendVarint(b, ms(y.UpdatedAt))
	b = appendString(b, y.Content)
	b = appendString(b, string(y.Status))
	if y.Priority != nil {
		b = appendString(b, string(*y.Priority))
	}
	if y.DueAt != nil {
		b = binary.AppendVarint(b, ms(*y.DueAt))
	}
	if y.Tags != nil {
		b = binary.AppendUvarint(b, uint64(len(y.Tags)))
		for _, t := range y.Tags {
			b = appendString(b, t)
		}
	}
	if y.Title != nil {
		b = appendString(b, *y.Title)
	}
	b = appendString(b, y.Body)
	if y.StartsAt != nil {
		b = binary.AppendVarint(b, ms(*y.StartsAt))
	}
	if y.EndsAt != nil {
		b = binary.AppendVarint(b, ms(*y.EndsAt))
	}
	if y.Location != nil {
		b = appendString(b, *y.Location)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// yapReader decodes encodeYap's output; the first error sticks. s holds
// the same bytes as b, converted once, so every decoded string is a slice
// of one allocation instead of an allocation each.
type yapReader struct {
	b   []byte
	s   string
	err error
}

func (r *yapReader) skip(n int) {
	r.b, r.s = r.b[n:], r.s[n:]
}

var errCorrupt = errors.New("corrupt yap data")

func (r *yapReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.skip(n)
	return v
}

func (r *yapReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.skip(n)
	return v
}

func (r *yapReader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errCorrupt
		return ""
	}
	s := r.s[:n]
	r.skip(int(n))
	return s
}

func (r *yapReader) time() *time.Time {
	t := fromMs(r.varint())
	return &t
}

func decodeYap(listRef, id string, created int64, deleted sql.NullInt64, data []byte) (*yaps.Yap, error) {
	if len(data) == 0 || data[0] != yapFormat {
		return nil, fmt.Errorf("bunstore: yap %s/%s: unknown data format", listRef, id)
	}
	r := yapReader{b: data[1:], s: string(data[1:])}
	flags := r.uvarint()
	y := &yaps.Yap{ID: id, ListRef: listRef, CreatedAt: fromMs(created), DeletedAt: fromNullMs(deleted)}
	y.Kind = yaps.Kind(r.str())
	y.UpdatedAt = fromMs(r.varint())
	y.Content = r.str()
	y.Status = yaps.TaskStatus(r.str())
	if flags&hasPriority != 0 {
		p := yaps.Priority(r.str())
		y.Priority = &p
	}
	if flags&hasDueAt != 0 {
		y.DueAt = r.time()
	}
	if flags&hasTags != 0 {
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.err = errCorrupt
		} else {
			y.Tags = make([]string, n)
			for i := range y.Tags {
				y.Tags[i] = r.str()
			}
		}
	}
	if flags&hasTitle != 0 {
		t := r.str()
		y.Title = &t
	}
	y.Body = r.str()
	if flags&hasStartsAt != 0 {
		y.StartsAt = r.time()
	}
	if flags&hasEndsAt != 0 {
		y.EndsAt = r.time()
	}
	if flags&hasLocation != 0 {
		l := r.str()
		y.Location = &l
	}
	if r.err != nil {
		return nil, fmt.Errorf("bunstore: yap %s/%s: %w", listRef, id, r.err)
	}
	return y, nil
}

func joinScopes(s []yaps.Scope) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return string(s[0])
	}
	var b strings.Builder
	for i, sc := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(sc))
	}
	return b.String()
}

func splitScopes(s string) []yaps.Scope {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	out := make([]yaps.Scope, len(parts))
	for i, p := range parts {
		out[i] = yaps.Scope(p)
	}
	return out
}

type scanner interface{ Scan(dest ...any) error }

// scanList reads the listCols columns, plus extra destinations after them.
func scanList(r scanner, extra ...any) (*yaps.List, error) {
	var (
		l                  yaps.List
		created, updated   int64
		archived, rolledUp sql.NullInt64
		account            sql.NullString
	)
	dest := append([]any{&l.Ref, &l.Title, &l.Kind, &created, &updated, &archived, &rolledUp, &account, &l.DocVersion}, extra...)
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	l.CreatedAt, l.UpdatedAt = fromMs(created), fromMs(updated)
	l.ArchivedAt, l.RolledUpAt = fromNullMs(archived), fromNullMs(rolledUp)
	l.AccountID = account.String
	return &l, nil
}

func scanPermission(r scanner) (*yaps.Permission, error) {
	var (
		p       yaps.Permission
		scopes  string
		created int64
		revoked sql.NullInt64
	)
	if err := r.Scan(&p.ID, &p.ListRef, &p.Role, &scopes, &p.Label, &created, &revoked, &p.CodeHash); err != nil {
		return nil, err
	}
	p.Scopes = splitScopes(scopes)
	p.CreatedAt = fromMs(created)
	p.RevokedAt = fromNullMs(revoked)
	return &p, nil
}

func permArgs(p *yaps.Permission, listRef string) []any {
	return []any{p.ID, listRef, string(p.Role), joinScopes(p.Scopes), p.Label, ms(p.CreatedAt), msPtr(p.RevokedAt), p.CodeHash}
}

func listArgs(l *yaps.List) []any {
	return []any{l.Ref, l.Title, string(l.Kind), ms(l.CreatedAt), ms(l.UpdatedAt),
		msPtr(l.ArchivedAt), msPtr(l.RolledUpAt), nullString(l.AccountID), l.DocVersion}
}

// saveListArgs are the arguments of saveListSQL: l's values, docVersion for
// its DocVersion.
func saveListArgs(l *yaps.List, docVersion int64) []any {
	args := listArgs(l)
	args[8] = docVersion
	return append(args[:3:3], args[4:]...) // created_at never changes
}

// yapArgs are the arguments of the yap upserts.
func yapArgs(listRef string, y *yaps.Yap) []any {
	return []any{listRef, y.ID, ms(y.CreatedAt), msPtr(y.DeletedAt), encodeYap(y)}
}

// auditArgs are the arguments of the audit inserts.
func auditArgs(listRef string, e *yaps.AuditEntry) []any {
	return []any{listRef, ms(e.At), e.PermissionID, string(e.Role), e.Action, e.YapID, e.Detail}
}
