package bunstore

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// A write of a batch that fails is rolled back to its savepoint, and what
// it read of its own changes leaves the writer's permission cache with it:
// a permission it created and rolled back was still found, one it revoked
// and rolled back still revoked (SQLite store review; no service path
// reads so today).
func TestCacheClearedOnSavepointRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	defer s.Close()
	now := time.Now().UTC()
	owner := &yaps.Permission{ID: "own", Role: yaps.RoleOwner, CreatedAt: now, CodeHash: []byte("h-own")}
	require.NoError(t, s.CreateList(ctx, &yaps.List{Ref: "l", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, owner, []byte("u0"), nil))

	errBoom := errors.New("boom")
	wait, release := gateQueue(t, &s.group)
	var wg sync.WaitGroup
	var errGhost, errRevoke error
	wg.Go(func() { // creates "ghost", sees it active, then fails
		errGhost = s.Update(ctx, "l", func(tx yaps.Tx) error {
			p := &yaps.Permission{ID: "ghost", Role: yaps.RoleEditor, CreatedAt: now, CodeHash: []byte("h-ghost")}
			if err := tx.CreatePermission(p); err != nil {
				return err
			}
			if _, _, err := tx.(yaps.PermissionActiveTx).PermissionActive("ghost"); err != nil {
				return err
			}
			return errBoom
		})
	})
	wait(1)
	wg.Go(func() { // revokes "own", sees it revoked, then fails
		errRevoke = s.Update(ctx, "l", func(tx yaps.Tx) error {
			if err := tx.RevokePermission("own", now); err != nil {
				return err
			}
			if _, _, err := tx.(yaps.PermissionActiveTx).PermissionActive("own"); err != nil {
				return err
			}
			return errBoom
		})
	})
	wait(2)
	var errOK error
	wg.Go(func() { // a write that succeeds, committed with the two
		errOK = s.Update(ctx, "l", func(tx yaps.Tx) error {
			_, err := tx.AppendUpdate([]byte("u1"))
			return err
		})
	})
	wait(3)
	release()
	wg.Wait()
	require.ErrorIs(t, errGhost, errBoom)
	require.ErrorIs(t, errRevoke, errBoom)
	require.NoError(t, errOK)

	// The database: no "ghost", "own" active.
	ps, err := s.Permissions(ctx, "l")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "own", ps[0].ID)

	// What a later write's permission check sees.
	var ghostFound, ghostActive, ownFound, ownActive bool
	require.NoError(t, s.Update(ctx, "l", func(tx yaps.Tx) error {
		pa := tx.(yaps.PermissionActiveTx)
		var err error
		if ghostFound, ghostActive, err = pa.PermissionActive("ghost"); err != nil {
			return err
		}
		ownFound, ownActive, err = pa.PermissionActive("own")
		return err
	}))
	assert.False(t, ghostFound, "PermissionActive(ghost): found=%v active=%v for a permission that was rolled back", ghostFound, ghostActive)
	assert.True(t, ownFound && ownActive, "PermissionActive(own): found=%v active=%v for an active permission", ownFound, ownActive)
}
