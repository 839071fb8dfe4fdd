package yaps

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// Secrets are 32 random bytes written as a recognisable prefix plus unpadded
// base64url (RULINGS R4), so secret scanners can find leaked ones.
const (
	CodePrefix       = "yap_" // permission codes
	AccountKeyPrefix = "yak_" // account keys of the built-in account resolver
	secretBytes      = 32
	secretChars      = 43 // base64.RawURLEncoding.EncodedLen(32)
)

// NewCode returns a fresh permission code.
func NewCode() string { return newSecret(CodePrefix) }

// NewAccountKey returns a fresh account key.
func NewAccountKey() string { return newSecret(AccountKeyPrefix) }

func newSecret(prefix string) string {
	var b [secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("yaps: crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// BearerToken returns the token of an Authorization header value of the
// Bearer scheme (case-insensitive), and whether it is one.
func BearerToken(authorization string) (string, bool) {
	h := strings.TrimSpace(authorization)
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	return strings.TrimSpace(h[7:]), true
}

// RequestCode picks a request's permission code (RULINGS R4): the bearer
// token of its Authorization header unless that is an account key, else its
// k query parameter.
func RequestCode(authorization, k string) string {
	if tok, ok := BearerToken(authorization); ok && !strings.HasPrefix(tok, AccountKeyPrefix) {
		return tok
	}
	return k
}

// WellFormedCode reports whether s has the exact shape of a permission code.
func WellFormedCode(s string) bool { return wellFormed(s, CodePrefix) }

// WellFormedAccountKey reports whether s has the exact shape of an account key.
func WellFormedAccountKey(s string) bool { return wellFormed(s, AccountKeyPrefix) }

func wellFormed(s, prefix string) bool {
	if len(s) != len(prefix)+secretChars || !strings.HasPrefix(s, prefix) {
		return false
	}
	// Decoded in arrays on the stack (DecodeString would allocate twice on
	// every authenticated request).
	var src, dst [secretChars]byte
	copy(src[:], s[len(prefix):])
	n, err := strictRawURL.Decode(dst[:], src[:])
	return err == nil && n == secretBytes
}

var strictRawURL = base64.RawURLEncoding.Strict()

// HashSecret returns the SHA-256 of a code or key: the only form stored.
func HashSecret(s string) []byte {
	var buf [64]byte // holds a code or key: []byte(s) would allocate
	h := sha256.Sum256(append(buf[:0], s...))
	return h[:]
}

// SameHash compares two hashes in constant time.
func SameHash(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
