package bunstore_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// Authenticate through ListWithPermission (one joined query): every answer
// as with List + PermissionByHash, and a revocation by another process
// (a second store on the same database) takes effect at once. The
// services' auth cache is off: this is about what the store answers (the
// cache, and how notices and its TTL bound it, is tested in yaps).
func TestListWithPermission(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(t *testing.T) string{
		"SQLiteFile": func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "auth.db") },
		"Postgres":   func(t *testing.T) string { return storetest.PostgresDSN(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := dsn(t)
			s1, s2 := open(t, d), open(t, d)
			var _ yaps.ListAuthStore = s1
			svc := func(st yaps.Store) *yaps.Service {
				v, err := yaps.NewService(yaps.Config{Store: st, Limiter: yaps.Unlimited{}, PurgeInterval: -1, AuthCacheTTL: -1,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				require.NoError(t, err)
				t.Cleanup(func() { _ = v.Close() })
				return v
			}
			a, b := svc(s1), svc(s2)
			c1, err := a.CreateList(ctx, yaps.CreateListInput{})
			require.NoError(t, err)
			c2, err := a.CreateList(ctx, yaps.CreateListInput{})
			require.NoError(t, err)
			ref := c1.List.Ref

			owner, err := a.Authenticate(ctx, ref, c1.OwnerCode)
			require.NoError(t, err)
			require.Equal(t, yaps.RoleOwner, owner.Permission.Role)
			require.Equal(t, ref, owner.List.Ref)
			require.Equal(t, ref, owner.Permission.ListRef)

			l, p, err := s1.ListWithPermission(ctx, ref, yaps.HashSecret(c1.OwnerCode))
			require.NoError(t, err)
			require.Equal(t, owner.List, l)
			require.Equal(t, owner.Permission, p)
			pb, err := s1.PermissionByHash(ctx, yaps.HashSecret(c1.OwnerCode))
			require.NoError(t, err)
			require.Equal(t, pb, p)

			_, err = a.Authenticate(ctx, "nosuchlist0000000000", c1.OwnerCode)
			require.True(t, yaps.IsCode(err, yaps.ENOTFOUND), "%v", err)
			_, err = a.Authenticate(ctx, ref, c2.OwnerCode) // another list's code
			require.True(t, yaps.IsCode(err, yaps.EUNAUTHORIZED), "%v", err)
			_, err = a.Authenticate(ctx, ref, "")
			require.True(t, yaps.IsCode(err, yaps.EUNAUTHORIZED), "%v", err)
			_, err = a.Authenticate(ctx, ref, "yap_x")
			require.True(t, yaps.IsCode(err, yaps.EUNAUTHORIZED), "%v", err)
			issued, err := a.IssuePermission(ctx, owner, yaps.RoleEditor, "e", nil)
			require.NoError(t, err)
			unknown := issued.Code[:len(issued.Code)-1] + "A"
			if unknown == issued.Code {
				unknown = issued.Code[:len(issued.Code)-1] + "B"
			}
			_, err = a.Authenticate(ctx, ref, unknown)
			require.True(t, yaps.IsCode(err, yaps.EUNAUTHORIZED), "%v", err)

			ed, err := a.Authenticate(ctx, ref, issued.Code)
			require.NoError(t, err)
			require.Equal(t, yaps.RoleEditor, ed.Permission.Role)

			// Revoked through the other store: refused at once here.
			ownerB, err := b.Authenticate(ctx, ref, c1.OwnerCode)
			require.NoError(t, err)
			require.NoError(t, b.RevokePermission(ctx, ownerB, issued.Permission.ID))
			_, err = a.Authenticate(ctx, ref, issued.Code)
			require.True(t, yaps.IsCode(err, yaps.EUNAUTHORIZED), "%v", err)
			_, p, err = s1.ListWithPermission(ctx, ref, yaps.HashSecret(issued.Code))
			require.NoError(t, err)
			require.NotNil(t, p.RevokedAt)
		})
	}
}

// The session of every pooled Postgres connection has bitmap scans off, so
// a page of yaps walks yaps_order in order even without statistics.
func TestPostgresBitmapScanOff(t *testing.T) {
	t.Parallel()
	s := open(t, storetest.PostgresDSN(t))
	var v string
	require.NoError(t, s.DB().QueryRowContext(context.Background(), "SHOW enable_bitmapscan").Scan(&v))
	require.Equal(t, "off", v)
}
