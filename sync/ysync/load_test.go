package ysync

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// TestLoadRelay is an in-process load run: R rooms × C clients, each client
// appending U short markers to its own task's content over sync, every
// update persisted to SQLite and relayed to the room. Opt-in:
//
//	YAPS_TEST_LOAD=1 go test -run TestLoadRelay -v ./sync/ysync
//
// It reports delivered updates per second (deliveries to the other
// clients of the room), p50/p99 delivery latency and process CPU per
// delivered update. The CPU includes the Go clients, which run in the same
// process; `yaps bench sync` is the place for server-only figures.
func TestLoadRelay(t *testing.T) {
	if os.Getenv("YAPS_TEST_LOAD") == "" {
		t.Skip("set YAPS_TEST_LOAD=1 to run the sync load test")
	}
	for _, sc := range []struct{ rooms, clients, updates int }{{1, 20, 100}, {50, 4, 50}} {
		t.Run(fmt.Sprintf("%dx%dx%d", sc.rooms, sc.clients, sc.updates), func(t *testing.T) {
			runLoad(t, sc.rooms, sc.clients, sc.updates)
		})
	}
}

type loadClient struct {
	idx  int
	ws   *websocket.Conn
	doc  *yjs.Doc
	yap  string
	sent []int64 // send time (unix nanos) per update
}

func runLoad(t *testing.T, rooms, clients, updates int) {
	st := newStack(t, Config{MessagesPerSecond: -1})
	var all []*loadClient
	byIdx := map[int]*loadClient{}
	for r := 0; r < rooms; r++ {
		ref, owner := st.newList()
		var room []*loadClient
		for c := 0; c < clients; c++ {
			y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "-", "status": "open"}, 201)
			ws, resp, err := websocket.DefaultDialer.Dial(st.wsURL(ref, owner), nil)
			require.NoError(t, err)
			resp.Body.Close()
			lc := &loadClient{idx: len(all), ws: ws, doc: yjs.NewDoc(), yap: y["id"].(string), sent: make([]int64, updates)}
			all = append(all, lc)
			byIdx[lc.idx] = lc
			room = append(room, lc)
		}
		// Initial sync of every client.
		for _, lc := range room {
			require.NoError(t, lc.ws.WriteMessage(websocket.BinaryMessage, AppendSyncStep1(nil, lc.doc.EncodeStateVector())))
			for {
				_, frame, err := lc.ws.ReadMessage()
				require.NoError(t, err)
				m, err := DecodeMessage(frame)
				require.NoError(t, err)
				if m.Type == MsgSync && m.SyncType == SyncStep2 {
					require.NoError(t, lc.doc.ApplyUpdate(m.Payload, nil))
					break
				}
			}
		}
	}
	want := int64(rooms * updates * clients * (clients - 1))
	var delivered atomic.Int64
	seen := make([]atomic.Int32, len(all)*updates)
	var latMu sync.Mutex
	lats := make([]time.Duration, 0, want)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, lc := range all {
		wg.Add(1)
		go func() { // reader: count other clients' markers
			defer wg.Done()
			local := make([]time.Duration, 0, updates*clients)
			defer func() {
				latMu.Lock()
				lats = append(lats, local...)
				latMu.Unlock()
			}()
			for {
				_, frame, err := lc.ws.ReadMessage()
				if err != nil {
					if ce, ok := err.(*websocket.CloseError); ok {
						t.Logf("client %d closed: %v", lc.idx, ce)
					}
					return
				}
				now := time.Now().UnixNano()
				for rest := frame; ; {
					i := bytes.IndexByte(rest, '~')
					if i < 0 {
						break
					}
					rest = rest[i+1:]
					j := bytes.IndexByte(rest, '~')
					if j < 0 {
						break
					}
					c, u, ok := parseMarker(rest[:j])
					if !ok || c >= len(all) || u >= updates {
						rest = rest[j:] // a '~' byte of the binary encoding: resync on the next one
						continue
					}
					rest = rest[j+1:]
					if c == lc.idx {
						continue
					}
					src := byIdx[c]
					if sent := atomic.LoadInt64(&src.sent[u]); sent > 0 {
						local = append(local, time.Duration(now-sent))
					}
					seen[c*updates+u].Add(1)
					if delivered.Add(1) == want {
						close(done)
					}
				}
			}
		}()
	}

	var ru0 syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru0))
	start := time.Now()
	var sendWG sync.WaitGroup
	for _, lc := range all {
		sendWG.Add(1)
		go func() { // writer: U updates as fast as the socket takes them
			defer sendWG.Done()
			var out [][]byte
			un := lc.doc.OnUpdate(func(u []byte, _ any) { out = append(out, u) })
			defer un()
			for u := 0; u < updates; u++ {
				lc.doc.Transact(func(*yjs.Transaction) {
					v, _ := lc.doc.GetMap("yaps").Get(lc.yap)
					f, _ := v.(*yjs.Map).Get("content")
					txt := f.(*yjs.Text)
					txt.Insert(txt.Len(), "~"+strconv.Itoa(lc.idx)+"."+strconv.Itoa(u)+"~", nil)
				}, nil)
				atomic.StoreInt64(&lc.sent[u], time.Now().UnixNano())
				for _, upd := range out {
					if err := lc.ws.WriteMessage(websocket.BinaryMessage, AppendUpdate(nil, upd)); err != nil {
						return
					}
				}
				out = out[:0]
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
	}
	elapsed := time.Since(start)
	var ru1 syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru1))
	sendWG.Wait()
	for _, lc := range all {
		lc.ws.Close()
	}
	wg.Wait()
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	got := delivered.Load()
	slices.Sort(lats)
	pct := func(p float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(len(lats)-1, int(p*float64(len(lats))))]
	}
	t.Logf("%d rooms × %d clients × %d updates: %d/%d deliveries in %v = %.0f/s; latency p50 %v p99 %v; process CPU %v = %.1f µs per delivery (clients included)",
		rooms, clients, updates, got, want, elapsed.Round(time.Millisecond), float64(got)/elapsed.Seconds(),
		pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), cpu.Round(time.Millisecond),
		float64(cpu.Microseconds())/float64(max(got, 1)))
	if got != want {
		for i := range seen {
			if n := seen[i].Load(); n != int32(clients-1) {
				t.Logf("update %d of client %d reached %d clients", i%updates, i/updates, n)
			}
		}
	}
	require.Equal(t, want, got, "every update reaches every other client of its room")
}

func parseMarker(b []byte) (client, update int, ok bool) {
	i := bytes.IndexByte(b, '.')
	if i < 0 {
		return 0, 0, false
	}
	c, err1 := strconv.Atoi(string(b[:i]))
	u, err2 := strconv.Atoi(string(b[i+1:]))
	return c, u, err1 == nil && err2 == nil && c >= 0 && u >= 0
}
