package yaps_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// clientUpdate makes an edit on d and returns it as a ClientUpdate of a.
func clientUpdate(t *testing.T, a *yaps.Actor, d *yjs.Doc, origin any, edit func(d *yjs.Doc)) yaps.ClientUpdate {
	t.Helper()
	var u []byte
	unsub := d.OnUpdate(func(b []byte, _ any) { u = b })
	d.Transact(func(*yjs.Transaction) { edit(d) }, nil)
	unsub()
	require.NotNil(t, u, "the edit changed nothing")
	return yaps.ClientUpdate{Actor: a, Update: u, Origin: origin}
}

// docEvents records the EventDocUpdates of ref.
func docEvents(t *testing.T, e *env, ref string) func() []yaps.Event {
	t.Helper()
	var mu sync.Mutex
	var evs []yaps.Event
	unsub := e.svc.Subscribe(func(ev yaps.Event) {
		if ev.Kind == yaps.EventDocUpdate && ev.ListRef == ref {
			mu.Lock()
			evs = append(evs, ev)
			mu.Unlock()
		}
	})
	t.Cleanup(unsub)
	return func() []yaps.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]yaps.Event(nil), evs...)
	}
}

func docVersion(t *testing.T, e *env, ref string) int64 {
	t.Helper()
	l, err := e.store.List(e.ctx, ref)
	require.NoError(t, err)
	return l.DocVersion
}

// milkList creates a list with one task, "Milk", and returns its owner and
// the task.
func milkList(t *testing.T, e *env) (*yaps.Actor, *yaps.Yap) {
	t.Helper()
	owner := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("Milk"), "", nil)
	require.NoError(t, err)
	return owner, y
}

func TestApplyUpdatesOneWrite(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		owner, y := milkList(t, e)
		editor := e.actor(owner, yaps.RoleEditor)
		viewer := e.actor(owner, yaps.RoleViewer)
		other := e.list()
		ref := owner.List.Ref
		v0 := docVersion(t, e, ref)
		events := docEvents(t, e, ref)

		ups := []yaps.ClientUpdate{
			clientUpdate(t, owner, docOf(t, e, owner), "owner", func(d *yjs.Doc) {
				text(t, ymap(t, d, y.ID), "content").Insert(4, " and bread", nil)
			}),
			clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", "done")
			}),
			clientUpdate(t, viewer, docOf(t, e, viewer), "viewer", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", "open")
			}),
			clientUpdate(t, nil, docOf(t, e, owner), "nobody", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", "open")
			}),
			clientUpdate(t, other, docOf(t, e, owner), "other list", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", "open")
			}),
		}
		errs := e.svc.ApplyUpdates(e.ctx, ref, ups)
		require.Len(t, errs, len(ups))
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		requireCode(t, yaps.EFORBIDDEN, errs[2])
		requireCode(t, yaps.EUNAUTHORIZED, errs[3])
		requireCode(t, yaps.EFORBIDDEN, errs[4])

		got, err := e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		require.Equal(t, "Milk and bread", got.Content)
		require.Equal(t, yaps.StatusDone, got.Status)
		require.Equal(t, v0+2, docVersion(t, e, ref))

		// Both updates were stored by one write: its events say so.
		evs := events()
		require.Len(t, evs, 2)
		require.Equal(t, "owner", evs[0].Origin)
		require.True(t, evs[0].More)
		require.Equal(t, "editor", evs[1].Origin)
		require.False(t, evs[1].More)
		require.Equal(t, []int64{v0 + 1, v0 + 2}, []int64{evs[0].Seq, evs[1].Seq})
		require.Equal(t, ups[0].Update, evs[0].Update)

		// A fresh client sees both edits.
		d := docOf(t, e, owner)
		require.Equal(t, "Milk and bread", text(t, ymap(t, d, y.ID), "content").String())
		st, _ := ymap(t, d, y.ID).Get("status")
		require.Equal(t, "done", st)
	})
}

