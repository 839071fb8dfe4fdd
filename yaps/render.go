package yaps

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// ListJSON is the JSON shape of a list (RULINGS R2: both variants' members).
type ListJSON struct {
	Ref        string  `json:"ref"`
	Title      string  `json:"title"`
	Name       string  `json:"name"`
	Kind       Kind    `json:"kind"`
	CreatedAt  string  `json:"createdAt"`
	UpdatedAt  string  `json:"updatedAt"`
	RolledUpAt *string `json:"rolledUpAt"`
	ArchivedAt *string `json:"archivedAt"`
	DocVersion int64   `json:"docVersion"`
}

// NewListJSON converts l to its JSON shape.
func NewListJSON(l *List) *ListJSON {
	return &ListJSON{
		Ref: l.Ref, Title: l.Title, Name: l.Title, Kind: l.Kind,
		CreatedAt: FormatTime(l.CreatedAt), UpdatedAt: FormatTime(l.UpdatedAt),
		RolledUpAt: fmtTimePtr(l.RolledUpAt), ArchivedAt: fmtTimePtr(l.ArchivedAt),
		DocVersion: l.DocVersion,
	}
}

// CreatedListJSON is the JSON shape of the answer to POST /lists.
type CreatedListJSON struct {
	Ref       string    `json:"ref"`
	OwnerCode string    `json:"ownerCode"`
	List      *ListJSON `json:"list"`
	SliceURL  string    `json:"sliceUrl"`
	APIBase   string    `json:"apiBase"`
}

// NewYapJSON converts y to its JSON shape: the common members and the
// members of its kind, absent optional values as null, tags as an array.
func NewYapJSON(y *Yap) map[string]any {
	m := map[string]any{
		"id": y.ID, "listId": y.ListRef, "kind": y.Kind,
		"createdAt": FormatTime(y.CreatedAt), "updatedAt": FormatTime(y.UpdatedAt),
		"deletedAt": fmtTimePtr(y.DeletedAt),
	}
	tags := y.Tags
	if tags == nil {
		tags = []string{}
	}
	switch y.Kind {
	case KindTask:
		m["content"] = y.Content
		m["status"] = y.Status
		m["priority"] = y.Priority
		m["dueAt"] = fmtTimePtr(y.DueAt)
		m["tags"] = tags
	case KindNote:
		m["title"] = y.Title
		m["body"] = y.Body
		m["tags"] = tags
	case KindEvent:
		m["title"] = y.Title
		m["startsAt"] = fmtTimePtr(y.StartsAt)
		m["endsAt"] = fmtTimePtr(y.EndsAt)
		m["location"] = y.Location
	}
	return m
}

// RenderJSON is the default Config.Render: *CreatedList as CreatedListJSON,
// *Yap as NewYapJSON, anything else with encoding/json. The three known
// types are appended directly (AppendYapJSON, AppendListJSON), to the same
// bytes encoding/json would produce for their JSON shapes.
func RenderJSON(v any) ([]byte, error) {
	switch x := v.(type) {
	case *CreatedList:
		return appendCreatedListJSON(make([]byte, 0, 512), x), nil
	case *Yap:
		return AppendYapJSON(make([]byte, 0, 384), x), nil
	case *List:
		return AppendListJSON(make([]byte, 0, 256), x), nil
	}
	return json.Marshal(v)
}

// timeLayout is FormatTime's layout.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func fmtTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := FormatTime(*t)
	return &s
}

// etagHash hashes "len:part;" for each part (one buffer, one SHA-256) into
// a quoted tag of 16 base64url characters.
func etagHash(parts ...string) string {
	var stack [512]byte
	b := stack[:0]
	for _, p := range parts {
		b = strconv.AppendInt(b, int64(len(p)), 10)
		b = append(b, ':')
		b = append(b, p...)
		b = append(b, ';')
	}
	sum := sha256.Sum256(b)
	var out [18]byte
	out[0], out[17] = '"', '"'
	base64.RawURLEncoding.Encode(out[1:17], sum[:12])
	return string(out[:])
}

func timeKey(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return FormatTime(*t)
}

func strKey(s *string) string {
	if s == nil {
		return "-"
	}
	return "+" + *s
}

// ListETag is the strong entity tag of a list: a hash of the members a
// PATCH of the list can change or that GET shows besides docVersion (ref,
// title, kind, archivedAt, rolledUpAt). Yap edits do not change it, so a
// concurrent yap edit never makes a list PATCH fail its If-Match.
func ListETag(l *List) string {
	return etagHash("list", l.Ref, l.Title, string(l.Kind), timeKey(l.ArchivedAt), timeKey(l.RolledUpAt), l.AccountID)
}

// YapETag is the strong entity tag of a yap: a hash of every member, so any
// change (HTTP or sync) changes it.
func YapETag(y *Yap) string {
	pr := "-"
	if y.Priority != nil {
		pr = "+" + string(*y.Priority)
	}
	return etagHash("yap", y.ListRef, y.ID, string(y.Kind), FormatTime(y.CreatedAt), FormatTime(y.UpdatedAt),
		timeKey(y.DeletedAt), y.Content, string(y.Status), pr, timeKey(y.DueAt), strings.Join(y.Tags, "\x00"),
		strconv.Itoa(len(y.Tags)), strKey(y.Title), y.Body, timeKey(y.StartsAt), timeKey(y.EndsAt), strKey(y.Location))
}

// snapshotETag identifies the snapshot of (ref, docVersion), and the state
// vector it was diffed against.
func snapshotETag(ref string, docVersion int64, sv []byte) string {
	return etagHash("snapshot", ref, strconv.FormatInt(docVersion, 10), base64.RawURLEncoding.EncodeToString(sv))
}

// etagMatches implements If-Match: "*" or any listed tag equal to etag
// (a W/ prefix is ignored, so weak and strong forms of one tag match).
func etagMatches(ifMatch, etag string) bool {
	for _, t := range strings.Split(ifMatch, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == strings.TrimPrefix(etag, "W/") {
			return true
		}
	}
	return false
}

func checkIfMatch(ifMatch, etag string) error {
	if ifMatch != "" && !etagMatches(ifMatch, etag) {
		return Errorf(EPRECONDITION, "the resource changed since it was read (If-Match does not match)")
	}
	return nil
}
