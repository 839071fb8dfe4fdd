package yaps_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

var renderStrings = []string{
	"", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "\x00\x01\b\f\n\r\t\x1f\x7f",
	"héllo wörld ✓ 😀", "line\u2028sep\u2029para", "bad \xff\xfe utf8 \xc3", "\xe2\x80", "tab\tend\u00a0",
	strings.Repeat("x", 300),
}

var renderTimes = []time.Time{
	time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
	time.Date(2026, 7, 4, 1, 2, 3, 4_000_000, time.FixedZone("X", -7*3600)),
	time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(9999, 12, 31, 23, 59, 59, 123_000_000, time.UTC),
	time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	time.UnixMilli(1_700_000_000_123),
}

func renderYaps() []*yaps.Yap {
	var out []*yaps.Yap
	pr := yaps.Priority("high")
	for i, s := range renderStrings {
		t := renderTimes[i%len(renderTimes)]
		t2 := renderTimes[(i+3)%len(renderTimes)]
		s2 := renderStrings[(i+1)%len(renderStrings)]
		for _, k := range []yaps.Kind{yaps.KindTask, yaps.KindNote, yaps.KindEvent, yaps.Kind("odd<kind>")} {
			y := &yaps.Yap{ID: "id" + s, ListRef: "L" + s2, Kind: k, CreatedAt: t, UpdatedAt: t2,
				Content: s, Status: yaps.TaskStatus("open"), Body: s2}
			out = append(out, y)
			full := *y
			full.DeletedAt, full.DueAt, full.StartsAt, full.EndsAt = &t2, &t, &t, &t2
			full.Priority, full.Title, full.Location = &pr, &s, &s2
			full.Tags = []string{s, s2, ""}
			out = append(out, &full)
			empty := *y
			empty.Tags = []string{}
			out = append(out, &empty)
		}
	}
	return out
}

// TestAppendYapJSONMatchesEncodingJSON: the append renderer writes exactly
// what encoding/json writes for NewYapJSON / NewListJSON / CreatedListJSON.
func TestAppendYapJSONMatchesEncodingJSON(t *testing.T) {
	for i, y := range renderYaps() {
		want, err := json.Marshal(yaps.NewYapJSON(y))
		if err != nil {
			t.Fatal(err)
		}
		got := yaps.AppendYapJSON(nil, y)
		if !bytes.Equal(got, want) {
			t.Fatalf("yap %d (%s):\n got %s\nwant %s", i, y.Kind, got, want)
		}
		r, err := yaps.RenderJSON(y)
		if err != nil || !bytes.Equal(r, want) {
			t.Fatalf("RenderJSON yap %d: %s %v", i, r, err)
		}
	}
	for i, s := range renderStrings {
		t1 := renderTimes[i%len(renderTimes)]
		t2 := renderTimes[(i+5)%len(renderTimes)]
		for _, l := range []*yaps.List{
			{Ref: "r" + s, Title: s, Kind: yaps.KindNote, CreatedAt: t1, UpdatedAt: t2, DocVersion: int64(i) * 1e12},
			{Ref: "r", Title: s, Kind: yaps.KindTask, CreatedAt: t1, UpdatedAt: t2, RolledUpAt: &t1, ArchivedAt: &t2, DocVersion: -3},
		} {
			want, _ := json.Marshal(yaps.NewListJSON(l))
			if got := yaps.AppendListJSON(nil, l); !bytes.Equal(got, want) {
				t.Fatalf("list %d:\n got %s\nwant %s", i, got, want)
			}
			c := &yaps.CreatedList{List: l, OwnerCode: "yap_" + s, SliceURL: "http://x/?k=" + s, APIBase: "http://x/api/v1&"}
			want, _ = json.Marshal(&yaps.CreatedListJSON{Ref: l.Ref, OwnerCode: c.OwnerCode, List: yaps.NewListJSON(l), SliceURL: c.SliceURL, APIBase: c.APIBase})
			if got, err := yaps.RenderJSON(c); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("created list %d:\n got %s\nwant %s", i, got, want)
			}
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range renderStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := yaps.AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}

func benchPage() []*yaps.Yap {
	out := make([]*yaps.Yap, 50)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range out {
		out[i] = &yaps.Yap{ID: fmt.Sprintf("yap-%032d", i), ListRef: "Ab3dEf5hIj7lMn9pQr", Kind: yaps.KindTask,
			CreatedAt: at.Add(time.Duration(i) * time.Second), UpdatedAt: at.Add(time.Duration(i) * time.Second),
			Content: fmt.Sprintf("bench yap number %d with some text", i), Status: yaps.TaskStatus("open")}
	}
	return out
}

// BenchmarkRenderPage renders a page of 50 task yaps: the map-based
// encoding/json path it replaced, and the append renderer.
func BenchmarkRenderPage(b *testing.B) {
	page := benchPage()
	b.Run("map+encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			items := make([]any, 0, len(page))
			for _, y := range page {
				items = append(items, yaps.NewYapJSON(y))
			}
			if _, err := json.Marshal(struct {
				Yaps       []any   `json:"yaps"`
				NextCursor *string `json:"nextCursor"`
			}{items, nil}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf := make([]byte, 0, 64+len(page)*320)
			buf = append(buf, `{"yaps":[`...)
			for i, y := range page {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = yaps.AppendYapJSON(buf, y)
			}
			buf = append(buf, `],"nextCursor":null}`...)
			_ = buf
		}
	})
}
