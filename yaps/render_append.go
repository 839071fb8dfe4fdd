package yaps

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Append-style JSON rendering of yaps and lists. The output is byte for byte
// what encoding/json's Marshal produces for the same values (NewYapJSON's map
// with its members in sorted key order, ListJSON's members in field order,
// strings escaped as json.Marshal escapes them: HTML-safe, invalid UTF-8 as
// U+FFFD, U+2028/U+2029 escaped), without the map, reflection and sorting:
// a page of yaps renders into one buffer.

// AppendYapJSON appends the JSON of y (the shape of NewYapJSON: the common
// members and the members of its kind, absent optional values as null, tags
// as an array) to b.
func AppendYapJSON(b []byte, y *Yap) []byte {
	// Members in sorted key order, as encoding/json writes a map.
	switch y.Kind {
	case KindTask:
		b = append(b, `{"content":`...)
		b = appendJSONString(b, y.Content)
		b = appendCreatedDeleted(b, y)
		b = append(b, `,"dueAt":`...)
		b = appendJSONTimePtr(b, y.DueAt)
		b = appendIDKindList(b, y)
		b = append(b, `,"priority":`...)
		if y.Priority != nil {
			b = appendJSONString(b, string(*y.Priority))
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"status":`...)
		b = appendJSONString(b, string(y.Status))
		b = appendJSONTags(b, y.Tags)
	case KindNote:
		b = append(b, `{"body":`...)
		b = appendJSONString(b, y.Body)
		b = appendCreatedDeleted(b, y)
		b = appendIDKindList(b, y)
		b = appendJSONTags(b, y.Tags)
		b = append(b, `,"title":`...)
		b = appendJSONStringPtr(b, y.Title)
	case KindEvent:
		b = append(b, '{')
		b = appendCreatedDeleted(b, y)
		b = append(b, `,"endsAt":`...)
		b = appendJSONTimePtr(b, y.EndsAt)
		b = appendIDKindList(b, y)
		b = append(b, `,"location":`...)
		b = appendJSONStringPtr(b, y.Location)
		b = append(b, `,"startsAt":`...)
		b = appendJSONTimePtr(b, y.StartsAt)
		b = append(b, `,"title":`...)
		b = appendJSONStringPtr(b, y.Title)
	default:
		b = append(b, '{')
		b = appendCreatedDeleted(b, y)
		b = appendIDKindList(b, y)
	}
	b = append(b, `,"updatedAt":`...)
	b = AppendJSONTime(b, y.UpdatedAt)
	return append(b, '}')
}

// appendCreatedDeleted appends the createdAt and deletedAt members; after
// '{' it omits the leading comma.
func appendCreatedDeleted(b []byte, y *Yap) []byte {
	if b[len(b)-1] == '{' {
		b = append(b, `"createdAt":`...)
	} else {
		b = append(b, `,"createdAt":`...)
	}
	b = AppendJSONTime(b, y.CreatedAt)
	b = append(b, `,"deletedAt":`...)
	return appendJSONTimePtr(b, y.DeletedAt)
}

func appendIDKindList(b []byte, y *Yap) []byte {
	b = append(b, `,"id":`...)
	b = appendJSONString(b, y.ID)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(y.Kind))
	b = append(b, `,"listId":`...)
	return appendJSONString(b, y.ListRef)
}

func appendJSONTags(b []byte, tags []string) []byte {
	b = append(b, `,"tags":[`...)
	for i, t := range tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, t)
	}
	return append(b, ']')
}

// AppendListJSON appends the JSON of l (ListJSON, members in its field
// order) to b.
func AppendListJSON(b []byte, l *List) []byte {
	b = append(b, `{"ref":`...)
	b = appendJSONString(b, l.Ref)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, l.Title)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, l.Title)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(l.Kind))
	b = append(b, `,"createdAt":`...)
	b = AppendJSONTime(b, l.CreatedAt)
	b = append(b, `,"updatedAt":`...)
	b = AppendJSONTime(b, l.UpdatedAt)
	b = append(b, `,"rolledUpAt":`...)
	b = appendJSONTimePtr(b, l.RolledUpAt)
	b = append(b, `,"archivedAt":`...)
	b = appendJSONTimePtr(b, l.ArchivedAt)
	b = append(b, `,"docVersion":`...)
	b = strconv.AppendInt(b, l.DocVersion, 10)
	return append(b, '}')
}

// appendCreatedListJSON appends CreatedListJSON's encoding.
func appendCreatedListJSON(b []byte, c *CreatedList) []byte {
	b = append(b, `{"ref":`...)
	b = appendJSONString(b, c.List.Ref)
	b = append(b, `,"ownerCode":`...)
	b = appendJSONString(b, c.OwnerCode)
	b = append(b, `,"list":`...)
	b = AppendListJSON(b, c.List)
	b = append(b, `,"sliceUrl":`...)
	b = appendJSONString(b, c.SliceURL)
	b = append(b, `,"apiBase":`...)
	b = appendJSONString(b, c.APIBase)
	return append(b, '}')
}

// AppendJSONString appends s as a JSON string, escaped as json.Marshal
// escapes it.
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

func appendJSONStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

// jsonSafe marks the ASCII bytes json.Marshal writes as they are (its
// htmlSafeSet: printable ASCII and DEL except '"', '\\', '<', '>', '&').
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's appendString with escapeHTML.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendJSONTimePtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return AppendJSONTime(b, *t)
}

// AppendJSONTime appends FormatTime(t) as a JSON string.
func AppendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = appendTime(b, t)
	return append(b, '"')
}

// appendTime appends FormatTime(t): RFC 3339 in UTC with milliseconds.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, timeLayout)
	}
	hour, min, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(b,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}
