package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yaps-dev/yaps/yaps"
)

// readBody reads the request body, at most cfg.MaxBodyBytes of it, within
// cfg.BodyReadTimeout. An oversized body is ETOOLARGE (413
// payload_too_large), a late one ETIMEOUT (408 request_timeout).
func (st *reqState) readBody() ([]byte, error) {
	if st.r.Body == nil || st.r.Body == http.NoBody {
		return nil, nil
	}
	max := st.cfg.MaxBodyBytes
	if st.r.ContentLength > max {
		return nil, yaps.Errorf(yaps.ETOOLARGE, "request body exceeds %d bytes", max)
	}
	if t := st.cfg.BodyReadTimeout; t > 0 {
		// Without it a client that stops sending mid-body holds its
		// handler and connection for as long as it likes. Lifted after
		// the read: net/http's read for a closed connection, which runs
		// while the handler does, would end the request's context.
		rc := http.NewResponseController(st.w)
		if rc.SetReadDeadline(time.Now().Add(t)) == nil {
			defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
		}
	}
	b, err := io.ReadAll(http.MaxBytesReader(st.w, st.r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, yaps.Errorf(yaps.ETOOLARGE, "request body exceeds %d bytes", max)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			st.w.Header().Set("Connection", "close") // the rest of the body is still on its way
			return nil, yaps.Errorf(yaps.ETIMEOUT, "the request body did not arrive within %s", st.cfg.BodyReadTimeout)
		}
		return nil, errInvalid("could not read the request body: %v", err)
	}
	return b, nil
}

// bodyHash is the SHA-256 of a request body, for idempotency.
func bodyHash(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// object is a decoded JSON object body whose members are consumed one by
// one, so absent, null and present are told apart (merge patch) and members
// nobody asked for are reported as unknown.
type object struct {
	m    map[string]json.RawMessage
	used []string // members of m consumed so far (a handful: no map)
	// usedBuf backs used for the usual bodies, so that marking members
	// used takes no allocation of its own.
	usedBuf [8]string
}

// decodeObject parses body as one JSON object. An empty body (or only
// whitespace) yields an empty object when allowEmpty, else 400.
func decodeObject(body []byte, allowEmpty bool) (*object, error) {
	o := &object{}
	o.used = o.usedBuf[:0]
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if allowEmpty {
			return o, nil
		}
		return nil, errInvalid("a JSON object body is required")
	}
	if !utf8.Valid(trimmed) {
		return nil, errInvalid("the request body is not valid UTF-8")
	}
	if trimmed[0] != '{' {
		if allowEmpty && string(trimmed) == "null" {
			return o, nil
		}
		return nil, errInvalid("the request body must be a JSON object")
	}
	// The common case, one valid object, in one pass (scan.go); anything
	// else takes the decoder below, whose errors say what is wrong.
	if m, dup, ok := scanObject(trimmed); ok {
		if dup {
			return nil, errDuplicateMember()
		}
		o.m = m
		return o, nil
	}
	if json.Unmarshal(trimmed, &o.m) == nil {
		if members(trimmed) != len(o.m) {
			return nil, errDuplicateMember()
		}
		return o, nil
	}
	o.m = nil
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&o.m); err != nil {
		return nil, errInvalid("malformed JSON: %s", jsonErrText(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errInvalid("malformed JSON: unexpected data after the object")
	}
	if o.m == nil {
		o.m = map[string]json.RawMessage{}
	}
	return o, nil
}

// errDuplicateMember refuses an object that repeats a member: encoding/json
// keeps the last, a proxy or a log in front may read the first, so neither
// is guessed.
func errDuplicateMember() error {
	return errInvalid("a member of the JSON object appears more than once")
}

// members counts the members of the JSON object b, which is valid JSON,
// repeated ones included.
func members(b []byte) int {
	n, depth := 0, 0
	inString, escaped, key := false, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if depth == 1 && key {
				n++
				key = false
			}
		case '{', '[':
			depth++
			key = depth == 1
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		}
	}
	return n
}

// emptyBody reads the body of an operation that takes none: nothing, null
// and {} pass; a member is 400 like any unknown member.
func (st *reqState) emptyBody() error {
	body, err := st.readBody()
	if err != nil {
		return err
	}
	o, err := decodeObject(body, true)
	if err != nil {
		return err
	}
	return o.unknown()
}

func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at offset " + strconv.FormatInt(se.Offset, 10)
	}
	var ue *json.UnmarshalTypeError
	if errors.As(err, &ue) {
		return "unexpected " + ue.Value
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return "invalid JSON"
}

// has reports whether the member is present (null included).
func (o *object) has(name string) bool {
	_, ok := o.m[name]
	return ok
}

// ignore consumes members whose values are ignored (server-assigned).
func (o *object) ignore(names ...string) {
	for _, n := range names {
		o.use(n)
	}
}

