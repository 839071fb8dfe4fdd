package yaps

import (
	"crypto/rand"
	"encoding/base64"
	"regexp"
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

var yapIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidYapID reports whether id may name a yap: 1–64 characters of
// A-Za-z0-9_- (RULINGS R9).
func ValidYapID(id string) bool { return yapIDPattern.MatchString(id) }

// Cursors are opaque to clients: unpadded base64url of
// "<createdAt unix millis>.<yap id>" for yaps and of the last audit seq for
// the audit log. Anything else is EINVALID.

func encodeYapCursor(c YapCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMilli(), 10) + "." + c.ID))
}

func decodeYapCursor(s string) (*YapCursor, error) {
	bad := Errorf(EINVALID, "cursor is not valid")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	ms, id, ok := strings.Cut(string(b), ".")
	if !ok || !ValidYapID(id) {
		return nil, bad
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return nil, bad
	}
	return &YapCursor{CreatedAt: time.UnixMilli(n).UTC(), ID: id}, nil
}

func encodeSeqCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("a" + strconv.FormatInt(seq, 10)))
}

func decodeSeqCursor(s string) (int64, error) {
	bad := Errorf(EINVALID, "cursor is not valid")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != 'a' {
		return 0, bad
	}
	n, err := strconv.ParseInt(string(b[1:]), 10, 64)
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
