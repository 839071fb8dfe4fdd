package bunstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// BenchmarkPreparedCreates runs what the create-yap benchmark's writes
// do to Postgres, without HTTP or the CRDT: 1, 4 or 16 writers (the
// benchmark's 16 workers), each on a list of its own, each write an
// update, a yap and an audit entry, group committed (prepgroup.go), so
// the batches hold about as many writes as there are writers. Besides the
// time per write it reports pg-µs/op, the CPU per write of the Postgres
// backends serving this benchmark's connections (from /proc, so only with
// a local Postgres; the commits' fsyncs included, Postgres's background
// processes not, nor other clients of the server, such as tests running
// beside it), and pipelines/op.
func BenchmarkPreparedCreates(b *testing.B) {
	if os.Getenv(storetest.PostgresEnv) == "" {
		b.Skipf("%s is not set", storetest.PostgresEnv)
	}
	for _, writers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchPreparedCreates(b, writers) })
	}
}

func benchPreparedCreates(b *testing.B, writers int) {
	app := fmt.Sprintf("yaps-bench-%d", time.Now().UnixNano())
	s := openB(b, storetest.PostgresDSN(b)+"&application_name="+app)
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	rows := make([]*yaps.List, writers)
	for i := range rows {
		ref, perm := fmt.Sprintf("bench%02d", i), fmt.Sprintf("perm%02d", i)
		l := &yaps.List{Ref: ref, Title: "t", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}
		owner := &yaps.Permission{ID: perm, ListRef: ref, Role: yaps.RoleOwner, CreatedAt: now, CodeHash: yaps.HashSecret("code-" + perm)}
		if err := s.CreateList(ctx, l, owner, []byte("u1"), nil); err != nil {
			b.Fatal(err)
		}
		row, err := s.List(ctx, ref)
		if err != nil {
			b.Fatal(err)
		}
		rows[i] = row
	}
	update := make([]byte, 120)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := backendsCPU(b, s, app)
	var wg sync.WaitGroup
	for w := range writers {
		n := b.N / writers
		if w < b.N%writers {
			n++
		}
		wg.Go(func() {
			row := rows[w]
			perm := fmt.Sprintf("perm%02d", w)
			for i := range n {
				next := row.Clone()
				next.DocVersion++
				next.UpdatedAt = now.Add(time.Duration(i) * time.Millisecond)
				id := fmt.Sprintf("y%07d", i)
				p := &yaps.PreparedWrite{Expect: row, PermissionID: perm, List: next, Ops: []yaps.PreparedOp{
					{Update: update},
					{PutYap: &yaps.Yap{ID: id, ListRef: row.Ref, Kind: yaps.KindTask, Content: "buy milk " + id, CreatedAt: now, UpdatedAt: now}, NewYap: true},
					{Audit: &yaps.AuditEntry{ListRef: row.Ref, At: now, PermissionID: perm, Role: yaps.RoleOwner, Action: "yap.create", YapID: id}},
				}}
				applied, err := s.WritePrepared(ctx, p)
				if err != nil || !applied {
					b.Errorf("write %d of list %d: applied %v, %v", i, w, applied, err)
					return
				}
				row = next
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if cpu0 != nil {
		var ns int64
		for pid, t := range backendsCPU(b, s, app) {
			ns += t - cpu0[pid]
		}
		b.ReportMetric(float64(ns)/float64(b.N)/1e3, "pg-µs/op")
	}
	b.ReportMetric(float64(bunstore.PreparedPipelines(s))/float64(b.N), "pipelines/op")
}

// backendsCPU returns the CPU time, in ns, of each Postgres backend whose
// connection has application_name app, by PID, or nil when /proc cannot
// tell (a Postgres on another machine).
func backendsCPU(b *testing.B, s *bunstore.Store, app string) map[int]int64 {
	b.Helper()
	rows, err := s.DB().DB.QueryContext(context.Background(),
		"SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	cpu := map[int]int64{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		stat := string(raw)
		f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
		if len(f) < 13 {
			return nil
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		cpu[pid] = (u + k) * 1e7 // 100 ticks per second
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return cpu
}
