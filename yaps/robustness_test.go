package yaps_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := yaps.NewService(yaps.Config{})
	require.ErrorContains(t, err, "Store is required")
	_, err = yaps.NewService(yaps.Config{Store: memstore.New(), DeletedRetention: -1})
	require.ErrorContains(t, err, "DeletedRetention")
	for _, bad := range []string{"notaurl", "ftp://x.example", "https://", "https://u:p@x.example", "https://x.example/?a=1", "https://x.example/#f", "http://x.example:port"} {
		_, err = yaps.NewService(yaps.Config{Store: memstore.New(), PublicURL: bad})
		require.ErrorContains(t, err, "PublicURL", bad)
	}
	for _, bad := range []string{"/a b", "/v1?x", "/api//v1", "/api/../v1", "/"} {
		_, err = yaps.NewService(yaps.Config{Store: memstore.New(), Prefix: bad})
		require.ErrorContains(t, err, "prefix", bad)
	}
	for _, good := range []string{"http://127.0.0.1:4736", "https://x.example/base/"} {
		s, err := yaps.NewService(yaps.Config{Store: memstore.New(), PublicURL: good, PurgeInterval: -1})
		require.NoError(t, err, good)
		require.NoError(t, s.Close())
	}
	c := yaps.Config{PublicURL: "https://x.example/", Prefix: "v1/"}.WithDefaults()
	require.Equal(t, "https://x.example", c.PublicURL)
	require.Equal(t, "/v1", c.Prefix)
	require.Equal(t, 30*24*time.Hour, c.DeletedRetention)
	require.Equal(t, 200, c.CompactAfter)
	require.NotNil(t, c.Limiter)
	require.NotNil(t, c.Render)
	s, err := yaps.NewService(yaps.Config{Store: memstore.New(), PublicURL: "https://x.example", Prefix: "/v1"})
	require.NoError(t, err)
	cl, err := s.CreateList(t.Context(), yaps.CreateListInput{})
	require.NoError(t, err)
	require.Equal(t, "https://x.example/v1/lists/"+cl.List.Ref, cl.APIBase)
	require.Equal(t, cl.APIBase+"?k="+cl.OwnerCode, cl.SliceURL)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}

func TestRenderJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	loc, title := "Park", "Picnic"
	b, err := yaps.RenderJSON(&yaps.Yap{ID: "e", ListRef: "L", Kind: yaps.KindEvent, CreatedAt: at, UpdatedAt: at,
		Title: &title, StartsAt: &at, Location: &loc})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"e","listId":"L","kind":"event","createdAt":"2026-01-02T03:04:05.006Z",
		"updatedAt":"2026-01-02T03:04:05.006Z","deletedAt":null,"title":"Picnic",
		"startsAt":"2026-01-02T03:04:05.006Z","endsAt":null,"location":"Park"}`, string(b))
	b, err = yaps.RenderJSON(&yaps.Yap{ID: "n", ListRef: "L", Kind: yaps.KindNote, CreatedAt: at, UpdatedAt: at, Body: "b"})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"n","listId":"L","kind":"note","createdAt":"2026-01-02T03:04:05.006Z",
		"updatedAt":"2026-01-02T03:04:05.006Z","deletedAt":null,"title":null,"body":"b","tags":[]}`, string(b))
	b, err = yaps.RenderJSON(&yaps.List{Ref: "L", Title: "T", Kind: yaps.KindTask, CreatedAt: at, UpdatedAt: at, DocVersion: 3})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, "T", m["name"])
	require.Equal(t, "T", m["title"])
	require.Nil(t, m["archivedAt"])
	require.EqualValues(t, 3, m["docVersion"])
}

func TestDocCacheEviction(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]func(*yaps.Config){
		"size":   func(c *yaps.Config) { c.DocCacheSize, c.DocCacheGrace = 2, -1 },
		"memory": func(c *yaps.Config) { c.DocCacheMemory, c.DocCacheGrace = 1, -1 }, // every document unloads after use
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, cfg)
			var owners []*yaps.Actor
			var ids []string
			for i := range 5 {
				a := e.list()
				y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(fmt.Sprint(i)), "", nil)
				require.NoError(t, err)
				owners, ids = append(owners, a), append(ids, y.ID)
			}
			for round := range 3 {
				for i, a := range owners {
					y, err := e.svc.UpdateYap(e.ctx, a, ids[i], yaps.YapFields{Content: yaps.Set(fmt.Sprint(i, "-", round))}, "")
					require.NoError(t, err)
					require.Equal(t, fmt.Sprint(i, "-", round), y.Content)
					d := docOf(t, e, a)
					require.Equal(t, y.Content, text(t, ymap(t, d, ids[i]), "content").String())
				}
			}
		})
	}
}

func TestReloadAfterCompactionByAnotherProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("a"), "", nil)
	require.NoError(t, err)
	s2, err := yaps.NewService(yaps.Config{Store: e.store, Now: e.clock.Now, PurgeInterval: -1})
	require.NoError(t, err)
	defer s2.Close()
	for _, c := range []string{"ab", "abc", "abcd"} {
		_, err = s2.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set(c)}, "")
		require.NoError(t, err)
	}
	require.NoError(t, s2.CompactNow(e.ctx, a.List.Ref))
	// Process 1 still holds seq 2; the updates after it were compacted away.
	got, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("abcde")}, "")
	require.NoError(t, err)
	require.Equal(t, "abcde", got.Content)
	require.Equal(t, "abcde", text(t, ymap(t, docOf(t, e, a), y.ID), "content").String())
}

// flakyStore fails PutYap while fail is set, after the document was edited.
type flakyStore struct {
	yaps.Store
	fail atomic.Bool
}

type flakyTx struct {
	yaps.Tx
	s *flakyStore
}

func (f *flakyStore) Update(ctx context.Context, ref string, fn func(yaps.Tx) error) error {
	return f.Store.Update(ctx, ref, func(tx yaps.Tx) error { return fn(&flakyTx{tx, f}) })
}

func (t *flakyTx) PutYap(y *yaps.Yap) error {
	if t.s.fail.Load() {
		return errors.New("disk on fire")
	}
	return t.Tx.PutYap(y)
}

func TestFailedWriteLeavesNoTrace(t *testing.T) {
	t.Parallel()
	fs := &flakyStore{Store: memstore.New()}
	e := newEnv(t, func(c *yaps.Config) { c.Store = fs })
	e.store = fs
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("before"), "", nil)
	require.NoError(t, err)
	fs.fail.Store(true)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("lost")}, "")
	requireCode(t, yaps.EINTERNAL, err)
	require.Equal(t, "internal server error", yaps.ErrorMessage(err))
	p := newPeer(t, e, a)
	require.Error(t, p.send(func(d *yjs.Doc) { text(t, ymap(t, d, y.ID), "content").Insert(0, "x", nil) }))
	require.Empty(t, p.sync(), "nothing is emitted for a failed write")
	fs.fail.Store(false)
	// The cached document was dropped: the next read shows the store's state.
	d := docOf(t, e, a)
	require.Equal(t, "before", text(t, ymap(t, d, y.ID), "content").String())
	got, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("after")}, "")
	require.NoError(t, err)
	require.Equal(t, "after", got.Content)
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	require.EqualValues(t, 3, l.DocVersion)
}

// failingStore fails the next AppendAudit when armed, after the document
// was changed in memory, so the write drops its cached document.
type failingStore struct {
	yaps.Store
	mu  sync.Mutex
	arm bool
}

type failingTx struct {
	yaps.Tx
	s *failingStore
}

func (f *failingStore) Update(ctx context.Context, ref string, fn func(tx yaps.Tx) error) error {
	return f.Store.Update(ctx, ref, func(tx yaps.Tx) error { return fn(failingTx{tx, f}) })
}

func (t failingTx) AppendAudit(a *yaps.AuditEntry) error {
	t.s.mu.Lock()
	arm := t.s.arm
	t.s.arm = false
	t.s.mu.Unlock()
	if arm {
		return errors.New("injected failure")
	}
	return t.Tx.AppendAudit(a)
}

// After a failed write drops the cached document, the reload hands the
// rooms the whole state, so what other processes wrote meanwhile reaches
// them.
func TestReloadAfterDropReachesRooms(t *testing.T) {
	t.Parallel()
	e1 := newEnv(t)
	fs := &failingStore{Store: e1.store}
	s2, err := yaps.NewService(yaps.Config{Store: fs, Now: e1.clock.Now, PurgeInterval: -1, PollInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	a := e1.list()
	unpin := s2.Pin(a.List.Ref)
	defer unpin()
	client := yjs.NewDoc()
	full, err := s2.EncodeState(e1.ctx, a.List.Ref, nil)
	require.NoError(t, err)
	require.NoError(t, client.ApplyUpdate(full, nil))
	var mu sync.Mutex
	unsub := s2.Subscribe(func(ev yaps.Event) {
		if ev.Kind == yaps.EventDocUpdate {
			mu.Lock()
			defer mu.Unlock()
			require.NoError(t, client.ApplyUpdate(ev.Update, nil))
		}
	})
	defer unsub()

	// A write on process 2 fails after changing its copy in memory.
	fs.mu.Lock()
	fs.arm = true
	fs.mu.Unlock()
	_, _, err = s2.CreateYap(e1.ctx, a, yaps.KindTask, task("fails"), "", nil)
	require.Error(t, err)
	// Process 1 writes; process 2's room learns of it on the reload.
	y, _, err := e1.svc.CreateYap(e1.ctx, a, yaps.KindTask, task("from 1"), "", nil)
	require.NoError(t, err)
	require.NoError(t, s2.Refresh(e1.ctx, a.List.Ref))
	mu.Lock()
	defer mu.Unlock()
	_, ok := client.GetMap("yaps").Get(y.ID)
	require.True(t, ok, "the room's client got process 1's write")
	require.Len(t, client.GetMap("yaps").Keys(), 1, "and not the failed write")
}