// unknown returns a 400 naming the members nobody consumed, or nil.
func (o *object) unknown() error {
	var extra []string
	for k := range o.m {
		if !slices.Contains(o.used, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	for i, e := range extra {
		extra[i] = strconv.Quote(clip(e, 40))
	}
	if len(extra) > 5 {
		extra = append(extra[:5], "…")
	}
	return errInvalid("unknown field(s): %s", strings.Join(extra, ", "))
}

func (o *object) raw(name string) (json.RawMessage, bool) {
	o.use(name)
	v, ok := o.m[name]
	return v, ok
}

// use marks the member name consumed.
func (o *object) use(name string) {
	if _, ok := o.m[name]; ok && !slices.Contains(o.used, name) {
		o.used = append(o.used, name)
	}
}

// jsonString decodes the JSON string v: plainJSONString, else
// encoding/json (escapes). The string encoding/json decodes into is
// declared on that path only: its address escapes, so a variable shared
// with the plain path would be allocated for every string.
func jsonString(v json.RawMessage) (string, bool) {
	if s, plain := plainJSONString(v); plain {
		return s, true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// text reads a string member. mode says which control characters are
// allowed: lineText allows none but tab, multiText also LF. (CR is refused
// by the core's validation with its own message.)
func (o *object) text(name string, mode textMode) (yaps.Field[string], error) {
	v, ok := o.raw(name)
	if !ok {
		return yaps.Field[string]{}, nil
	}
	if isNull(v) {
		return yaps.Null[string](), nil
	}
	s, ok := jsonString(v)
	if !ok {
		return yaps.Field[string]{}, errInvalid("%s must be a string", name)
	}
	if err := checkText(name, s, mode); err != nil {
		return yaps.Field[string]{}, err
	}
	return yaps.Set(s), nil
}

// time reads an RFC 3339 date-time member.
func (o *object) time(name string) (yaps.Field[time.Time], error) {
	f, err := o.text(name, lineText)
	if err != nil || !f.Present || f.Null {
		return yaps.Field[time.Time]{Present: f.Present, Null: f.Null}, err
	}
	t, err := yaps.ParseTime(name, f.Value)
	if err != nil {
		return yaps.Field[time.Time]{}, err
	}
	return yaps.Set(t), nil
}

// strings reads an array-of-strings member.
func (o *object) strings(name string) (yaps.Field[[]string], error) {
	v, ok := o.raw(name)
	if !ok {
		return yaps.Field[[]string]{}, nil
	}
	if isNull(v) {
		return yaps.Null[[]string](), nil
	}
	var ss []string
	if err := json.Unmarshal(v, &ss); err != nil {
		return yaps.Field[[]string]{}, errInvalid("%s must be an array of strings", name)
	}
	if ss == nil {
		ss = []string{}
	}
	for _, s := range ss {
		if err := checkText(name, s, lineText); err != nil {
			return yaps.Field[[]string]{}, err
		}
	}
	return yaps.Set(ss), nil
}

type textMode int

const (
	lineText  textMode = iota // one line: no control characters except tab
	multiText                 // LF and tab allowed (CR passes here; the core refuses it)
)

// checkText rejects NUL and other control characters that have no business
// in the field (RULINGS R3: multi-line task content is 400).
func checkText(name, s string, mode textMode) error {
	if !utf8.ValidString(s) {
		return errInvalid("%s is not valid UTF-8", name)
	}
	for _, r := range s {
		switch {
		case r == '\t':
		case r == '\n' || r == '\r':
			if mode != multiText {
				return errInvalid("%s must be a single line (no CR or LF)", name)
			}
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return errInvalid("%s must not contain control characters", name)
		}
	}
	return nil
}

// query parameters

// query parses the request's query string. Go's own parser drops a pair it
// cannot decode (a broken %-escape) without a word, which would serve the
// first page for a mangled cursor: such a query is 400 instead, on every
// operation (those that read no parameter too, once the credential and role
// checks of RULINGS R3 have passed), so a client learns of its mangled URL
// wherever it sends one.
//
// An empty query string gives nil, which reads as empty.
func (st *reqState) query() (url.Values, error) {
	if st.r.URL.RawQuery == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(st.r.URL.RawQuery)
	if err != nil {
		return nil, errInvalid("the query string is malformed (a %%-escape does not decode)")
	}
	return q, nil
}

// checkQuery answers 400 for a query string that does not decode (query).
func (st *reqState) checkQuery() *rawOut {
	if _, err := st.query(); err != nil {
		return st.errorOut(err)
	}
	return nil
}

// parseLimit parses limit: "" is 0 (the service default, 50), else 1..200.
func parseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 200 {
		return 0, errInvalid("limit must be an integer from 1 to 200")
	}
	return n, nil
}

// page reads the request's paging parameters, limit (parseLimit) and
// cursor (an opaque line of at most 1,024 bytes), and returns its query
// for the others.
func (st *reqState) page() (q url.Values, limit int, cursor string, err error) {
	if q, err = st.query(); err != nil {
		return nil, 0, "", err
	}
	if limit, err = parseLimit(q.Get("limit")); err != nil {
		return nil, 0, "", err
	}
	cursor = q.Get("cursor")
	if err := checkText("cursor", cursor, lineText); err != nil || len(cursor) > 1024 {
		return nil, 0, "", errInvalid("invalid cursor")
	}
	return q, limit, cursor, nil
}

// parseBool parses a boolean query parameter; "" is false.
func parseBool(name, s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, errInvalid("%s must be true or false", name)
	}
	return b, nil
}

// decodeB64 decodes base64 in the standard or URL-safe alphabet, padded or
// not (the snapshot's sv parameter, RULINGS R9).
func decodeB64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, "=")
	s = strings.NewReplacer("-", "+", "_", "/", " ", "+").Replace(s)
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, errInvalid("sv must be base64 (standard or URL-safe alphabet)")
	}
	return b, nil
}

// idempotencyKey reads the Idempotency-Key header: at most 255 visible
// ASCII characters.
func (st *reqState) idempotencyKey() (string, error) {
	k := strings.TrimSpace(st.r.Header.Get("Idempotency-Key"))
	if k == "" {
		return "", nil
	}
	if len(k) > 255 {
		return "", errInvalid("Idempotency-Key must be at most 255 characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", errInvalid("Idempotency-Key must be visible ASCII")
		}
	}
	return k, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
