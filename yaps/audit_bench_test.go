package yaps_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// BenchmarkSyncTyping measures one keystroke through ApplyUpdate on a
// SQLite in-memory store (CPU, no fsync), with audit coalescing (default)
// and without, and on a SQLite file (WAL, the server's configuration: the
// dedicated writer connection, its row cache and commit).
func BenchmarkSyncTyping(b *testing.B) {
	for _, bc := range []struct {
		name     string
		coalesce time.Duration
		file     bool
	}{{"every", -1, false}, {"coalesce", 0, false}, {"file", 0, true}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			dsn := "sqlite::memory:"
			if bc.file {
				dsn = "sqlite:" + filepath.Join(b.TempDir(), "yaps.db")
			}
			st, err := bunstore.Open(ctx, dsn)
			require.NoError(b, err)
			defer st.Close()
			svc, err := yaps.NewService(yaps.Config{Store: st, PurgeInterval: -1, AuditCoalesce: bc.coalesce, CompactAfter: 1 << 30})
			require.NoError(b, err)
			defer svc.Close()
			cl, err := svc.CreateList(ctx, yaps.CreateListInput{Title: yaps.Set("bench")})
			require.NoError(b, err)
			a, err := svc.Authenticate(ctx, cl.List.Ref, cl.OwnerCode)
			require.NoError(b, err)
			y, _, err := svc.CreateYap(ctx, a, yaps.KindNote, yaps.YapFields{Body: yaps.Set("")}, "", nil)
			require.NoError(b, err)
			snap, _, err := svc.Snapshot(ctx, a, nil)
			require.NoError(b, err)
			d := yjs.NewDoc()
			require.NoError(b, d.ApplyUpdate(snap, nil))
			v, _ := d.GetMap("yaps").Get(y.ID)
			body, _ := v.(*yjs.Map).Get("body")
			tx := body.(*yjs.Text)
			var u []byte
			d.OnUpdate(func(b []byte, _ any) { u = b })
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tx.Insert(tx.Len(), "x", nil)
				if err := svc.ApplyUpdate(ctx, a, u, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
