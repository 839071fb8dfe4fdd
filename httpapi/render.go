package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// The JSON shapes of the API. They double as the OpenAPI schemas.

// List is a list (RULINGS R2: both variants' members).
type List struct {
	Ref        string  `json:"ref" doc:"Opaque list reference, used in paths"`
	Title      string  `json:"title" doc:"Display title"`
	Name       string  `json:"name" doc:"Same as title (the other interface variant's name for it)"`
	Kind       string  `json:"kind" enum:"task,note,event" doc:"List kind"`
	CreatedAt  string  `json:"createdAt" format:"date-time"`
	UpdatedAt  string  `json:"updatedAt" format:"date-time"`
	RolledUpAt *string `json:"rolledUpAt" format:"date-time" nullable:"true" doc:"Set when the list was rolled up into an account"`
	ArchivedAt *string `json:"archivedAt" format:"date-time" nullable:"true" doc:"Set while the list is archived"`
	DocVersion int64   `json:"docVersion" doc:"Number of document updates applied"`
}

func timePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := yaps.FormatTime(*t)
	return &s
}

func renderList(l *yaps.List) List {
	return List{
		Ref:        l.Ref,
		Title:      l.Title,
		Name:       l.Title,
		Kind:       string(l.Kind),
		CreatedAt:  yaps.FormatTime(l.CreatedAt),
		UpdatedAt:  yaps.FormatTime(l.UpdatedAt),
		RolledUpAt: timePtr(l.RolledUpAt),
		ArchivedAt: timePtr(l.ArchivedAt),
		DocVersion: l.DocVersion,
	}
}

// YapCommon are the members every yap carries. deletedAt is always present:
// null while the yap is live, the deletion time once soft-deleted.
type YapCommon struct {
	ID        string  `json:"id" doc:"Yap id"`
	ListID    string  `json:"listId" doc:"The list's ref"`
	Kind      string  `json:"kind" enum:"task,note,event"`
	CreatedAt string  `json:"createdAt" format:"date-time"`
	UpdatedAt string  `json:"updatedAt" format:"date-time"`
	DeletedAt *string `json:"deletedAt" format:"date-time" nullable:"true" doc:"Soft-delete marker; always present, null unless deleted"`
}

// TaskYap is a yap of kind task.
type TaskYap struct {
	YapCommon
	Content  string   `json:"content" doc:"One line of text"`
	Status   string   `json:"status" enum:"open,in_progress,done,cancelled"`
	Priority *string  `json:"priority" enum:"low,medium,high,urgent" nullable:"true"`
	DueAt    *string  `json:"dueAt" format:"date-time" nullable:"true"`
	Tags     []string `json:"tags"`
}

// NoteYap is a yap of kind note.
type NoteYap struct {
	YapCommon
	Title *string  `json:"title" nullable:"true"`
	Body  string   `json:"body"`
	Tags  []string `json:"tags"`
}

// EventYap is a yap of kind event.
type EventYap struct {
	YapCommon
	Title    string  `json:"title"`
	StartsAt string  `json:"startsAt" format:"date-time"`
	EndsAt   *string `json:"endsAt" format:"date-time" nullable:"true"`
	Location *string `json:"location" nullable:"true"`
}

// yapOut renders y as a JSON response: the kind's JSON shape, the common
// members plus that kind's members only (yaps.AppendYapJSON, the same
// encoder the service uses for idempotent replays, so first answers and
// replays are identical). The OpenAPI schemas are TaskYap, NoteYap and
// EventYap.
func yapOut(status int, y *yaps.Yap) *rawOut {
	return &rawOut{Status: status, ContentType: "application/json", Body: yaps.AppendYapJSON(make([]byte, 0, 384), y)}
}

// pooledYapOut is yapOut into a buffer taken from pageBufs, which the
// middleware gives back once the answer is written (reqState.buf).
func pooledYapOut(st *reqState, status int, y *yaps.Yap) *rawOut {
	st.buf = pageBufs.Get().(*[]byte)
	b := yaps.AppendYapJSON((*st.buf)[:0], y)
	*st.buf = b
	return &rawOut{Status: status, ContentType: "application/json", Body: b}
}

// listOut renders l as a List response.
func listOut(status int, l *yaps.List) *rawOut {
	return &rawOut{Status: status, ContentType: "application/json", Body: yaps.AppendListJSON(make([]byte, 0, 256), l)}
}

// listWithRoleOut renders a ListWithRole response.
func listWithRoleOut(l *yaps.List, role yaps.Role) *rawOut {
	b := make([]byte, 0, 320)
	b = append(b, `{"list":`...)
	b = yaps.AppendListJSON(b, l)
	b = append(b, `,"role":`...)
	b = yaps.AppendJSONString(b, string(role))
	b = append(b, '}')
	return &rawOut{Status: http.StatusOK, ContentType: "application/json", Body: b}
}

// pageBufs recycles the buffers of page answers and created yaps: the
// middleware returns a request's buffer once the answer is written
// (reqState.buf).
var pageBufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// maxPooledBuf is the largest buffer kept for reuse.
const maxPooledBuf = 1 << 20

// releaseBuf returns the request's pooled buffer, if any.
func (st *reqState) releaseBuf() {
	if st.buf != nil && cap(*st.buf) <= maxPooledBuf {
		*st.buf = (*st.buf)[:0]
		pageBufs.Put(st.buf)
	}
	st.buf = nil
}

