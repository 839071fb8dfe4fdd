package yaps

import (
	"slices"
	"time"
	"unicode/utf16"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// The list document (RULINGS R9):
//
//	root map "list": title (string), kind (string), archivedAt (string, absent when null)
//	root map "yaps": yap id -> Y.Map{id, kind, createdAt, updatedAt, deletedAt?, fields...}
//
// Free-text fields (task content, note title and body, event title) are
// Y.Text, tags a Y.Array of strings, the other fields plain strings;
// timestamps are FormatTime strings. Optional members are absent when null.
// Reading is lenient where it costs nothing: a plain string where Y.Text is
// expected, a null value for an absent member. Keys the schema does not know
// are kept and ignored; root types outside the schema are not touched,
// except that what an agent inserts there is deleted again (ApplyUpdate).
const (
	rootList = "list"
	rootYaps = "yaps"
)

// listFields is the list's projection from the root map "list".
type listFields struct {
	Title      string
	Kind       Kind
	ArchivedAt *time.Time
}

func readString(m *yjs.Map, key string) (string, bool, bool) {
	v, ok := m.Get(key)
	if !ok || v == nil {
		return "", false, true
	}
	switch x := v.(type) {
	case string:
		return x, true, true
	case *yjs.Text:
		return x.String(), true, true
	}
	return "", true, false
}

func readTime(m *yjs.Map, key string) (*time.Time, bool) {
	v, ok := m.Get(key)
	if !ok || v == nil {
		return nil, true
	}
	s, isStr := v.(string)
	if !isStr {
		return nil, false
	}
	t, err := parseRFC3339(s)
	if err != nil || !inTimeRange(t) {
		return nil, false
	}
	t = Truncate(t)
	return &t, true
}

// readList projects the root map "list". Invalid members make ok false.
func readList(d *yjs.Doc) (lf listFields, err error) {
	m := d.GetMap(rootList)
	title, _, ok := readString(m, "title")
	if !ok {
		return lf, Errorf(EINVALID, "list title must be a string")
	}
	lf.Title = title
	if err := CheckListTitle(title); err != nil {
		return lf, err
	}
	k, present, ok := readString(m, "kind")
	if !ok {
		return lf, Errorf(EINVALID, "list kind must be a string")
	}
	if !present {
		k = string(KindTask)
	}
	kind, err := ParseKind(k, false)
	if err != nil {
		return lf, err
	}
	lf.Kind = kind
	at, ok := readTime(m, "archivedAt")
	if !ok {
		return lf, Errorf(EINVALID, "archivedAt must be a date-time")
	}
	lf.ArchivedAt = at
	return lf, nil
}

// readYap projects one entry of the root map "yaps". The result is not
// validated beyond member types; call ValidateYap.
func readYap(ref, key string, v any) (*Yap, error) {
	m, isMap := v.(*yjs.Map)
	if !isMap {
		return nil, Errorf(EINVALID, "a yap must be a map")
	}
	y := &Yap{ID: key, ListRef: ref}
	bad := func(f string) error { return Errorf(EINVALID, "yap member %s has the wrong type", f) }
	id, present, ok := readString(m, "id")
	if !ok || (present && id != key) {
		return nil, Errorf(EINVALID, "yap id must equal its key")
	}
	k, _, ok := readString(m, "kind")
	if !ok {
		return nil, bad("kind")
	}
	y.Kind = Kind(k)
	for _, f := range []struct {
		name string
		dst  **time.Time
	}{{"deletedAt", &y.DeletedAt}, {"dueAt", &y.DueAt}, {"startsAt", &y.StartsAt}, {"endsAt", &y.EndsAt}} {
		t, ok := readTime(m, f.name)
		if !ok {
			return nil, bad(f.name)
		}
		*f.dst = t
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"createdAt", &y.CreatedAt}, {"updatedAt", &y.UpdatedAt}} {
		t, ok := readTime(m, f.name)
		if !ok {
			return nil, bad(f.name)
		}
		if t != nil {
			*f.dst = *t
		}
	}
	str := func(name string, dst *string) error {
		s, _, ok := readString(m, name)
		if !ok {
			return bad(name)
		}
		*dst = s
		return nil
	}
	optStr := func(name string, dst **string) error {
		s, present, ok := readString(m, name)
		if !ok {
			return bad(name)
		}
		if present {
			*dst = &s
		}
		return nil
	}
	var status, prio string
	var prioP *string
	if err := str("status", &status); err != nil {
		return nil, err
	}
	y.Status = TaskStatus(status)
	if err := optStr("priority", &prioP); err != nil {
		return nil, err
	}
	if prioP != nil {
		prio = *prioP
		p := Priority(prio)
		y.Priority = &p
	}
	if err := optStr("location", &y.Location); err != nil {
		return nil, err
	}
	for _, k := range nestedMembers {
		if err := readNestedMember(y, m, k); err != nil {
			return nil, err
		}
	}
	return y, nil
}

// nestedMembers are the members of a yap that R9 makes shared types
// (Y.Text, Y.Array): an edit inside one changes that type, not the yap's
// map.
var nestedMembers = [...]string{"content", "title", "body", "tags"}

