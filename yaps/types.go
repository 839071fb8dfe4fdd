package yaps

import (
	"errors"
	"strings"
	"time"
)

// Role is what a permission code may do on its list.
type Role string

const (
	RoleOwner  Role = "owner"
	RoleEditor Role = "editor"
	RoleAgent  Role = "agent"
	RoleViewer Role = "viewer"
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleOwner, RoleEditor, RoleAgent, RoleViewer:
		return true
	}
	return false
}

// Scope widens what an agent code may write. Scopes are fixed when the code
// is issued; a code can never issue another code, so no scope grows itself.
type Scope string

const (
	ScopeTasksWrite Scope = "tasks:write" // task yaps only; the default for agents
	ScopeYapsWrite  Scope = "yaps:write"  // yaps of every kind
)

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return s == ScopeTasksWrite || s == ScopeYapsWrite }

// Kind is the kind of a list and of a yap.
type Kind string

const (
	KindTask  Kind = "task"
	KindNote  Kind = "note"
	KindEvent Kind = "event"
)

// ParseKind accepts the canonical singular kinds and, for lists, the plural
// spellings of the other interface variant ("tasks", "notes", "events").
func ParseKind(s string, allowPlural bool) (Kind, error) {
	switch Kind(s) {
	case KindTask, KindNote, KindEvent:
		return Kind(s), nil
	}
	if allowPlural {
		switch s {
		case "tasks":
			return KindTask, nil
		case "notes":
			return KindNote, nil
		case "events":
			return KindEvent, nil
		}
	}
	return "", Errorf(EINVALID, "kind must be one of task, note, event; got %q", truncate(s, 40))
}

// TaskStatus is the state of a task yap.
type TaskStatus string

const (
	StatusOpen       TaskStatus = "open"
	StatusInProgress TaskStatus = "in_progress"
	StatusDone       TaskStatus = "done"
	StatusCancelled  TaskStatus = "cancelled"
)

// Valid reports whether s is a known status.
func (s TaskStatus) Valid() bool {
	switch s {
	case StatusOpen, StatusInProgress, StatusDone, StatusCancelled:
		return true
	}
	return false
}

// Priority of a task yap.
type Priority string

const (
	PriorityLow    Priority = "low"
	PriorityMedium Priority = "medium"
	PriorityHigh   Priority = "high"
	PriorityUrgent Priority = "urgent"
)

// Valid reports whether p is a known priority.
func (p Priority) Valid() bool {
	switch p {
	case PriorityLow, PriorityMedium, PriorityHigh, PriorityUrgent:
		return true
	}
	return false
}

// List is a collaborative list. Title, Kind and ArchivedAt are projected from
// the list document's root map "list"; the rest is service bookkeeping.
type List struct {
	Ref        string
	Title      string
	Kind       Kind
	CreatedAt  time.Time
	UpdatedAt  time.Time
	ArchivedAt *time.Time
	RolledUpAt *time.Time
	AccountID  string // "" while the list is anonymous
	DocVersion int64  // number of document updates applied (the update log's last seq)
}

// Archived reports whether the list rejects writes.
func (l *List) Archived() bool { return l.ArchivedAt != nil }

// Clone returns a copy of l that shares no pointers with it.
func (l *List) Clone() *List {
	c := *l
	if l.ArchivedAt != nil {
		a := *l.ArchivedAt
		c.ArchivedAt = &a
	}
	if l.RolledUpAt != nil {
		r := *l.RolledUpAt
		c.RolledUpAt = &r
	}
	return &c
}

// Yap is one item of a list. Which fields apply depends on Kind:
//   - task: Content, Status, Priority, DueAt, Tags
//   - note: Title (optional), Body, Tags
//   - event: Title (required), StartsAt, EndsAt, Location
type Yap struct {
	ID        string
	ListRef   string
	Kind      Kind
	CreatedAt time.Time
	UpdatedAt time.Time
	DeletedAt *time.Time

	Content  string
	Status   TaskStatus
	Priority *Priority
	DueAt    *time.Time
	Tags     []string

	Title *string
	Body  string

	StartsAt *time.Time
	EndsAt   *time.Time
	Location *string
}

// Field is one member of a JSON merge patch: absent (Present false), null
// (Present and Null), or a value.
type Field[T any] struct {
	Present bool
	Null    bool
	Value   T
}

// Set returns a present, non-null Field holding v.
func Set[T any](v T) Field[T] { return Field[T]{Present: true, Value: v} }

