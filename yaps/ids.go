package yaps

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Identifiers (all opaque to clients):
//   - list refs: 16 random bytes as unpadded base64url (22 characters);
//   - yap ids assigned by the server, permission ids and account ids:
//     UUIDv7 strings (time-ordered, 36 characters), which fit the yap id
//     rule of sync clients (1–64 characters of A-Za-z0-9_-).

func newRef() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("yaps: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func newID() string {
	u, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return u.String()
}

// ValidYapID reports whether id may name a yap: 1–64 characters of
// A-Za-z0-9_- (RULINGS R9).
func ValidYapID(id string) bool {
	// A loop, not a regexp: every sync edit checks the ids it touches.
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Cursors are opaque to clients and bound to the list (or, on GET /lists,
// the account) they were issued for: unpadded base64url of
//
//	'Y' "<createdAt unix millis>.<yap id>" <tag>   (GET /lists/{ref}/yaps)
//	'A' "<audit seq>" <tag>                       (GET /lists/{ref}/audit)
//	'L' "<createdAt unix millis>.<list ref>" <tag> (GET /lists)
//
// where <tag> is the first cursorTagLen bytes of SHA-256("yaps cursor\x00" +
// bind + "\x00" + the bytes before the tag), bind being the list ref, or the
// account ID for 'L' (GET /lists names no list). A cursor decodes only on
// the endpoint (first byte) and the list or account it came from, and only
// whole: a cursor cut short, or edited, fails the tag instead of decoding to
// another valid position. Anything else, another list's cursor included, is
// EINVALID, like any malformed cursor, rather than a position that silently
// skips items. The tag is a check, not a secret: cursors are positions, not
// credentials.
// Cursors of earlier formats (a decimal digit or 'a' first; the tag before
// the position) are EINVALID too: a client paging across an upgrade gets
// 400 once and starts again from the first page.

// cursorTagLen is the length of the list tag in a cursor: 6 bytes (8
// base64url characters), so two lists' cursors agree by accident with
// probability 2^-48.
const cursorTagLen = 6

const (
	yapCursorKind   = 'Y'
	auditCursorKind = 'A'
	listCursorKind  = 'L'
)

// cursorTag returns the tag of a cursor bound to bind (a list ref or an
// account ID) whose bytes before the tag are body.
func cursorTag(bind string, body []byte) [cursorTagLen]byte {
	h := sha256.New()
	h.Write([]byte("yaps cursor\x00" + bind + "\x00"))
	h.Write(body)
	var sum [sha256.Size]byte
	return [cursorTagLen]byte(h.Sum(sum[:0])[:cursorTagLen])
}

// encodeCursor returns the cursor of kind bound to bind with payload.
func encodeCursor(kind byte, bind, payload string) string {
	b := make([]byte, 0, 1+len(payload)+cursorTagLen)
	b = append(append(b, kind), payload...)
	tag := cursorTag(bind, b)
	return base64.RawURLEncoding.EncodeToString(append(b, tag[:]...))
}

// decodeCursor returns the payload of s if it is a whole cursor of kind
// bound to bind.
func decodeCursor(kind byte, bind, s string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) <= 1+cursorTagLen || b[0] != kind {
		return "", false
	}
	body := b[:len(b)-cursorTagLen]
	tag := cursorTag(bind, body)
	if !bytes.Equal(b[len(body):], tag[:]) {
		return "", false
	}
	return string(body[1:]), true
}

// A position cursor holds a creation time (Unix milliseconds) and the key
// after it that breaks ties: a yap ID, or a list ref.

func encodePosCursor(kind byte, bind string, at time.Time, key string) string {
	return encodeCursor(kind, bind, strconv.FormatInt(at.UnixMilli(), 10)+"."+key)
}

// decodePosCursor returns the time and key of s, a position cursor of kind
// bound to bind whose key passes valid.
func decodePosCursor(kind byte, bind, s string, valid func(string) bool) (time.Time, string, error) {
	bad := Errorf(EINVALID, "cursor is not valid")
	p, ok := decodeCursor(kind, bind, s)
	if !ok {
		return time.Time{}, "", bad
	}
	ms, key, ok := strings.Cut(p, ".")
	if !ok || !valid(key) {
		return time.Time{}, "", bad
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, "", bad
	}
	return time.UnixMilli(n).UTC(), key, nil
}

func encodeYapCursor(ref string, c YapCursor) string {
	return encodePosCursor(yapCursorKind, ref, c.CreatedAt, c.ID)
}

func decodeYapCursor(ref, s string) (*YapCursor, error) {
	at, id, err := decodePosCursor(yapCursorKind, ref, s, ValidYapID)
	if err != nil {
		return nil, err
	}
	return &YapCursor{CreatedAt: at, ID: id}, nil
}

// encodeListCursor returns the GET /lists cursor after c. It is bound to
// the account: another account's cursor is EINVALID, never a position in
// this account's lists.
func encodeListCursor(accountID string, c ListCursor) string {
	return encodePosCursor(listCursorKind, accountID, c.CreatedAt, c.Ref)
}

func decodeListCursor(accountID, s string) (*ListCursor, error) {
	at, ref, err := decodePosCursor(listCursorKind, accountID, s, wellFormedRef)
	if err != nil {
		return nil, err
	}
	return &ListCursor{CreatedAt: at, Ref: ref}, nil
}

func encodeSeqCursor(ref string, seq int64) string {
	return encodeCursor(auditCursorKind, ref, strconv.FormatInt(seq, 10))
}

func decodeSeqCursor(ref, s string) (int64, error) {
	bad := Errorf(EINVALID, "cursor is not valid")
	p, ok := decodeCursor(auditCursorKind, ref, s)
	if !ok {
		return 0, bad
	}
	n, err := strconv.ParseInt(p, 10, 64)
	if err != nil || n < 0 {
		return 0, bad
	}
	return n, nil
}

// Paging limits (RULINGS R6).
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
)

// pageLimit maps the limit parameter: 0 means the default; below 0 or above
// MaxPageLimit is EINVALID.
func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageLimit, nil
	case n < 0 || n > MaxPageLimit:
		return 0, Errorf(EINVALID, "limit must be between 1 and %d", MaxPageLimit)
	}
	return n, nil
}
