package yaps_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// budgetLimiter allows limit mutations per key, then refuses until reset
// is called; it counts every Take of the mutation group.
type budgetLimiter struct {
	mu    sync.Mutex
	limit int
	used  map[string]int
	takes int
}

func (l *budgetLimiter) Take(_ context.Context, g yaps.LimitGroup, _ yaps.LimitClass, key string) (yaps.LimitResult, error) {
	if g != yaps.LimitMutation {
		return yaps.LimitResult{Allowed: true, Limit: -1}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.takes++
	if l.used[key] >= l.limit {
		return yaps.LimitResult{Allowed: false, Limit: int64(l.limit), RetryAfter: 30 * time.Second}, nil
	}
	l.used[key]++
	return yaps.LimitResult{Allowed: true, Limit: int64(l.limit), Remaining: int64(l.limit - l.used[key])}, nil
}

func (l *budgetLimiter) counts() (takes int, used map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := map[string]int{}
	for k, v := range l.used {
		u[k] = v
	}
	return l.takes, u
}

func (l *budgetLimiter) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used = map[string]int{}
}

// newNote is an edit that creates the note id.
func newNote(id string) func(d *yjs.Doc) {
	return func(d *yjs.Doc) {
		m := yjs.NewMap()
		m.Set("kind", "note")
		m.Set("body", yjs.NewText("body of "+id))
		d.GetMap("yaps").Set(id, m)
	}
}

// Sync updates are charged one yap mutation per yap they create, delete,
// restore or remove (RULINGS R8), edits within yaps nothing. Once the
// budget is spent, the sender's next update that creates or deletes a yap
// is refused untouched with ERATELIMITED until the hold ends, while its
// edits still pass; a Go caller's own updates (no ClientIP) are never
// charged.
func TestSyncMutationBudget(t *testing.T) {
	t.Parallel()
	lim := &budgetLimiter{limit: 2, used: map[string]int{}}
	e := newEnv(t, func(c *yaps.Config) { c.Limiter = lim })
	owner, y := milkList(t, e)
	ed := e.actor(owner, yaps.RoleEditor)
	ed.ClientIP = "192.0.2.7"
	ref := owner.List.Ref
	d := docOf(t, e, ed)
	apply := func(u yaps.ClientUpdate) error {
		return e.svc.ApplyUpdate(e.ctx, u.Actor, u.Update, u.Origin)
	}
	has := func(id string) bool {
		_, err := e.svc.GetYap(e.ctx, owner, id)
		return err == nil
	}

	// Two creations: within the budget.
	for i := range 2 {
		require.NoError(t, apply(clientUpdate(t, ed, d, "ed", newNote(fmt.Sprint("n", i)))))
	}
	takes, used := lim.counts()
	require.Equal(t, 2, takes)
	require.Equal(t, map[string]int{"ip:192.0.2.7": 2}, used)

	// A typing edit is free.
	require.NoError(t, apply(clientUpdate(t, ed, d, "ed", func(d *yjs.Doc) {
		text(t, ymap(t, d, y.ID), "content").Insert(4, " and eggs", nil)
	})))
	takes, _ = lim.counts()
	require.Equal(t, 2, takes, "an edit within a yap is not charged")

	// The third is stored (what an update does is known once applied),
	// and its charge finds the budget spent: the sender is held.
	require.NoError(t, apply(clientUpdate(t, ed, d, "ed", newNote("n2"))))
	require.True(t, has("n2"))

	// Held: a creation, and a soft delete, are refused untouched.
	for _, edit := range []func(d *yjs.Doc){
		newNote("n3"),
		func(d *yjs.Doc) { ymap(t, d, "n0").Set("deletedAt", yaps.FormatTime(e.clock.Now())) },
	} {
		dd := docOf(t, e, ed)
		before, _, err := e.svc.Snapshot(e.ctx, owner, nil)
		require.NoError(t, err)
		err = apply(clientUpdate(t, ed, dd, "ed", edit))
		requireCode(t, yaps.ERATELIMITED, err)
		var ye *yaps.Error
		require.ErrorAs(t, err, &ye)
		require.Equal(t, 30*time.Second, ye.RetryAfter)
		after, _, err := e.svc.Snapshot(e.ctx, owner, nil)
		require.NoError(t, err)
		require.Equal(t, before, after, "a held update changes nothing")
	}
	require.False(t, has("n3"))
	got, err := e.svc.GetYap(e.ctx, owner, "n0")
	require.NoError(t, err)
	require.Nil(t, got.DeletedAt)

	// Edits still pass while held.
	require.NoError(t, apply(clientUpdate(t, ed, d, "ed", func(d *yjs.Doc) {
		text(t, ymap(t, d, y.ID), "content").Insert(0, "Fresh ", nil)
	})))

	// Another sender is not held; a Go caller (no ClientIP) is never charged.
	other := e.actor(owner, yaps.RoleEditor)
	other.ClientIP = "198.51.100.1"
	require.NoError(t, apply(clientUpdate(t, other, docOf(t, e, other), "other", newNote("o1"))))
	goCaller := e.actor(owner, yaps.RoleEditor)
	takesBefore, _ := lim.counts()
	require.NoError(t, apply(clientUpdate(t, goCaller, docOf(t, e, goCaller), "go", newNote("g1"))))
	takes, _ = lim.counts()
	require.Equal(t, takesBefore, takes)

	// Once the hold ends (and the window reset), the refused creation is
	// applied when sent again, and charged.
	lim.reset()
	e.clock.Advance(31 * time.Second)
	dd := docOf(t, e, ed)
	require.NoError(t, apply(clientUpdate(t, ed, dd, "ed", newNote("n3"))))
	require.True(t, has("n3"))
	_, used = lim.counts()
	require.Equal(t, 1, used["ip:192.0.2.7"])

	// In a batch, the held update alone is refused; the others stand.
	lim.mu.Lock()
	lim.used["ip:192.0.2.7"] = 2
	lim.mu.Unlock()
	require.NoError(t, apply(clientUpdate(t, ed, docOf(t, e, ed), "ed", newNote("n4")))) // charged over: held
	errs := e.svc.ApplyUpdates(e.ctx, ref, []yaps.ClientUpdate{
		clientUpdate(t, ed, docOf(t, e, ed), "ed", newNote("n5")),
		clientUpdate(t, other, docOf(t, e, other), "other", newNote("o2")),
	})
	requireCode(t, yaps.ERATELIMITED, errs[0])
	require.NoError(t, errs[1])
	require.False(t, has("n5"))
	require.True(t, has("o2"))
}