// Null returns a present Field that clears the member.
func Null[T any]() Field[T] { return Field[T]{Present: true, Null: true} }

// YapFields carries the members of a yap sent by a client. For POST it says
// which members were sent; for PATCH it is a merge patch (RULINGS R6): absent
// fields stay, null clears an optional field, DeletedAt null restores a
// deleted yap.
type YapFields struct {
	Kind      Field[Kind] // may only repeat the yap's kind
	Content   Field[string]
	Status    Field[TaskStatus]
	Priority  Field[Priority]
	DueAt     Field[time.Time]
	Tags      Field[[]string]
	Title     Field[string]
	Body      Field[string]
	StartsAt  Field[time.Time]
	EndsAt    Field[time.Time]
	Location  Field[string]
	DeletedAt Field[time.Time] // only null is accepted: restore
}

// ListPatch is a merge patch of a list's title, kind and archive marker.
type ListPatch struct {
	Title      Field[string]
	Kind       Field[Kind]
	ArchivedAt Field[time.Time]
}

// Permission is one issued code's grant. The code itself is never stored,
// only CodeHash (SHA-256 of the code string).
type Permission struct {
	ID        string
	ListRef   string
	Role      Role
	Scopes    []Scope // agents only
	Label     string
	CreatedAt time.Time
	RevokedAt *time.Time
	CodeHash  []byte
}

// Active reports whether the permission has not been revoked.
func (p *Permission) Active() bool { return p.RevokedAt == nil }

// Account is a user account of the built-in account resolver.
type Account struct {
	ID        string
	CreatedAt time.Time
	KeyHash   []byte // SHA-256 of the account key; nil for host-app accounts
}

// AuditEntry records one mutation made with a code.
type AuditEntry struct {
	Seq          int64 // assigned by the store, increasing per store
	ListRef      string
	At           time.Time
	PermissionID string
	Role         Role
	Action       string // e.g. "yap.create", "permission.revoke"
	YapID        string // "" when the action is not about a yap
	Detail       string // short, never a secret
}

// Actor is an authenticated caller acting on one list.
type Actor struct {
	List       *List
	Permission *Permission
	Account    *Account // optional account credential sent beside the code
	ClientIP   string
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// FormatTime renders t as RFC 3339 UTC with millisecond precision, the only
// timestamp format the service emits (RULINGS R6).
func FormatTime(t time.Time) string {
	var buf [len("2006-01-02T15:04:05.000Z")]byte
	return string(appendTime(buf[:0], t))
}

// Truncate rounds t down to the millisecond precision the service keeps.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// ParseTime parses an RFC 3339 timestamp as sent by clients.
func ParseTime(field, s string) (time.Time, error) {
	// RFC 3339 allows a lower-case t and z; Go's layout takes upper case
	// only, and nothing else in a date-time has a case.
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "tz") {
		s = strings.ToUpper(s)
	}
	t, err := parseRFC3339(s)
	if err != nil {
		return time.Time{}, Errorf(EINVALID, "%s must be an RFC 3339 date-time", field)
	}
	if !inTimeRange(t) {
		return time.Time{}, Errorf(EINVALID, "%s must lie between 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z", field)
	}
	return Truncate(t), nil
}

// parseRFC3339 parses s if it has exactly RFC 3339's date-time shape
// (upper-case T and Z): Go's parser also takes a comma before the
// fraction and offsets up to ±24:59 (minute 60 included), which no
// JavaScript client can read (new Date gives Invalid Date).
func parseRFC3339(s string) (time.Time, error) {
	bad := errors.New("not an RFC 3339 date-time")
	// 2006-01-02T15:04:05 then an optional .fraction, then Z or ±hh:mm.
	if len(s) < 20 || s[10] != 'T' {
		return time.Time{}, bad
	}
	rest := s[19:]
	if rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 {
			return time.Time{}, bad
		}
		rest = rest[i:]
	}
	switch {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
		isDigits(rest[1:3]) && isDigits(rest[4:6]) && rest[1:3] <= "23" && rest[4:6] <= "59":
	default:
		return time.Time{}, bad
	}
	return time.Parse(time.RFC3339Nano, s)
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// inTimeRange reports whether t, in UTC, has a four-digit year: a time the
// service can answer in RFC 3339 UTC (R6). 9999-12-31T23:59:59-01:00 is
// RFC 3339, but in UTC it falls in the year 10000.
func inTimeRange(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}