// readNestedMember reads member key (one of nestedMembers) of m into y.
func readNestedMember(y *Yap, m *yjs.Map, key string) error {
	bad := func() error { return Errorf(EINVALID, "yap member %s has the wrong type", key) }
	switch key {
	case "content", "body":
		s, _, ok := readString(m, key)
		if !ok {
			return bad()
		}
		if key == "content" {
			y.Content = s
		} else {
			y.Body = s
		}
	case "title":
		s, present, ok := readString(m, key)
		if !ok {
			return bad()
		}
		y.Title = nil
		if present {
			y.Title = &s
		}
	case "tags":
		y.Tags = nil
		tv, ok := m.Get("tags")
		if !ok || tv == nil {
			return nil
		}
		var items []any
		switch x := tv.(type) {
		case *yjs.Array:
			items = x.ToSlice()
		case []any:
			items = x
		default:
			return bad()
		}
		for _, it := range items {
			s, isStr := it.(string)
			if !isStr {
				return bad()
			}
			y.Tags = append(y.Tags, s)
		}
	}
	return nil
}

// rereadYap returns the yap the map m holds after an update that changed
// only the shared types in changed, given old, what readYap read from m
// before it: old with those members read again. It reports false when
// some type in changed is not one of m's nested members (the map itself,
// or a type deeper down): then only readYap can tell.
func rereadYap(old *Yap, m *yjs.Map, changed []any) (*Yap, bool, error) {
	var keys [len(nestedMembers)]bool
	for _, t := range changed {
		found := false
		for i, k := range nestedMembers {
			if v, ok := m.Get(k); ok && v == t {
				keys[i], found = true, true
				break
			}
		}
		if !found {
			return nil, false, nil
		}
	}
	y := copyYap(old)
	for i, k := range nestedMembers {
		if keys[i] {
			if err := readNestedMember(y, m, k); err != nil {
				return nil, true, err
			}
		}
	}
	return y, true, nil
}

// projectDoc reads every yap of the document. valid holds the yaps that
// pass ValidateYap; invalid the ids of entries that do not.
func projectDoc(ref string, d *yjs.Doc) (valid map[string]*Yap, invalid map[string]error) {
	valid, invalid = map[string]*Yap{}, map[string]error{}
	ym := d.GetMap(rootYaps)
	for _, id := range ym.Keys() {
		v, _ := ym.Get(id)
		y, err := readYap(ref, id, v)
		if err == nil {
			err = ValidateYap(y)
		}
		if err != nil {
			invalid[id] = err
			continue
		}
		valid[id] = y
	}
	return valid, invalid
}

// ---- writing ----

func newYapMap(y *Yap) *yjs.Map {
	m := yjs.NewMap()
	writeYap(m, y)
	return m
}

// setNewYap sets ym's member y.ID to a new map holding y, inside the
// caller's document transaction. The map is inserted empty and filled
// after: the same structs with the same clocks, hence the same update, as
// ym.Set(y.ID, newYapMap(y)), without staging each member in the prelim
// map first (its map, key list and boxed values).
func setNewYap(ym *yjs.Map, y *Yap) {
	m := yjs.NewMap()
	ym.Set(y.ID, m)
	writeYap(m, y)
}

// schemaKeys are the yap members of every kind; writeYap removes those
// that do not belong to the yap's kind. Other keys are left alone.
var schemaKeys = map[Kind][]string{
	KindTask:  {"content", "status", "priority", "dueAt", "tags"},
	KindNote:  {"title", "body", "tags"},
	KindEvent: {"title", "startsAt", "endsAt", "location"},
}

// writeYap makes m hold y, changing only the members that differ from what
// m holds. Text members are changed with a minimal edit; members of other
// kinds are removed.
func writeYap(m *yjs.Map, y *Yap) {
	setTime := func(key string, n *time.Time) {
		if v, present := m.Get(key); present && v != nil {
			if cur, ok := readTime(m, key); ok && sameTime(cur, n) {
				return
			}
		} else if n == nil {
			if present {
				m.Delete(key)
			}
			return
		}
		if n == nil {
			m.Delete(key)
		} else {
			m.Set(key, FormatTime(*n))
		}
	}
	setPlain := func(key string, n *string) {
		v, present := m.Get(key)
		if n == nil {
			if present {
				m.Delete(key)
			}
			return
		}
		if cur, isStr := v.(string); !present || !isStr || cur != *n {
			m.Set(key, *n)
		}
	}
	setText := func(key string, n *string) {
		v, present := m.Get(key)
		if n == nil {
			if present {
				m.Delete(key)
			}
			return
		}
		if t, ok := v.(*yjs.Text); ok && editText(t, *n) {
			return
		}
		// Inserted empty, then filled: the same structs and clocks as
		// m.Set(key, yjs.NewText(*n)), but when m is in a document the
		// text is then edited directly, without staging its content in
		// a prelim op (a closure) first.
		t := yjs.NewText("")
		m.Set(key, t)
		if *n != "" {
			t.Insert(0, *n, nil)
		}
	}
	strp := func(s string) *string { return &s }
	setPlain("id", strp(y.ID))
	setPlain("kind", strp(string(y.Kind)))
	ct, ut := y.CreatedAt, y.UpdatedAt
	setTime("createdAt", &ct)
	setTime("updatedAt", &ut)
	setTime("deletedAt", y.DeletedAt)
	mine := map[string]bool{}
	for _, k := range schemaKeys[y.Kind] {
		mine[k] = true
	}
	for _, keys := range schemaKeys {
		for _, k := range keys {
			if !mine[k] && m.Has(k) {
				m.Delete(k)
			}
		}
	}
	switch y.Kind {
	case KindTask:
		setText("content", strp(y.Content))
		setPlain("status", strp(string(y.Status)))
		var pr *string
		if y.Priority != nil {
			pr = strp(string(*y.Priority))
		}
		setPlain("priority", pr)
		setTime("dueAt", y.DueAt)
		writeTags(m, y.Tags)
	case KindNote:
		setText("title", y.Title)
		setText("body", strp(y.Body))
		writeTags(m, y.Tags)
	case KindEvent:
		setText("title", y.Title)
		setTime("startsAt", y.StartsAt)
		setTime("endsAt", y.EndsAt)
		setPlain("location", y.Location)
	}
}