// An invalid update is compensated back to what the earlier updates of the
// same batch left, never to the state before the batch: that would undo
// another client's valid edit.
func TestApplyUpdatesCompensatesAgainstEarlierUpdates(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		owner, y := milkList(t, e)
		n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("note")}, "", nil)
		require.NoError(t, err)
		editor := e.actor(owner, yaps.RoleEditor)
		agent := e.actor(owner, yaps.RoleAgent)
		ref := owner.List.Ref
		v0 := docVersion(t, e, ref)
		events := docEvents(t, e, ref)

		// Three clients edit concurrently, each on the document as it was.
		ups := []yaps.ClientUpdate{
			clientUpdate(t, owner, docOf(t, e, owner), "owner", func(d *yjs.Doc) {
				text(t, ymap(t, d, y.ID), "content").Insert(4, " and bread", nil)
				d.GetMap("list").Set("title", "Shopping")
				text(t, ymap(t, d, n.ID), "body").Insert(4, " kept", nil)
			}),
			clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", "later") // invalid
			}),
			clientUpdate(t, agent, docOf(t, e, agent), "agent", func(d *yjs.Doc) {
				text(t, ymap(t, d, n.ID), "body").Insert(0, "x", nil) // agents may not edit notes
				ymap(t, d, y.ID).Set("priority", "urgent")            // invalid value
			}),
		}
		errs := e.svc.ApplyUpdates(e.ctx, ref, ups)
		require.Equal(t, []error{nil, nil, nil}, errs)

		got, err := e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		require.Equal(t, "Milk and bread", got.Content)
		require.Equal(t, yaps.StatusOpen, got.Status)
		gotN, err := e.svc.GetYap(e.ctx, owner, n.ID)
		require.NoError(t, err)
		require.Equal(t, "note kept", gotN.Body)
		l, err := e.store.List(e.ctx, ref)
		require.NoError(t, err)
		require.Equal(t, "Shopping", l.Title)

		// The three updates, each invalid one followed by its compensation,
		// in one write.
		evs := events()
		var origins []any
		for i, ev := range evs {
			origins = append(origins, ev.Origin)
			require.Equal(t, i < len(evs)-1, ev.More, "event %d", i)
		}
		require.Equal(t, []any{"owner", "editor", nil, "agent", nil}, origins)
		require.Equal(t, v0+5, docVersion(t, e, ref))

		d := docOf(t, e, owner)
		require.Equal(t, "Milk and bread", text(t, ymap(t, d, y.ID), "content").String())
		require.Equal(t, "note kept", text(t, ymap(t, d, n.ID), "body").String())
		title, _ := d.GetMap("list").Get("title")
		require.Equal(t, "Shopping", title)
	})
}

// When the batch as a whole cannot be written, each update is applied on
// its own and gets its own answer.
func TestApplyUpdatesFallsBackOneByOne(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		owner, y := milkList(t, e)
		editor := e.actor(owner, yaps.RoleEditor)
		revoked := e.actor(owner, yaps.RoleEditor)
		require.NoError(t, e.svc.RevokePermission(e.ctx, owner, revoked.Permission.ID))
		ref := owner.List.Ref
		v0 := docVersion(t, e, ref)

		ups := []yaps.ClientUpdate{
			clientUpdate(t, owner, docOf(t, e, owner), "owner", func(d *yjs.Doc) {
				text(t, ymap(t, d, y.ID), "content").Insert(4, " and bread", nil)
			}),
			{Actor: editor, Update: []byte{1, 2, 3, 4, 5}, Origin: "malformed"},
			clientUpdate(t, revoked, docOf(t, e, owner), "revoked", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", "done")
			}),
			clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("priority", "high")
			}),
		}
		errs := e.svc.ApplyUpdates(e.ctx, ref, ups)
		require.NoError(t, errs[0])
		requireCode(t, yaps.EINVALID, errs[1])
		requireCode(t, yaps.EUNAUTHORIZED, errs[2])
		require.NoError(t, errs[3])

		got, err := e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		require.Equal(t, "Milk and bread", got.Content)
		require.Equal(t, yaps.StatusOpen, got.Status)
		require.NotNil(t, got.Priority)
		require.Equal(t, yaps.PriorityHigh, *got.Priority)
		require.Equal(t, v0+2, docVersion(t, e, ref))
	})
}

