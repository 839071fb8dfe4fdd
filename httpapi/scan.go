package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// A one-pass reader of a JSON object body, for the common case: every
// member name a plain string (no escapes), every value valid JSON. It
// returns the members with their raw values (slices of b) as
// encoding/json would decode them into map[string]json.RawMessage, a
// fifth of the cost; anything it does not accept (a name with escapes,
// invalid JSON, nesting past maxScanDepth) it leaves to encoding/json,
// whose errors say what is wrong (decodeObject).

// maxScanDepth bounds the nesting scanObject follows; deeper documents
// take encoding/json's path.
const maxScanDepth = 32

// scanObject reads b, which starts with '{' and has no surrounding
// whitespace. ok is false when b is not such an object (or not one this
// reader takes); dup reports a member name that appears twice.
func scanObject(b []byte) (m map[string]json.RawMessage, dup, ok bool) {
	s := scanner{b: b}
	if !s.byte('{') {
		return nil, false, false
	}
	m = make(map[string]json.RawMessage, 8)
	s.ws()
	if s.byte('}') {
		return m, false, s.i == len(b)
	}
	for {
		s.ws()
		start := s.i
		if !s.str() {
			return nil, false, false
		}
		name, plain := plainJSONString(b[start:s.i])
		if !plain {
			return nil, false, false
		}
		s.ws()
		if !s.byte(':') {
			return nil, false, false
		}
		s.ws()
		vs := s.i
		if !s.value(0) {
			return nil, false, false
		}
		if _, seen := m[name]; seen {
			dup = true
		}
		m[name] = json.RawMessage(b[vs:s.i:s.i])
		s.ws()
		if s.byte(',') {
			continue
		}
		if s.byte('}') && s.i == len(b) {
			return m, dup, true
		}
		return nil, false, false
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads one JSON value.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{' || c == '[':
		end, object := byte(']'), c == '{'
		if object {
			end = '}'
		}
		s.i++
		s.ws()
		if s.byte(end) {
			return true
		}
		for {
			s.ws()
			if object {
				if !s.str() {
					return false
				}
				s.ws()
				if !s.byte(':') {
					return false
				}
				s.ws()
			}
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if !s.byte(',') {
				return s.byte(end)
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// str reads a string, escapes included.
func (s *scanner) str() bool {
	if !s.byte('"') {
		return false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 5
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.byte('.') && !s.digits() {
		return false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// plainJSONString returns the text of a JSON string value without escapes,
// or false: the value's bytes between its quotes are the text itself. The
// member names and enum values of the request bodies are returned from
// knownStrings, without allocating.
func plainJSONString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || bytes.IndexByte(v[1:len(v)-1], '\\') >= 0 {
		return "", false
	}
	text := v[1 : len(v)-1]
	if len(text) <= knownStrings.maxLen {
		if s, ok := knownStrings.m[string(text)]; ok { // a lookup by string(text) does not allocate
			return s, true
		}
	}
	return string(text), true
}

// knownStrings holds the member names (json tags) and enum values (enum
// tags) of the request bodies: nearly every name and most short values a
// body holds.
var knownStrings = func() (k struct {
	m      map[string]string
	maxLen int
}) {
	k.m = map[string]string{}
	add := func(s string) {
		if s != "" && s != "-" {
			k.m[s] = s
			k.maxLen = max(k.maxLen, len(s))
		}
	}
	for _, body := range []any{YapRequest{}, CreateListRequest{}, PatchListRequest{}, IssuePermissionRequest{}} {
		t := reflect.TypeOf(body)
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			add(name)
			for _, v := range strings.Split(t.Field(i).Tag.Get("enum"), ",") {
				add(v)
			}
		}
	}
	return k
}()
