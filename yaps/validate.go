package yaps

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Length limits (RULINGS R6). Lengths are counted in Unicode code points
// (what utf8.RuneCountInString returns), not bytes and not UTF-16 units, so
// "é" and "😀" each count 1.
const (
	MaxContentLen   = 1000   // task content
	MaxTitleLen     = 1000   // note and event titles
	MaxBodyLen      = 100000 // note body
	MaxLocationLen  = 1000   // event location
	MaxTags         = 50     // tags per yap
	MaxTagLen       = 100    // characters per tag
	MaxListTitleLen = 200    // list title
	MaxLabelLen     = 200    // permission label
)

// Character rules. Every string must be valid UTF-8 (a lone UTF-16
// surrogate from a sync client is invalid). One-line fields (task content,
// titles, location, tags, list title, permission label) reject every
// control character of Unicode (category Cc: C0 U+0000–U+001F, including CR
// and LF, DEL U+007F and C1 U+0080–U+009F, whose NEL is a line break) except
// TAB. The note body is multi-line: it rejects the same characters except LF
// and TAB (so CR, and with it CRLF, is rejected: clients send LF).

func checkText(field, s string, max int, multiLine bool) error {
	// A prefix of printable ASCII is valid UTF-8 on its own.
	i := 0
	for i+8 <= len(s) && printableASCII8(s[i:i+8]) {
		i += 8
	}
	if !utf8.ValidString(s[i:]) {
		return Errorf(EINVALID, "%s is not valid UTF-8 text", field)
	}
	// Byte by byte: in valid UTF-8 the C0 controls and DEL are single
	// bytes, and bytes below 0x80 never occur inside a longer sequence; a
	// C1 control is 0xC2 followed by 0x80–0x9F. This runs on every
	// keystroke of a synced text, over the whole text, so eight bytes that
	// are all printable ASCII (the usual case) are passed over at once.
	for ; i < len(s); i++ {
		if i&7 == 0 && i+8 <= len(s) && printableASCII8(s[i:i+8]) {
			i += 7
			continue
		}
		if s[i] == 0xc2 && i+1 < len(s) && s[i+1] < 0xa0 {
			return Errorf(EINVALID, "%s contains a control character", field)
		}
		if r := s[i]; r < 0x20 || r == 0x7f {
			switch {
			case r == '\t':
			case r == '\n' && multiLine:
			case r == '\r' && multiLine:
				return Errorf(EINVALID, "%s must not contain CR; line breaks are LF", field)
			case r == '\n' || r == '\r':
				return Errorf(EINVALID, "%s must be a single line", field)
			default:
				return Errorf(EINVALID, "%s contains a control character", field)
			}
		}
	}
	if len(s) > max && utf8.RuneCountInString(s) > max {
		return Errorf(EINVALID, "%s is longer than %d characters", field, max)
	}
	return nil
}

// printableASCII8 reports whether the 8 bytes of b are all printable ASCII
// (0x20–0x7E). Each test below sets a byte's high bit where that byte is
// outside the range: at or above 0x80; below 0x20 (x-0x20 borrows into the
// high bit of a byte below 0x20, and ^x keeps only bytes that had it
// clear); equal to 0x7F (the same test for zero, on x^0x7F). A borrow can
// only reach a higher byte from a byte that is itself flagged, so a
// false result is never wrong about a word of printable bytes.
func printableASCII8(b string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	del := x ^ (0x7f * ones)
	return (x|(x-0x20*ones)&^x|(del-ones)&^del)&highs == 0
}

func checkTags(tags []string) error {
	if len(tags) > MaxTags {
		return Errorf(EINVALID, "at most %d tags are allowed", MaxTags)
	}
	for _, t := range tags {
		if t == "" {
			return Errorf(EINVALID, "tags must not be empty")
		}
		if err := checkText("tag", t, MaxTagLen, false); err != nil {
			return err
		}
	}
	return nil
}

