package yaps_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// recordingStore keeps the idempotency records the service hands to the
// store, to check what would be written to disk.
type recordingStore struct {
	yaps.Store
	records []*yaps.IdempotencyRecord
}

func (s *recordingStore) CreateList(ctx context.Context, l *yaps.List, owner *yaps.Permission, first []byte, idem *yaps.IdempotencyRecord) error {
	if idem != nil {
		s.records = append(s.records, idem)
	}
	return s.Store.CreateList(ctx, l, owner, first, idem)
}

// TestIdempotencyRecordHoldsNoSecret: the replayable answer to POST /lists
// contains the owner code, yet neither it nor the client's key is stored in
// the clear, and a replay still returns the same owner code.
func TestIdempotencyRecordHoldsNoSecret(t *testing.T) {
	t.Parallel()
	rec := &recordingStore{}
	e := newEnv(t, func(c *yaps.Config) { rec.Store = c.Store; c.Store = rec })
	const key = "client-key-123"
	in := yaps.CreateListInput{Title: yaps.Set("x"), IdempotencyKey: key, RequestHash: hash("a"), ClientIP: "1.1.1.1"}
	first, err := e.svc.CreateList(e.ctx, in)
	require.NoError(t, err)
	require.Len(t, rec.records, 1)
	stored := rec.records[0]
	require.NotContains(t, stored.Key, key)
	require.False(t, bytes.Contains(stored.Body, []byte(first.OwnerCode)), "owner code stored in the clear")
	require.False(t, bytes.Contains(stored.Body, []byte(first.List.Ref)), "answer stored in the clear")

	again, err := e.svc.CreateList(e.ctx, in)
	require.NoError(t, err)
	require.NotNil(t, again.Replay)
	require.True(t, bytes.Contains(again.Replay.Body, []byte(first.OwnerCode)))

	// Another key in the same scope finds nothing to replay.
	in.IdempotencyKey = key + "x"
	other, err := e.svc.CreateList(e.ctx, in)
	require.NoError(t, err)
	require.Nil(t, other.Replay)
	require.NotEqual(t, first.List.Ref, other.List.Ref)
}