// The yaps a batch leaves are projected as its last update touching each
// left them: one an earlier update validated and a later one removed is
// deleted, one edited twice holds both edits.
func TestApplyUpdatesProjectsWhatTheLastUpdateLeft(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		owner, y := milkList(t, e)
		z, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("Eggs"), "", nil)
		require.NoError(t, err)
		editor := e.actor(owner, yaps.RoleEditor)
		ref := owner.List.Ref

		ownerDoc, editorDoc := docOf(t, e, owner), docOf(t, e, editor)
		ups := []yaps.ClientUpdate{
			clientUpdate(t, owner, ownerDoc, "owner", func(d *yjs.Doc) {
				text(t, ymap(t, d, y.ID), "content").Insert(4, " and bread", nil)
				text(t, ymap(t, d, z.ID), "content").Insert(4, " (6)", nil)
			}),
			clientUpdate(t, editor, editorDoc, "editor", func(d *yjs.Doc) {
				d.GetMap("yaps").Delete(y.ID)
			}),
			clientUpdate(t, owner, ownerDoc, "owner again", func(d *yjs.Doc) {
				text(t, ymap(t, d, z.ID), "content").Insert(0, "Brown ", nil)
			}),
		}
		require.Equal(t, []error{nil, nil, nil}, e.svc.ApplyUpdates(e.ctx, ref, ups))

		_, err = e.svc.GetYap(e.ctx, owner, y.ID)
		requireCode(t, yaps.ENOTFOUND, err)
		got, err := e.svc.GetYap(e.ctx, owner, z.ID)
		require.NoError(t, err)
		require.Equal(t, "Brown Eggs (6)", got.Content)
		// The store's projection, not only the service's cache.
		page, err := e.store.Yaps(e.ctx, ref, yaps.YapQuery{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, "Brown Eggs (6)", page[0].Content)
	})
}