// CheckListTitle validates a list title.
func CheckListTitle(s string) error { return checkText("title", s, MaxListTitleLen, false) }

// CheckLabel validates a permission label.
func CheckLabel(s string) error { return checkText("label", s, MaxLabelLen, false) }

// ValidateYap checks a complete yap: kind, the kind's required fields,
// enums, lengths and character rules. It is applied to every yap before it
// is projected, whether it came from HTTP or from a sync client.
func ValidateYap(y *Yap) error {
	if !ValidYapID(y.ID) {
		return Errorf(EINVALID, "id must be 1 to 64 characters of A-Z a-z 0-9 _ -")
	}
	if y.CreatedAt.IsZero() || y.UpdatedAt.IsZero() {
		return Errorf(EINVALID, "createdAt and updatedAt are required")
	}
	if err := checkTags(y.Tags); err != nil {
		return err
	}
	switch y.Kind {
	case KindTask:
		if err := checkText("content", y.Content, MaxContentLen, false); err != nil {
			return err
		}
		if !y.Status.Valid() {
			return Errorf(EINVALID, "status must be one of open, in_progress, done, cancelled")
		}
		if y.Priority != nil && !y.Priority.Valid() {
			return Errorf(EINVALID, "priority must be one of low, medium, high, urgent")
		}
		if y.Title != nil || y.Body != "" || y.StartsAt != nil || y.EndsAt != nil || y.Location != nil {
			return Errorf(EINVALID, "wrong field for the kind task")
		}
	case KindNote:
		if y.Title != nil {
			if err := checkText("title", *y.Title, MaxTitleLen, false); err != nil {
				return err
			}
		}
		if err := checkText("body", y.Body, MaxBodyLen, true); err != nil {
			return err
		}
		if y.Content != "" || y.Status != "" || y.Priority != nil || y.DueAt != nil ||
			y.StartsAt != nil || y.EndsAt != nil || y.Location != nil {
			return Errorf(EINVALID, "wrong field for the kind note")
		}
	case KindEvent:
		if y.Title == nil {
			return Errorf(EINVALID, "an event needs a title")
		}
		if err := checkText("title", *y.Title, MaxTitleLen, false); err != nil {
			return err
		}
		if y.StartsAt == nil {
			return Errorf(EINVALID, "an event needs startsAt")
		}
		if y.EndsAt != nil && y.EndsAt.Before(*y.StartsAt) {
			return Errorf(EINVALID, "endsAt must not be before startsAt")
		}
		if y.Location != nil {
			if err := checkText("location", *y.Location, MaxLocationLen, false); err != nil {
				return err
			}
		}
		if y.Content != "" || y.Status != "" || y.Priority != nil || y.DueAt != nil || y.Body != "" || len(y.Tags) > 0 {
			return Errorf(EINVALID, "wrong field for the kind event")
		}
	default:
		return Errorf(EINVALID, "kind must be one of task, note, event")
	}
	return nil
}

// kindFields says which members of YapFields belong to which kind, in the
// order of fieldsPresent (TestWrongFieldNamed). A table, not a literal
// built per call: this runs on every yap write.
var kindFields = [...]struct {
	name  string
	kinds []Kind
}{
	{"content", []Kind{KindTask}},
	{"status", []Kind{KindTask}},
	{"priority", []Kind{KindTask}},
	{"dueAt", []Kind{KindTask}},
	{"tags", []Kind{KindTask, KindNote}},
	{"title", []Kind{KindNote, KindEvent}},
	{"body", []Kind{KindNote}},
	{"startsAt", []Kind{KindEvent}},
	{"endsAt", []Kind{KindEvent}},
	{"location", []Kind{KindEvent}},
}

// fieldsPresent reports which fields of kindFields f sets, in its order.
// Read directly, not through a func per field: an indirect call would
// make every caller's YapFields escape to the heap.
func fieldsPresent(f *YapFields) [len(kindFields)]bool {
	return [...]bool{f.Content.Present, f.Status.Present, f.Priority.Present, f.DueAt.Present, f.Tags.Present,
		f.Title.Present, f.Body.Present, f.StartsAt.Present, f.EndsAt.Present, f.Location.Present}
}

