package yaps_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestValidationLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	start := yaps.Set(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	s := strings.Repeat
	tags := func(n, l int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = s("t", l)
		}
		return out
	}
	cases := []struct {
		name string
		kind yaps.Kind
		f    yaps.YapFields
		ok   bool
	}{
		{"content at limit", yaps.KindTask, task(s("a", 1000)), true},
		{"content one over", yaps.KindTask, task(s("a", 1001)), false},
		{"content counts code points", yaps.KindTask, task(s("😀", 1000)), true},
		{"content code points one over", yaps.KindTask, task(s("é", 1001)), false},
		{"content with LF", yaps.KindTask, task("a\nb"), false},
		{"content with CR", yaps.KindTask, task("a\rb"), false},
		{"content with tab", yaps.KindTask, task("a\tb"), true},
		{"content with NUL", yaps.KindTask, task("a\x00b"), false},
		{"content with DEL", yaps.KindTask, task("a\x7fb"), false},
		{"content with C1 first", yaps.KindTask, task("a\u0080b"), false},
		{"content with NEL", yaps.KindTask, task("a\u0085b"), false},
		{"content with C1 last", yaps.KindTask, task("a\u009f"), false},
		{"content with NBSP", yaps.KindTask, task("a\u00a0b"), true},
		{"content with line separator", yaps.KindTask, task("a\u2028b"), true},
		{"body with C1", yaps.KindNote, yaps.YapFields{Body: yaps.Set("a\n\u0085b")}, false},
		{"content empty", yaps.KindTask, task(""), true},
		{"task without status", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x")}, false},
		{"task without content", yaps.KindTask, yaps.YapFields{Status: yaps.Set(yaps.StatusOpen)}, false},
		{"task bad status", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.TaskStatus("later"))}, false},
		{"task bad priority", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusDone), Priority: yaps.Set(yaps.Priority("asap"))}, false},
		{"task null priority", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusDone), Priority: yaps.Null[yaps.Priority]()}, true},
		{"task with body", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusOpen), Body: yaps.Set("b")}, false},
		{"task kind mismatch", yaps.KindTask, yaps.YapFields{Kind: yaps.Set(yaps.KindNote), Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusOpen)}, false},
		{"50 tags", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusOpen), Tags: yaps.Set(tags(50, 100))}, true},
		{"51 tags", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusOpen), Tags: yaps.Set(tags(51, 1))}, false},
		{"tag one over", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusOpen), Tags: yaps.Set(tags(1, 101))}, false},
		{"empty tag", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusOpen), Tags: yaps.Set([]string{""})}, false},
		{"body at limit", yaps.KindNote, yaps.YapFields{Body: yaps.Set(s("b", 100000))}, true},
		{"body one over", yaps.KindNote, yaps.YapFields{Body: yaps.Set(s("b", 100001))}, false},
		{"body multi-line", yaps.KindNote, yaps.YapFields{Body: yaps.Set("a\nb\tc")}, true},
		{"body with CR", yaps.KindNote, yaps.YapFields{Body: yaps.Set("a\r\nb")}, false},
		{"body with control", yaps.KindNote, yaps.YapFields{Body: yaps.Set("a\x07b")}, false},
		{"note without body", yaps.KindNote, yaps.YapFields{Title: yaps.Set("t")}, false},
		{"note title at limit", yaps.KindNote, yaps.YapFields{Body: yaps.Set(""), Title: yaps.Set(s("t", 1000))}, true},
		{"note title one over", yaps.KindNote, yaps.YapFields{Body: yaps.Set(""), Title: yaps.Set(s("t", 1001))}, false},
		{"note with status", yaps.KindNote, yaps.YapFields{Body: yaps.Set(""), Status: yaps.Set(yaps.StatusOpen)}, false},
		{"event", yaps.KindEvent, yaps.YapFields{Title: yaps.Set("Party"), StartsAt: start}, true},
		{"event without startsAt", yaps.KindEvent, yaps.YapFields{Title: yaps.Set("Party")}, false},
		{"event without title", yaps.KindEvent, yaps.YapFields{StartsAt: start}, false},
		{"event title one over", yaps.KindEvent, yaps.YapFields{Title: yaps.Set(s("t", 1001)), StartsAt: start}, false},
		{"event location at limit", yaps.KindEvent, yaps.YapFields{Title: yaps.Set("P"), StartsAt: start, Location: yaps.Set(s("l", 1000))}, true},
		{"event location one over", yaps.KindEvent, yaps.YapFields{Title: yaps.Set("P"), StartsAt: start, Location: yaps.Set(s("l", 1001))}, false},
		{"event ends before start", yaps.KindEvent, yaps.YapFields{Title: yaps.Set("P"), StartsAt: start, EndsAt: yaps.Set(start.Value.Add(-time.Hour))}, false},
		{"event with tags", yaps.KindEvent, yaps.YapFields{Title: yaps.Set("P"), StartsAt: start, Tags: yaps.Set([]string{"x"})}, false},
		{"deletedAt on create", yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"), Status: yaps.Set(yaps.StatusOpen), DeletedAt: yaps.Set(time.Now())}, false},
		{"invalid UTF-8", yaps.KindTask, task("a\xffb"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			y, _, err := e.svc.CreateYap(e.ctx, a, c.kind, c.f, "", nil)
			if c.ok {
				require.NoError(t, err)
				require.Equal(t, c.kind, y.Kind)
			} else {
				requireCode(t, yaps.EINVALID, err)
			}
		})
	}
}

func TestListAndLabelLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Title: yaps.Set(strings.Repeat("x", 200))})
	require.NoError(t, err)
	_, err = e.svc.CreateList(e.ctx, yaps.CreateListInput{Title: yaps.Set(strings.Repeat("x", 201))})
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.CreateList(e.ctx, yaps.CreateListInput{Kind: yaps.Set("widgets")})
	requireCode(t, yaps.EINVALID, err)
	cl, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Kind: yaps.Set("notes")})
	require.NoError(t, err)
	require.Equal(t, yaps.KindNote, cl.List.Kind)
	cl, err = e.svc.CreateList(e.ctx, yaps.CreateListInput{})
	require.NoError(t, err)
	require.Equal(t, yaps.KindTask, cl.List.Kind)
	require.EqualValues(t, 1, cl.List.DocVersion)

	a := e.list()
	_, err = e.svc.IssuePermission(e.ctx, a, yaps.RoleEditor, strings.Repeat("l", 200), nil)
	require.NoError(t, err)
	_, err = e.svc.IssuePermission(e.ctx, a, yaps.RoleEditor, strings.Repeat("l", 201), nil)
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.UpdateList(e.ctx, a, yaps.ListPatch{Title: yaps.Set(strings.Repeat("x", 201))}, "")
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.UpdateList(e.ctx, a, yaps.ListPatch{Title: yaps.Set("a\nb")}, "")
	requireCode(t, yaps.EINVALID, err)
}

func TestPatchRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, yaps.YapFields{Content: yaps.Set("x"),
		Status: yaps.Set(yaps.StatusOpen), Priority: yaps.Set(yaps.PriorityHigh), Tags: yaps.Set([]string{"a", "b"})}, "", nil)
	require.NoError(t, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Kind: yaps.Set(yaps.KindNote)}, "")
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Body: yaps.Set("b")}, "")
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Status: yaps.Null[yaps.TaskStatus]()}, "")
	requireCode(t, yaps.EINVALID, err)
	_, err = e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("a\nb")}, "")
	requireCode(t, yaps.EINVALID, err)
	e.clock.Advance(time.Second)
	y2, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Kind: yaps.Set(yaps.KindTask),
		Priority: yaps.Null[yaps.Priority](), Tags: yaps.Set([]string{"b", "c"}), Status: yaps.Set(yaps.StatusDone)}, "")
	require.NoError(t, err)
	require.Nil(t, y2.Priority)
	require.Equal(t, []string{"b", "c"}, y2.Tags)
	require.Equal(t, yaps.StatusDone, y2.Status)
	require.Equal(t, "x", y2.Content)
	require.True(t, y2.UpdatedAt.After(y.UpdatedAt))
	require.True(t, y2.CreatedAt.Equal(y.CreatedAt))
	got, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, y2, got)
	_, err = e.svc.UpdateYap(e.ctx, a, "nope", yaps.YapFields{}, "")
	requireCode(t, yaps.ENOTFOUND, err)
}

// Yap ids are 1–64 characters of A-Za-z0-9_- (RULINGS R9), nothing else.
func TestValidYapID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"a", true},
		{"Z", true},
		{"0", true},
		{"_", true},
		{"-", true},
		{"0193e4f2-7a2b-7c3d-8e4f-5a6b7c8d9e0f", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"a b", false},
		{"a.b", false},
		{"a/b", false},
		{"é", false},
		{"a\x00", false},
		{"ab\n", false},
	} {
		require.Equal(t, tc.want, yaps.ValidYapID(tc.id), "%q", tc.id)
	}
}