// After every sync write, what the service projected equals reading the
// document afresh: typing reads again only the members it changed
// (rereadYap), and a random mix of edits, valid and not, must never leave
// the projection behind the document.
func TestSyncProjectionFollowsDoc(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		owner, y := milkList(t, e)
		n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("note"), Tags: yaps.Set([]string{"a"})}, "", nil)
		require.NoError(t, err)
		editor := e.actor(owner, yaps.RoleEditor)
		ref := owner.List.Ref
		docs := []*yjs.Doc{docOf(t, e, owner), docOf(t, e, editor)}
		actors := []*yaps.Actor{owner, editor}
		rnd := rand.New(rand.NewPCG(1, 2))
		edits := []func(d *yjs.Doc){
			func(d *yjs.Doc) {
				tx := text(t, ymap(t, d, y.ID), "content")
				tx.Insert(rnd.IntN(tx.Len()+1), "ab", nil)
			},
			func(d *yjs.Doc) {
				if tx := text(t, ymap(t, d, y.ID), "content"); tx.Len() > 1 {
					tx.Delete(rnd.IntN(tx.Len()-1), 1)
				}
			},
			func(d *yjs.Doc) { tx := text(t, ymap(t, d, n.ID), "body"); tx.Insert(tx.Len(), "x\n", nil) },
			func(d *yjs.Doc) { tx := text(t, ymap(t, d, y.ID), "content"); tx.Insert(0, "\n", nil) }, // invalid: one line
			func(d *yjs.Doc) { ymap(t, d, y.ID).Set("status", []string{"open", "done", "later"}[rnd.IntN(3)]) },
			func(d *yjs.Doc) { v, _ := ymap(t, d, n.ID).Get("tags"); v.(*yjs.Array).Push([]any{"t"}) },
			func(d *yjs.Doc) { v, _ := ymap(t, d, n.ID).Get("tags"); v.(*yjs.Array).Push([]any{float64(1)}) }, // invalid
			func(d *yjs.Doc) {
				if tx := text(t, ymap(t, d, n.ID), "body"); tx.Len() > 0 {
					tx.Format(0, 1, map[string]any{"bold": true})
				}
			},
		}
		for round := range 60 {
			var ups []yaps.ClientUpdate
			for c := range docs {
				if rnd.IntN(3) == 0 {
					continue
				}
				var u []byte
				unsub := docs[c].OnUpdate(func(b []byte, _ any) { u = b })
				docs[c].Transact(func(*yjs.Transaction) { edits[rnd.IntN(len(edits))](docs[c]) }, nil)
				unsub()
				if u != nil {
					ups = append(ups, yaps.ClientUpdate{Actor: actors[c], Update: u, Origin: c})
				}
			}
			if len(ups) == 0 {
				continue
			}
			for _, err := range e.svc.ApplyUpdates(e.ctx, ref, ups) {
				require.NoError(t, err)
			}
			require.Empty(t, yaps.ViewMatchesDoc(e.svc, ref), "round %d", round)
			// The clients catch up with each other and the server's fixes.
			for c := range docs {
				snap, _, err := e.svc.Snapshot(e.ctx, owner, nil)
				require.NoError(t, err)
				require.NoError(t, docs[c].ApplyUpdate(snap, nil))
			}
		}
	})
}

// updateCalls wraps a store and records, for every AppendUpdate(s) call,
// how many updates it appended.
type updateCalls struct {
	yaps.Store
	mu    sync.Mutex
	calls []int
}

func (s *updateCalls) Update(ctx context.Context, ref string, fn func(tx yaps.Tx) error) error {
	return s.Store.Update(ctx, ref, func(tx yaps.Tx) error { return fn(&countingTx{Tx: tx, s: s}) })
}

func (s *updateCalls) take() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

type countingTx struct {
	yaps.Tx
	s *updateCalls
}

func (t *countingTx) AppendUpdate(u []byte) (int64, error) {
	t.s.mu.Lock()
	t.s.calls = append(t.s.calls, 1)
	t.s.mu.Unlock()
	return t.Tx.AppendUpdate(u)
}

func (t *countingTx) AppendUpdates(us [][]byte) (int64, error) {
	t.s.mu.Lock()
	t.s.calls = append(t.s.calls, len(us))
	t.s.mu.Unlock()
	return t.Tx.AppendUpdates(us)
}

// A batch of sync updates reaches the store in one AppendUpdates call (one
// row in bunstore), on the ordinary write path and written ahead.
func TestApplyUpdatesAppendedTogether(t *testing.T) {
	t.Parallel()
	st := &updateCalls{Store: memstore.New()}
	e := newEnvOn(t, st)
	owner, y := milkList(t, e)
	editor := e.actor(owner, yaps.RoleEditor)
	ref := owner.List.Ref
	for round, want := range []string{"Milk and bread", "Milk and bread and eggs"} {
		st.take()
		ahead := yaps.WriteAheads(e.svc)
		v0 := docVersion(t, e, ref)
		add := []string{" and bread", " and eggs"}[round]
		ups := []yaps.ClientUpdate{
			clientUpdate(t, owner, docOf(t, e, owner), "owner", func(d *yjs.Doc) {
				txt := text(t, ymap(t, d, y.ID), "content")
				txt.Insert(txt.Len(), add, nil)
			}),
			clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", []string{"done", "open"}[round])
			}),
		}
		for i, err := range e.svc.ApplyUpdates(e.ctx, ref, ups) {
			require.NoError(t, err, "round %d, update %d", round, i)
		}
		require.Equal(t, []int{2}, st.take(), "round %d", round)
		require.Equal(t, v0+2, docVersion(t, e, ref))
		got, err := e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		require.Equal(t, want, got.Content)
		if round == 1 {
			require.Equal(t, ahead+1, yaps.WriteAheads(e.svc), "the second round was written ahead")
		}
	}
}