func mustGet(m *yjs.Map, key string) any {
	v, _ := m.Get(key)
	return v
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// writeTags makes the Y.Array "tags" hold tags (absent when empty), editing
// it in place when it already is an array.
func writeTags(m *yjs.Map, tags []string) {
	v, present := m.Get("tags")
	if len(tags) == 0 {
		if present {
			m.Delete("tags")
		}
		return
	}
	if a, ok := v.(*yjs.Array); ok {
		cur := a.ToSlice()
		same := len(cur) == len(tags)
		for i := 0; same && i < len(cur); i++ {
			same = cur[i] == tags[i]
		}
		if same {
			return
		}
		if a.Len() > 0 {
			a.Delete(0, a.Len())
		}
		a.Push(anySlice(tags)...)
		return
	}
	a := yjs.NewArray()
	a.Push(anySlice(tags)...)
	m.Set("tags", a)
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// editText changes t to s with a minimal character-level edit (diffText),
// so concurrent edits of other parts of the text survive the merge. The
// edits are applied from the last to the first, so the indexes of the old
// text stay valid; the caller runs editText inside one document
// transaction, so they form one update.
//
// It reports false, changing nothing, when t holds embeds (a sync client
// may insert them): String leaves them out, but each takes an index, so
// the edits would land beside their places (a PATCH wrote other text than
// it answered, and a compensation left the yap invalid). The caller then
// replaces the text whole; the embeds, which no HTTP reader sees, go.
func editText(t *yjs.Text, s string) bool {
	cur := t.String()
	if cur == s {
		return true
	}
	if t.Len() != utf16Len(cur) {
		return false
	}
	edits := diffText(cur, s)
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		if e.Delete > 0 {
			t.Delete(e.Index, e.Delete)
		}
		if e.Insert != "" {
			t.Insert(e.Index, e.Insert, nil)
		}
	}
	return true
}

// utf16Len counts the UTF-16 code units of s, the unit of Y.Text indexes
// (an invalid byte counts one, as U+FFFD).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += max(utf16.RuneLen(r), 1)
	}
	return n
}

// writeList writes the list projection members that differ.
func writeList(d *yjs.Doc, lf listFields) {
	m := d.GetMap(rootList)
	if s, present, ok := readString(m, "title"); !ok || !present || s != lf.Title {
		m.Set("title", lf.Title)
	}
	if s, present, ok := readString(m, "kind"); !ok || !present || s != string(lf.Kind) {
		m.Set("kind", string(lf.Kind))
	}
	cur, ok := readTime(m, "archivedAt")
	if !ok || !sameTime(cur, lf.ArchivedAt) {
		if lf.ArchivedAt == nil {
			m.Delete("archivedAt")
		} else {
			m.Set("archivedAt", FormatTime(*lf.ArchivedAt))
		}
	}
}

func sameYap(a, b *Yap) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	// Member by member what YapETag hashes (times at the millisecond
	// FormatTime keeps), without hashing: this runs on every write.
	return a.ListRef == b.ListRef && a.ID == b.ID && a.Kind == b.Kind &&
		sameMs(a.CreatedAt, b.CreatedAt) && sameMs(a.UpdatedAt, b.UpdatedAt) && sameMsPtr(a.DeletedAt, b.DeletedAt) &&
		a.Content == b.Content && a.Status == b.Status && samePtr(a.Priority, b.Priority) &&
		sameMsPtr(a.DueAt, b.DueAt) && slices.Equal(a.Tags, b.Tags) && samePtr(a.Title, b.Title) && a.Body == b.Body &&
		sameMsPtr(a.StartsAt, b.StartsAt) && sameMsPtr(a.EndsAt, b.EndsAt) && samePtr(a.Location, b.Location)
}

// sameMs reports whether FormatTime(a) == FormatTime(b).
func sameMs(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

func sameMsPtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameMs(*a, *b)
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
