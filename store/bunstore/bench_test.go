package bunstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// The benchmarks model the service's hot paths: a yap write (one Update
// appending a document update, projecting the yap, auditing and touching
// the list row) and a page read of 50 yaps.
//
//	go test -run '^$' -bench . ./store/bunstore
//	YAPS_TEST_POSTGRES=postgres://... go test -run '^$' -bench . ./store/bunstore

func BenchmarkSQLiteFile(b *testing.B) {
	benchStore(b, func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "bench.db") })
}

func BenchmarkSQLiteMemory(b *testing.B) {
	benchStore(b, func(*testing.B) string { return "sqlite::memory:" })
}

func BenchmarkPostgres(b *testing.B) {
	if os.Getenv(storetest.PostgresEnv) == "" {
		b.Skipf("%s is not set", storetest.PostgresEnv)
	}
	benchStore(b, func(b *testing.B) string { return storetest.PostgresDSN(b) })
}

var benchSeq atomic.Int64

func benchList(b testing.TB, s *bunstore.Store, yapCount int) string {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	ref := fmt.Sprint("bench", benchSeq.Add(1))
	owner := &yaps.Permission{ID: ref + "-owner", Role: yaps.RoleOwner, CreatedAt: now, CodeHash: yaps.HashSecret(ref)}
	if err := s.CreateList(ctx, &yaps.List{Ref: ref, Title: "bench", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now},
		owner, []byte("first"), nil); err != nil {
		b.Fatal(err)
	}
	if yapCount > 0 {
		err := s.Update(ctx, ref, func(tx yaps.Tx) error {
			for i := range yapCount {
				if err := tx.PutYap(benchYap(fmt.Sprintf("y%05d", i), now.Add(time.Duration(i)*time.Millisecond))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return ref
}

func benchYap(id string, at time.Time) *yaps.Yap {
	p := yaps.PriorityHigh
	return &yaps.Yap{ID: id, Kind: yaps.KindTask, CreatedAt: at, UpdatedAt: at,
		Content: "Buy milk and bread #!high due:tomorrow", Status: yaps.StatusOpen, Priority: &p, Tags: []string{"home"}}
}

// write is one yap creation as the service performs it.
func write(ctx context.Context, s *bunstore.Store, ref string, n int64, update []byte) error {
	return s.Update(ctx, ref, func(tx yaps.Tx) error {
		l := tx.List()
		if _, err := tx.AppendUpdate(update); err != nil {
			return err
		}
		now := time.Now()
		if err := tx.PutYap(benchYap(fmt.Sprint("w", n), now)); err != nil {
			return err
		}
		if err := tx.AppendAudit(&yaps.AuditEntry{At: now, PermissionID: ref + "-owner", Role: yaps.RoleOwner,
			Action: "yap.create", YapID: fmt.Sprint("w", n)}); err != nil {
			return err
		}
		l.UpdatedAt = now
		return tx.SaveList(l)
	})
}

func benchStore(b *testing.B, dsn func(*testing.B) string) {
	update := make([]byte, 120) // a typical small Yjs update
	b.Run("Write", func(b *testing.B) {
		s := openB(b, dsn(b))
		ref := benchList(b, s, 0)
		ctx := context.Background()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := write(ctx, s, ref, int64(i), update); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteParallelManyLists", func(b *testing.B) {
		s := openB(b, dsn(b))
		ctx := context.Background()
		b.ReportAllocs()
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			ref := benchList(b, s, 0)
			for pb.Next() {
				if err := write(ctx, s, ref, n.Add(1), update); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	// Edits of one yap per list, as live sync makes them: the row exists
	// and only its data changes.
	b.Run("EditParallelManyLists", func(b *testing.B) {
		s := openB(b, dsn(b))
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ref := benchList(b, s, 0)
			y := benchYap("edited", time.Now())
			for i := 0; pb.Next(); i++ {
				y.Content = fmt.Sprint("edit ", i)
				if err := s.Update(ctx, ref, func(tx yaps.Tx) error {
					if _, err := tx.AppendUpdate(update); err != nil {
						return err
					}
					if err := tx.PutYap(y); err != nil {
						return err
					}
					l := tx.List()
					l.UpdatedAt = time.Now()
					return tx.SaveList(l)
				}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("ReadPage50", func(b *testing.B) {
		s := openB(b, dsn(b))
		ref := benchList(b, s, 500)
		ctx := context.Background()
		after := &yaps.YapCursor{}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q := yaps.YapQuery{Limit: 50}
			if i%2 == 1 {
				q.After = after
			}
			page, err := s.Yaps(ctx, ref, q)
			if err != nil || len(page) != 50 {
				b.Fatal(err, len(page))
			}
			after.CreatedAt, after.ID = page[49].CreatedAt, page[49].ID
		}
	})
	b.Run("ReadListAndPermission", func(b *testing.B) {
		s := openB(b, dsn(b))
		ref := benchList(b, s, 0)
		hash := yaps.HashSecret(ref)
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.List(ctx, ref); err != nil {
					b.Error(err)
					return
				}
				if _, err := s.PermissionByHash(ctx, hash); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func openB(b *testing.B, dsn string) *bunstore.Store {
	b.Helper()
	s, err := bunstore.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