// Another process catches up through update rows that hold several
// updates (one write's), before and after a compaction, and what it loads
// is what the writing process holds.
func TestApplyUpdatesOtherProcessReadsGroupedRows(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		owner, y := milkList(t, e)
		editor := e.actor(owner, yaps.RoleEditor)
		ref := owner.List.Ref
		s2 := e.secondProcess()
		_, err := s2.GetYap(e.ctx, owner, y.ID) // s2 has the list loaded
		require.NoError(t, err)

		batch := func(add, status string) {
			t.Helper()
			ups := []yaps.ClientUpdate{
				clientUpdate(t, owner, docOf(t, e, owner), "owner", func(d *yjs.Doc) {
					txt := text(t, ymap(t, d, y.ID), "content")
					txt.Insert(txt.Len(), add, nil)
				}),
				clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
					ymap(t, d, y.ID).Set("status", status)
				}),
			}
			for i, err := range e.svc.ApplyUpdates(e.ctx, ref, ups) {
				require.NoError(t, err, i)
			}
		}
		same := func(want, status string) {
			t.Helper()
			require.NoError(t, s2.Refresh(e.ctx, ref))
			got, err := s2.GetYap(e.ctx, owner, y.ID)
			require.NoError(t, err)
			require.Equal(t, want, got.Content)
			require.Equal(t, yaps.TaskStatus(status), got.Status)
			sv1, err := e.svc.StateVector(e.ctx, ref)
			require.NoError(t, err)
			sv2, err := s2.StateVector(e.ctx, ref)
			require.NoError(t, err)
			require.Equal(t, sv1, sv2)
		}
		batch(" and bread", "done")
		batch(" and eggs", "open")
		same("Milk and bread and eggs", "open")
		require.NoError(t, e.svc.CompactNow(e.ctx, ref))
		batch(" and tea", "done")
		same("Milk and bread and eggs and tea", "done")

		// A third process loads the list from the compacted state and the
		// rows after it.
		s3 := e.secondProcess()
		got, err := s3.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		require.Equal(t, "Milk and bread and eggs and tea", got.Content)
	})
}

// A batch that holds an update larger than ApplyUpdates keeps decoded (it
// decodes that one again when it applies it) applies it like the others.
func TestApplyUpdatesLargeUpdate(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		owner, y := milkList(t, e)
		n, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindNote, yaps.YapFields{Body: yaps.Set("note")}, "", nil)
		require.NoError(t, err)
		editor := e.actor(owner, yaps.RoleEditor)
		long := strings.Repeat("long line of text ", 400) // 7,200 bytes
		ups := []yaps.ClientUpdate{
			clientUpdate(t, owner, docOf(t, e, owner), "owner", func(d *yjs.Doc) {
				text(t, ymap(t, d, n.ID), "body").Insert(4, long, nil)
			}),
			clientUpdate(t, editor, docOf(t, e, editor), "editor", func(d *yjs.Doc) {
				ymap(t, d, y.ID).Set("status", "done")
			}),
		}
		require.Greater(t, len(ups[0].Update), 4<<10)
		for i, err := range e.svc.ApplyUpdates(e.ctx, owner.List.Ref, ups) {
			require.NoError(t, err, "update %d", i)
		}
		got, err := e.svc.GetYap(e.ctx, owner, n.ID)
		require.NoError(t, err)
		require.Equal(t, "note"+long, got.Body)
		got, err = e.svc.GetYap(e.ctx, owner, y.ID)
		require.NoError(t, err)
		require.Equal(t, yaps.StatusDone, got.Status)
	})
}