// wrongFields returns the first field set in f that kind does not have.
func wrongFields(kind Kind, f *YapFields) string {
	present := fieldsPresent(f)
	for i, x := range kindFields {
		if present[i] && !slices.Contains(x.kinds, kind) {
			return x.name
		}
	}
	return ""
}

// applyFields checks client fields against kind and merges them into y
// (create: y is a fresh yap of the kind; patch: y is a copy of the current
// yap). It does not validate the result; call ValidateYap.
func applyFields(y *Yap, f *YapFields, create bool) error {
	if f.Kind.Present && (f.Kind.Null || f.Kind.Value != y.Kind) {
		if create {
			return Errorf(EINVALID, "kind does not match")
		}
		return Errorf(EINVALID, "a yap's kind cannot change")
	}
	if name := wrongFields(y.Kind, f); name != "" {
		return Errorf(EINVALID, "wrong field for the kind %s: %s", y.Kind, name)
	}
	required := func(name string, present, null bool) error {
		if null {
			return Errorf(EINVALID, "%s cannot be null", name)
		}
		if create && !present {
			return Errorf(EINVALID, "%s is required for %s %s", name, article(string(y.Kind)), y.Kind)
		}
		return nil
	}
	switch y.Kind {
	case KindTask:
		if err := required("content", f.Content.Present, f.Content.Null); err != nil {
			return err
		}
		if err := required("status", f.Status.Present, f.Status.Null); err != nil {
			return err
		}
		if f.Status.Present && !f.Status.Value.Valid() {
			return Errorf(EINVALID, "status must be one of open, in_progress, done, cancelled")
		}
		if f.Priority.Present && !f.Priority.Null && !f.Priority.Value.Valid() {
			return Errorf(EINVALID, "priority must be one of low, medium, high, urgent")
		}
	case KindNote:
		if err := required("body", f.Body.Present, f.Body.Null); err != nil {
			return err
		}
	case KindEvent:
		if err := required("title", f.Title.Present, f.Title.Null); err != nil {
			return err
		}
		if err := required("startsAt", f.StartsAt.Present, f.StartsAt.Null); err != nil {
			return err
		}
	}
	if f.DeletedAt.Present && !f.DeletedAt.Null {
		return Errorf(EINVALID, "deletedAt can only be set to null (restore); DELETE the yap to delete it")
	}
	if f.Content.Present {
		y.Content = f.Content.Value
	}
	if f.Status.Present {
		y.Status = f.Status.Value
	}
	if f.Priority.Present {
		y.Priority = ptrOrNil(f.Priority)
	}
	if f.DueAt.Present {
		y.DueAt = timePtrOrNil(f.DueAt)
	}
	if f.Tags.Present {
		y.Tags = nil
		if !f.Tags.Null && len(f.Tags.Value) > 0 {
			y.Tags = append([]string(nil), f.Tags.Value...)
		}
	}
	if f.Title.Present {
		y.Title = ptrOrNil(f.Title)
	}
	if f.Body.Present {
		y.Body = f.Body.Value
	}
	if f.StartsAt.Present {
		y.StartsAt = timePtrOrNil(f.StartsAt)
	}
	if f.EndsAt.Present {
		y.EndsAt = timePtrOrNil(f.EndsAt)
	}
	if f.Location.Present {
		y.Location = ptrOrNil(f.Location)
	}
	return nil
}

func ptrOrNil[T any](f Field[T]) *T {
	if f.Null {
		return nil
	}
	v := f.Value
	return &v
}

func timePtrOrNil(f Field[time.Time]) *time.Time {
	if f.Null {
		return nil
	}
	t := Truncate(f.Value)
	return &t
}

// article is the indefinite article before word in a message.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