// yapPageOut renders a YapPage response: the yaps appended one after the
// other into one buffer, taken from pageBufs and given back by the
// middleware after the answer is written.
func yapPageOut(st *reqState, page *yaps.YapPage) *rawOut {
	st.buf = pageBufs.Get().(*[]byte)
	b := (*st.buf)[:0]
	b = append(b, `{"yaps":[`...)
	for i, y := range page.Yaps {
		if i > 0 {
			b = append(b, ',')
		}
		b = yaps.AppendYapJSON(b, y)
	}
	b = append(b, `],"nextCursor":`...)
	if page.NextCursor == "" {
		b = append(b, "null"...)
	} else {
		b = yaps.AppendJSONString(b, page.NextCursor)
	}
	b = append(b, '}')
	*st.buf = b
	// A known length spares net/http the chunked encoding of a large body.
	st.header().Set("Content-Length", strconv.Itoa(len(b)))
	return &rawOut{Status: http.StatusOK, ContentType: "application/json", Body: b}
}

// Render renders the bodies an Idempotency-Key replay repeats: a
// *yaps.CreatedList or a *yaps.Yap. It is byte-for-byte what the first
// answer carries. It equals yaps.RenderJSON, the service's default
// Config.Render; a service configured with another Render breaks replays.
func Render(v any) ([]byte, error) { return yaps.RenderJSON(v) }

// Permission is an issued permission (never its code).
type Permission struct {
	ID        string   `json:"id"`
	Role      string   `json:"role" enum:"owner,editor,viewer,agent"`
	Label     string   `json:"label"`
	Scopes    []string `json:"scopes" doc:"Agent scopes (tasks:write, yaps:write); empty for other roles"`
	CreatedAt string   `json:"createdAt" format:"date-time"`
}

func renderPermission(p *yaps.Permission) Permission {
	sc := make([]string, 0, len(p.Scopes))
	for _, s := range p.Scopes {
		sc = append(sc, string(s))
	}
	return Permission{ID: p.ID, Role: string(p.Role), Label: p.Label, Scopes: sc, CreatedAt: yaps.FormatTime(p.CreatedAt)}
}

// AuditEntry is one audit log entry.
type AuditEntry struct {
	Seq          int64   `json:"seq"`
	At           string  `json:"at" format:"date-time"`
	PermissionID string  `json:"permissionId"`
	Role         string  `json:"role" enum:"owner,editor,viewer,agent"`
	Action       string  `json:"action" example:"yap.create"`
	YapID        *string `json:"yapId" nullable:"true"`
	Detail       string  `json:"detail"`
}

func renderAudit(e *yaps.AuditEntry) AuditEntry {
	a := AuditEntry{Seq: e.Seq, At: yaps.FormatTime(e.At), PermissionID: e.PermissionID, Role: string(e.Role), Action: e.Action, Detail: e.Detail}
	if e.YapID != "" {
		id := e.YapID
		a.YapID = &id
	}
	return a
}

// Account is a built-in account.
type Account struct {
	ID        string `json:"id"`
	CreatedAt string `json:"createdAt" format:"date-time"`
}

// Response bodies.

type CreatedList struct {
	Ref       string `json:"ref"`
	OwnerCode string `json:"ownerCode" doc:"The owner code; shown only this once"`
	List      List   `json:"list"`
	SliceURL  string `json:"sliceUrl" doc:"Shareable link carrying the owner code in its k parameter"`
	APIBase   string `json:"apiBase" doc:"Address of the list's API"`
}

type ListWithRole struct {
	List List   `json:"list"`
	Role string `json:"role" enum:"owner,editor,viewer,agent" doc:"The caller's role"`
}

type AccountLists struct {
	Lists      []List  `json:"lists" doc:"The account's lists, oldest first (createdAt, then ref)"`
	NextCursor *string `json:"nextCursor" nullable:"true" doc:"Cursor of the next page; null on the last page"`
}

type YapPage struct {
	Yaps       []any   `json:"yaps" doc:"Yaps in chronological order (createdAt, then id)"`
	NextCursor *string `json:"nextCursor" nullable:"true" doc:"Cursor of the next page; null on the last page"`
}

type Permissions struct {
	Permissions []Permission `json:"permissions"`
}

type IssuedPermission struct {
	Permission Permission `json:"permission"`
	Code       string     `json:"code" doc:"The permission code; shown only this once"`
}

type RotatedOwner struct {
	OwnerCode string `json:"ownerCode" doc:"The new owner code; the old one no longer works"`
}

type RollupResult struct {
	Merged bool `json:"merged" doc:"true when the list was moved into the account now, false when it already was there"`
}

type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor *string      `json:"nextCursor" nullable:"true"`
}

type CreatedAccount struct {
	Account    Account `json:"account"`
	AccountKey string  `json:"accountKey" doc:"The account key (yak_...); shown only this once"`
}

func cursorPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// jsonOut renders v as a JSON response with the given status.
func jsonOut(status int, v any) *rawOut {
	b, err := json.Marshal(v)
	if err != nil {
		panic("httpapi: cannot render response: " + err.Error()) // recovered into a 500
	}
	return &rawOut{Status: status, ContentType: "application/json", Body: b}
}
