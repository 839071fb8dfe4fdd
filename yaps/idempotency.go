package yaps

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// Idempotency records replay the first answer, and the first answer to
// POST /lists carries the owner code. The store must never hold a usable
// secret, so a record is sealed with a key only the client has: the
// Idempotency-Key itself. The stored key is a hash of (scope, key) and the
// body is AES-256-GCM encrypted under a different hash of the same pair.
// Someone who reads the database learns neither the key nor the body.

// sealedKey is the form of an Idempotency-Key stored and looked up.
func sealedKey(scope, key string) string {
	h := sha256.Sum256([]byte("yaps idempotency key\x00" + scope + "\x00" + key))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

func idempotencyAEAD(scope, key string) cipher.AEAD {
	k := sha256.Sum256([]byte("yaps idempotency body\x00" + scope + "\x00" + key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic("yaps: aes: " + err.Error()) // a 32-byte key never fails
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("yaps: gcm: " + err.Error())
	}
	return aead
}

// sealRecord returns the storable form of a record holding body in the clear.
func sealRecord(rec *IdempotencyRecord) *IdempotencyRecord {
	aead := idempotencyAEAD(rec.Scope, rec.Key)
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(rec.Body)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("yaps: crypto/rand failed: " + err.Error())
	}
	sealed := *rec
	sealed.Key = sealedKey(rec.Scope, rec.Key)
	sealed.Body = aead.Seal(nonce, nonce, rec.Body, []byte(sealed.Key))
	return &sealed
}

// openRecord decrypts a stored record's body with the client's key.
func openRecord(rec *IdempotencyRecord, scope, key string) (*IdempotencyRecord, error) {
	aead := idempotencyAEAD(scope, key)
	if len(rec.Body) < aead.NonceSize() {
		return nil, Errorf(EINTERNAL, "idempotency record is truncated")
	}
	nonce, ct := rec.Body[:aead.NonceSize()], rec.Body[aead.NonceSize():]
	body, err := aead.Open(nil, nonce, ct, []byte(rec.Key))
	if err != nil {
		return nil, &Error{Code: EINTERNAL, Message: "idempotency record does not open", Err: err}
	}
	opened := *rec
	opened.Key = key
	opened.Body = body
	return &opened, nil
}
