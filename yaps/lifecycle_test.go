package yaps_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func hash(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func TestIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := yaps.CreateListInput{Title: yaps.Set("x"), IdempotencyKey: "k1", RequestHash: hash("a"), ClientIP: "1.1.1.1"}
	first, err := e.svc.CreateList(e.ctx, in)
	require.NoError(t, err)
	require.Nil(t, first.Replay)
	again, err := e.svc.CreateList(e.ctx, in)
	require.NoError(t, err)
	require.NotNil(t, again.Replay)
	require.Nil(t, again.List)
	require.Equal(t, 201, again.Replay.Status)
	var body yaps.CreatedListJSON
	require.NoError(t, json.Unmarshal(again.Replay.Body, &body))
	require.Equal(t, first.List.Ref, body.Ref)
	require.Equal(t, first.OwnerCode, body.OwnerCode)
	require.Equal(t, "x", body.List.Name)
	// Same key, other body: 400. Same key from another IP: a new list.
	in2 := in
	in2.RequestHash = hash("b")
	_, err = e.svc.CreateList(e.ctx, in2)
	requireCode(t, yaps.EINVALID, err)
	in3 := in
	in3.ClientIP = "2.2.2.2"
	other, err := e.svc.CreateList(e.ctx, in3)
	require.NoError(t, err)
	require.Nil(t, other.Replay)
	require.NotEqual(t, first.List.Ref, other.List.Ref)

	a, err := e.svc.Authenticate(e.ctx, first.List.Ref, first.OwnerCode)
	require.NoError(t, err)
	y, rep, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("t"), "y1", hash("t"))
	require.NoError(t, err)
	require.Nil(t, rep)
	y2, rep, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("t"), "y1", hash("t"))
	require.NoError(t, err)
	require.Nil(t, y2)
	require.NotNil(t, rep)
	var yb map[string]any
	require.NoError(t, json.Unmarshal(rep.Body, &yb))
	require.Equal(t, y.ID, yb["id"])
	require.Equal(t, yaps.FormatTime(y.CreatedAt), yb["createdAt"])
	_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("u"), "y1", hash("u"))
	requireCode(t, yaps.EINVALID, err)
	page, err := e.svc.ListYaps(e.ctx, a, "", 0, false)
	require.NoError(t, err)
	require.Len(t, page.Yaps, 1)
}

func TestCustomRender(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *yaps.Config) {
		c.Render = func(v any) ([]byte, error) { return []byte(fmt.Sprintf("%T", v)), nil }
	})
	in := yaps.CreateListInput{IdempotencyKey: "k", RequestHash: hash("a")}
	_, err := e.svc.CreateList(e.ctx, in)
	require.NoError(t, err)
	again, err := e.svc.CreateList(e.ctx, in)
	require.NoError(t, err)
	require.Equal(t, "*yaps.CreatedList", string(again.Replay.Body))
}

func TestIfMatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	stale := yaps.YapETag(y)
	y2, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("u")}, stale)
	require.NoError(t, err)
	require.NotEqual(t, stale, yaps.YapETag(y2))
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("v")}, stale)
	requireCode(t, yaps.EPRECONDITION, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("v")}, "W/"+yaps.YapETag(y2))
	require.NoError(t, err)

	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	le := yaps.ListETag(l)
	// A yap edit does not change the list's ETag.
	_, _, err = e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	l2, err := e.svc.UpdateList(e.ctx, a, yaps.ListPatch{Title: yaps.Set("new")}, le)
	require.NoError(t, err)
	require.Equal(t, "new", l2.Title)
	_, err = e.svc.UpdateList(e.ctx, a, yaps.ListPatch{Title: yaps.Set("newer")}, le)
	requireCode(t, yaps.EPRECONDITION, err)
}

func TestArchive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	editor := e.actor(owner, yaps.RoleEditor)
	y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	require.NoError(t, e.svc.ArchiveList(e.ctx, owner, ""))
	require.NoError(t, e.svc.ArchiveList(e.ctx, owner, "")) // idempotent
	l, err := e.store.List(e.ctx, owner.List.Ref)
	require.NoError(t, err)
	require.True(t, l.Archived())
	v := l.DocVersion

	owner, editor = e.reauth(owner), e.reauth(editor)
	_, _, err = e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task("t"), "", nil)
	requireCode(t, yaps.EFORBIDDEN, err)
	_, err = e.svc.UpdateYap(e.ctx, editor, y.ID, yaps.YapFields{Content: yaps.Set("x")}, "")
	requireCode(t, yaps.EFORBIDDEN, err)
	requireCode(t, yaps.EFORBIDDEN, e.svc.DeleteYap(e.ctx, owner, y.ID, ""))
	_, err = e.svc.UpdateList(e.ctx, owner, yaps.ListPatch{Title: yaps.Set("x")}, "")
	requireCode(t, yaps.EFORBIDDEN, err)
	require.False(t, e.svc.CanWrite(editor))
	requireCode(t, yaps.EFORBIDDEN, e.svc.ApplyUpdate(e.ctx, editor, []byte{0, 0}, nil))
	// Reads still work.
	_, err = e.svc.GetYap(e.ctx, editor, y.ID)
	require.NoError(t, err)
	l, err = e.store.List(e.ctx, owner.List.Ref)
	require.NoError(t, err)
	require.Equal(t, v, l.DocVersion)

	// Editor unarchives (and renames in the same patch).
	l2, err := e.svc.UpdateList(e.ctx, editor, yaps.ListPatch{ArchivedAt: yaps.Null[time.Time](), Title: yaps.Set("back")}, "")
	require.NoError(t, err)
	require.False(t, l2.Archived())
	require.Equal(t, "back", l2.Title)
	_, _, err = e.svc.CreateYap(e.ctx, e.reauth(editor), yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	// Archive by PATCH.
	l3, err := e.svc.UpdateList(e.ctx, e.reauth(editor), yaps.ListPatch{ArchivedAt: yaps.Set(time.Now())}, "")
	require.NoError(t, err)
	require.True(t, l3.Archived())
}

