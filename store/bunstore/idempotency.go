package bunstore

import (
	"context"
	"math"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// putIdem inserts an idempotency record, replacing a stored one of the same
// (scope, key) only if that was created before r.ReplaceBefore; otherwise
// an existing key is ECONFLICT.
func (s *Store) putIdem(ctx context.Context, tx *wtx, r *yaps.IdempotencyRecord) error {
	replaceBefore := int64(math.MinInt64) // replaces nothing
	if !r.ReplaceBefore.IsZero() {
		replaceBefore = ms(r.ReplaceBefore)
	}
	return s.insertOnce(ctx, tx, "idempotency key", s.q.insertIdem,
		r.Scope, r.Key, r.RequestHash, r.Status, r.Body, ms(r.CreatedAt), replaceBefore)
}

// DeleteIdempotencyBefore implements yaps.Store.
func (s *Store) DeleteIdempotencyBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	n := int64(limit)
	if limit <= 0 {
		n = math.MaxInt64
	}
	var deleted int64
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := s.exec(ctx, tx, s.q.deleteIdemBefore, ms(t), n)
		if err != nil {
			return err
		}
		deleted, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, wrap(err, "delete idempotency records")
	}
	return int(deleted), nil
}
