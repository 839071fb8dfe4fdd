package yaps

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
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

// A sealed answer with an ETag starts with answerTagged, then the ETag's
// length as a uvarint, the ETag and the body. A JSON body never starts with
// a NUL byte, so answers sealed before ETags were kept still open as bodies.
const answerTagged = 0

// sealRecord returns the storable form of a record holding body in the clear.
func sealRecord(rec *IdempotencyRecord) *IdempotencyRecord {
	aead := idempotencyAEAD(rec.Scope, rec.Key)
	plain := rec.Body
	if rec.ETag != "" {
		plain = make([]byte, 0, 1+binary.MaxVarintLen64+len(rec.ETag)+len(rec.Body))
		plain = append(plain, answerTagged)
		plain = binary.AppendUvarint(plain, uint64(len(rec.ETag)))
		plain = append(append(plain, rec.ETag...), rec.Body...)
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("yaps: crypto/rand failed: " + err.Error())
	}
	sealed := *rec
	sealed.Key = sealedKey(rec.Scope, rec.Key)
	sealed.ETag = ""
	sealed.Body = aead.Seal(nonce, nonce, plain, []byte(sealed.Key))
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
	if len(body) > 0 && body[0] == answerTagged {
		n, w := binary.Uvarint(body[1:])
		if w <= 0 || n > uint64(len(body)-1-w) {
			return nil, Errorf(EINTERNAL, "idempotency record is malformed")
		}
		rest := body[1+w:]
		opened.ETag, opened.Body = string(rest[:n]), rest[n:]
	}
	return &opened, nil
}

// Records expire after Config.IdempotencyRetention. An expired record is
// absent to replay whether or not the background prune deleted it yet, and
// a new record with its key replaces it (IdempotencyRecord.ReplaceBefore),
// so a retry after the retention deterministically creates a new item.

// idemCutoff returns the time before which a record created has expired,
// as of now: millisecond-precise like stored times, so the service and the
// store agree on the boundary. Zero when records never expire.
func (s *Service) idemCutoff(now time.Time) time.Time {
	if s.cfg.IdempotencyRetention < 0 {
		return time.Time{}
	}
	return Truncate(now.Add(-s.cfg.IdempotencyRetention))
}

// idemExpired reports whether a stored record has outlived the retention.
func (s *Service) idemExpired(rec *IdempotencyRecord) bool {
	cut := s.idemCutoff(s.now())
	return !cut.IsZero() && rec.CreatedAt.Before(cut)
}

// idemPruneBatch is how many records PruneIdempotency deletes per store
// call, which bounds how long one call holds the (SQLite) write lock.
const idemPruneBatch = 1000

// PruneIdempotency deletes the idempotency records older than
// IdempotencyRetention (Config.Now decides "now") and returns how many it
// deleted; with a negative retention it does nothing. The background
// ticker calls it after Purge; tests call it directly.
func (s *Service) PruneIdempotency(ctx context.Context) (int, error) {
	cut := s.idemCutoff(s.now())
	if cut.IsZero() {
		return 0, nil
	}
	total := 0
	for {
		n, err := s.cfg.Store.DeleteIdempotencyBefore(ctx, cut, idemPruneBatch)
		total += n
		if err != nil {
			return total, err
		}
		if n < idemPruneBatch {
			return total, nil
		}
	}
}