func TestSoftDeleteRestoreAndPurge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	keep, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("keep"), "", nil)
	require.NoError(t, err)
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("t"), "", nil)
	require.NoError(t, err)
	require.NoError(t, e.svc.DeleteYap(e.ctx, a, y.ID, ""))
	requireCode(t, yaps.ENOTFOUND, e.svc.DeleteYap(e.ctx, a, y.ID, ""))
	_, err = e.svc.GetYap(e.ctx, a, y.ID)
	requireCode(t, yaps.ENOTFOUND, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("x")}, "")
	requireCode(t, yaps.ENOTFOUND, err)
	p, err := e.svc.ListYaps(e.ctx, a, "", 0, false)
	require.NoError(t, err)
	require.Len(t, p.Yaps, 1)
	p, err = e.svc.ListYaps(e.ctx, a, "", 0, true)
	require.NoError(t, err)
	require.Len(t, p.Yaps, 2)

	// Restore within the retention.
	e.clock.Advance(29 * 24 * time.Hour)
	r, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{DeletedAt: yaps.Null[time.Time]()}, "")
	require.NoError(t, err)
	require.Nil(t, r.DeletedAt)
	require.NoError(t, e.svc.DeleteYap(e.ctx, a, y.ID, ""))

	// Past the retention: gone before the purge ran, then purged.
	e.clock.Advance(30*24*time.Hour + time.Millisecond)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{DeletedAt: yaps.Null[time.Time]()}, "")
	requireCode(t, yaps.ENOTFOUND, err)
	p, err = e.svc.ListYaps(e.ctx, a, "", 0, true)
	require.NoError(t, err)
	require.Len(t, p.Yaps, 1)
	n, err := e.svc.Purge(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = e.store.Yap(e.ctx, a.List.Ref, y.ID)
	requireCode(t, yaps.ENOTFOUND, err)
	n, err = e.svc.Purge(e.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	// The document no longer holds it.
	doc := docOf(t, e, a)
	_, ok := doc.GetMap("yaps").Get(y.ID)
	require.False(t, ok)
	_, ok = doc.GetMap("yaps").Get(keep.ID)
	require.True(t, ok)
}

func TestPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	var ids []string
	for i := range 7 {
		y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(fmt.Sprint(i)), "", nil)
		require.NoError(t, err)
		ids = append(ids, y.ID)
		if i%2 == 0 {
			e.clock.Advance(time.Millisecond) // some share a createdAt
		}
	}
	require.NoError(t, e.svc.DeleteYap(e.ctx, a, ids[3], ""))
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		p, err := e.svc.ListYaps(e.ctx, a, cursor, 2, false)
		require.NoError(t, err)
		for _, y := range p.Yaps {
			got = append(got, y.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	want := append(append([]string{}, ids[:3]...), ids[4:]...)
	require.Equal(t, want, got)
	for _, c := range []struct {
		cursor string
		limit  int
	}{{"bad cursor", 0}, {"", 201}, {"", -1}} {
		_, err := e.svc.ListYaps(e.ctx, a, c.cursor, c.limit, false)
		requireCode(t, yaps.EINVALID, err)
	}
	p, err := e.svc.ListYaps(e.ctx, a, "", 200, true)
	require.NoError(t, err)
	require.Len(t, p.Yaps, 7)
	require.Empty(t, p.NextCursor)
}

func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindNote, yaps.YapFields{Body: yaps.Set("")}, "", nil)
	require.NoError(t, err)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task(fmt.Sprintf("%d-%d", w, i)), "", nil)
				if err != nil {
					errs <- err
					return
				}
				cur, err := e.svc.GetYap(e.ctx, a, y.ID)
				if err != nil {
					errs <- err
					return
				}
				// Read-modify-write guarded by If-Match, retried on 412.
				for {
					_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Body: yaps.Set(cur.Body + "x")}, yaps.YapETag(cur))
					if !yaps.IsCode(err, yaps.EPRECONDITION) {
						break
					}
					if cur, err = e.svc.GetYap(e.ctx, a, y.ID); err != nil {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	p, err := e.svc.ListYaps(e.ctx, a, "", 200, false)
	require.NoError(t, err)
	require.Len(t, p.Yaps, writers*each+1)
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(t, err)
	final, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	// If-Match made every read-modify-write count.
	require.Len(t, final.Body, writers*each)
	require.EqualValues(t, 2+2*writers*each, l.DocVersion)
	// The projection and the document agree.
	doc := docOf(t, e, a)
	require.Len(t, doc.GetMap("yaps").Keys(), writers*each+1)
}

func TestIdempotencyConcurrentRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	const n = 6
	var wg sync.WaitGroup
	ids := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			y, rep, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("once"), "same", hash("once"))
			switch {
			case err != nil:
				errs <- err
			case y != nil:
				ids <- y.ID
			default:
				var m map[string]any
				if err := json.Unmarshal(rep.Body, &m); err != nil {
					errs <- err
					return
				}
				ids <- m["id"].(string)
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	require.Len(t, seen, 1, "every retry answers with the one created yap")
	p, err := e.svc.ListYaps(e.ctx, a, "", 0, false)
	require.NoError(t, err)
	require.Len(t, p.Yaps, 1)
}
