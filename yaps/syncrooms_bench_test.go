package yaps_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// BenchmarkSyncRooms measures the service's side of the sync benchmark
// (yaps bench sync, 50 rooms × 4 clients) without sockets: lists on a
// SQLite file, each written by 4 clients that each type into a task yap of
// their own, one room batch (Service.ApplyUpdates of one update per client)
// at a time per list, every list from its own goroutine so the store's
// group commit batches them as the server's rooms are. One op is one
// client update.
func BenchmarkSyncRooms(b *testing.B) {
	const lists, clients = 16, 4
	ctx := context.Background()
	st, err := bunstore.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "yaps.db"))
	require.NoError(b, err)
	defer st.Close()
	svc, err := yaps.NewService(yaps.Config{Store: st, PurgeInterval: -1})
	require.NoError(b, err)
	defer svc.Close()

	type room struct {
		ref     string
		actors  [clients]*yaps.Actor
		updates [clients][][]byte
	}
	rounds := b.N/(lists*clients) + 1
	rooms := make([]*room, lists)
	for i := range rooms {
		cl, err := svc.CreateList(ctx, yaps.CreateListInput{Title: yaps.Set(fmt.Sprintf("room %d", i))})
		require.NoError(b, err)
		owner, err := svc.Authenticate(ctx, cl.List.Ref, cl.OwnerCode)
		require.NoError(b, err)
		rm := &room{ref: cl.List.Ref}
		for c := range clients {
			p, err := svc.IssuePermission(ctx, owner, yaps.RoleEditor, "", nil)
			require.NoError(b, err)
			rm.actors[c], err = svc.Authenticate(ctx, rm.ref, p.Code)
			require.NoError(b, err)
			// The client's updates: a marker typed at the end of a task's
			// content each round, a new task every 100 rounds (as the
			// sync benchmark's 50, it stays under the content limit).
			var text *yjs.Text
			var d *yjs.Doc
			var last []byte
			for n := range rounds {
				if n%100 == 0 {
					y, _, err := svc.CreateYap(ctx, rm.actors[c], yaps.KindTask,
						yaps.YapFields{Content: yaps.Set(""), Status: yaps.Set(yaps.StatusOpen)}, "", nil)
					require.NoError(b, err)
					if d == nil {
						d = yjs.NewDoc()
						d.OnUpdate(func(u []byte, _ any) { last = u })
					}
					state, err := svc.EncodeState(ctx, rm.ref, d.EncodeStateVector())
					require.NoError(b, err)
					require.NoError(b, d.ApplyUpdate(state, nil))
					v, _ := d.GetMap("yaps").Get(y.ID)
					content, _ := v.(*yjs.Map).Get("content")
					text = content.(*yjs.Text)
				}
				text.Insert(text.Len(), fmt.Sprintf("~%d.%d~", c, n), nil)
				rm.updates[c] = append(rm.updates[c], last)
			}
		}
		rooms[i] = rm
	}

	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	var wg sync.WaitGroup
	for _, rm := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ups := make([]yaps.ClientUpdate, clients)
			for n := range rounds {
				for c := range clients {
					ups[c] = yaps.ClientUpdate{Actor: rm.actors[c], Update: rm.updates[c][n]}
				}
				for _, err := range svc.ApplyUpdates(ctx, rm.ref, ups) {
					if err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	// ns/op counts the rounds every list made, so one op is one update.
	n := float64(rounds * lists * clients)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/update")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/n, "cpu-ns/update")
}
