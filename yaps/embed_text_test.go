package yaps_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// A text a sync client put an embed into (which HTTP readers do not see)
// takes an HTTP PATCH exactly: the edit used to land one place off per
// embed, so the document and GET held other text than the PATCH answered
// (core review).
func TestPatchTextWithEmbed(t *testing.T) {
	t.Parallel()
	e, a, y, p := taskWithEmbed(t)
	got, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, "hello world", got.Content)

	ans, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("hello there")}, "")
	require.NoError(t, err)
	require.Equal(t, "hello there", ans.Content)
	got, err = e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, "hello there", got.Content)
	p.sync()
	require.Equal(t, "hello there", text(t, ymap(t, p.doc, y.ID), "content").String())
}

// An invalid sync edit of such a text is compensated back to the valid
// text. The compensation landed off too: the yap stayed invalid, and the
// projection dropped it from the HTTP API while it was still in the
// document (core review).
func TestCompensateTextWithEmbed(t *testing.T) {
	t.Parallel()
	e, a, y, p := taskWithEmbed(t)
	p.sync()
	require.NoError(t, p.send(func(d *yjs.Doc) {
		// Y.Text index 6 is after "hello" (the embed counts one): a line
		// break, which a task's content may not hold.
		text(t, ymap(t, d, y.ID), "content").Insert(6, "\n", nil)
	}))
	p.sync()
	require.Equal(t, "hello world", text(t, ymap(t, p.doc, y.ID), "content").String())
	got, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, "hello world", got.Content)
}

// taskWithEmbed creates a task "hello world" and has a sync peer insert an
// embed at the start of its content.
func taskWithEmbed(t *testing.T) (*env, *yaps.Actor, *yaps.Yap, *peer) {
	t.Helper()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, task("hello world"), "", nil)
	require.NoError(t, err)
	p := newPeer(t, e, a)
	require.NoError(t, p.send(func(d *yjs.Doc) {
		text(t, ymap(t, d, y.ID), "content").InsertEmbed(0, map[string]any{"image": "x.png"}, nil)
	}))
	return e, a, y, p
}
