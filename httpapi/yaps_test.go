package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var common = []string{"createdAt", "deletedAt", "id", "kind", "listId", "updatedAt"}

func withCommon(extra ...string) []string {
	out := append(append([]string{}, common...), extra...)
	sort.Strings(out)
	return out
}

func TestYapKinds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)

		tk := e.addYap(ref, owner, map[string]any{"content": "#!high buy milk due:fri", "status": "open", "priority": "high",
			"dueAt": "2026-03-02T10:00:00+01:00", "tags": []string{"home"}, "id": "ignored", "createdAt": "1999-01-01T00:00:00Z"})
		require.Equal(t, withCommon("content", "status", "priority", "dueAt", "tags"), keys(tk))
		require.Equal(t, "task", tk["kind"]) // the list's kind is the default
		require.Equal(t, ref, tk["listId"])
		require.NotEqual(t, "ignored", tk["id"])
		require.Equal(t, "#!high buy milk due:fri", tk["content"])
		require.Equal(t, "2026-03-02T09:00:00.000Z", tk["dueAt"])
		require.Nil(t, tk["deletedAt"])
		for _, k := range []string{"createdAt", "updatedAt"} {
			require.Regexp(t, rfc3339Millis, tk[k])
		}
		require.Equal(t, "2026-03-01T12:00:00.000Z", tk["createdAt"]) // the fake clock, not the client's value

		nt := e.addYap(ref, owner, map[string]any{"kind": "note", "body": "line one\nline two"})
		require.Equal(t, withCommon("title", "body", "tags"), keys(nt))
		require.Nil(t, nt["title"])
		require.Equal(t, []any{}, nt["tags"])

		ev := e.addYap(ref, owner, map[string]any{"kind": "event", "title": "Dentist", "startsAt": "2026-03-05T08:30:00Z", "location": "Main St"})
		require.Equal(t, withCommon("title", "startsAt", "endsAt", "location"), keys(ev))
		require.Equal(t, "2026-03-05T08:30:00.000Z", ev["startsAt"])
		require.Nil(t, ev["endsAt"])

		// GET reads back exactly what POST answered, with an ETag.
		for _, y := range []map[string]any{tk, nt, ev} {
			r := expect(t, e.get(fmt.Sprintf("/lists/%s/yaps/%s", ref, y["id"]), owner), http.StatusOK)
			require.Equal(t, y, r.JSON)
			require.NotEmpty(t, r.Header.Get("ETag"))
		}

		bad := []struct {
			name string
			body any
		}{
			{"task without status", map[string]any{"kind": "task", "content": "x"}},
			{"note without body", map[string]any{"kind": "note", "title": "x"}},
			{"event without title", map[string]any{"kind": "event", "startsAt": "2026-03-05T08:30:00Z"}},
			{"event without startsAt", map[string]any{"kind": "event", "title": "x"}},
			{"wrong field for the kind", map[string]any{"kind": "note", "body": "x", "status": "open"}},
			{"task with body", map[string]any{"kind": "task", "content": "x", "status": "open", "body": "y"}},
			{"event with tags", map[string]any{"kind": "event", "title": "x", "startsAt": "2026-03-05T08:30:00Z", "tags": []string{}}},
			{"unknown kind", map[string]any{"kind": "reminder"}},
			{"plural kind", map[string]any{"kind": "tasks", "content": "x", "status": "open"}},
			{"unknown field", map[string]any{"kind": "task", "content": "x", "status": "open", "colour": "red"}},
			{"bad status", map[string]any{"kind": "task", "content": "x", "status": "finished"}},
			{"bad priority", map[string]any{"kind": "task", "content": "x", "status": "open", "priority": "asap"}},
			{"multi-line content", map[string]any{"kind": "task", "content": "a\nb", "status": "open"}},
			{"carriage return", map[string]any{"kind": "task", "content": "a\rb", "status": "open"}},
			{"control character", map[string]any{"kind": "task", "content": "a\x07b", "status": "open"}},
			{"NUL", map[string]any{"kind": "note", "body": "a\x00b"}},
			{"content too long", map[string]any{"kind": "task", "content": string(make([]rune, 1001)), "status": "open"}},
			{"too many tags", map[string]any{"kind": "task", "content": "x", "status": "open", "tags": make([]string, 51)}},
			{"tags not strings", map[string]any{"kind": "task", "content": "x", "status": "open", "tags": []int{1}}},
			{"content not a string", map[string]any{"kind": "task", "content": 5, "status": "open"}},
			{"bad date", map[string]any{"kind": "task", "content": "x", "status": "open", "dueAt": "tomorrow"}},
			{"deletedAt on create", map[string]any{"kind": "task", "content": "x", "status": "open", "deletedAt": "2026-03-01T00:00:00Z"}},
			{"empty body", ""},
			{"array", "[]"},
			{"malformed", `{"kind": "task",`},
			{"trailing garbage", `{"kind": "task", "content": "x", "status": "open"} x`},
			{"invalid UTF-8", []byte("{\"kind\": \"note\", \"body\": \"\xff\xfe\"}")},
		}
		for _, c := range bad {
			t.Run(c.name, func(t *testing.T) {
				expectProblem(t, e.in(t).do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: c.body}), 400, "bad_request")
			})
		}
	})
}

func TestPatchYap(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		y := e.addYap(ref, owner, map[string]any{"content": "milk", "status": "open", "priority": "low", "tags": []string{"a"}})
		path := "/lists/" + ref + "/yaps/" + y["id"].(string)
		e.clock.Advance(time.Second)

		r := expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"status": "done"}}), http.StatusOK)
		require.Equal(t, "done", r.str("status"))
		require.Equal(t, "milk", r.str("content")) // absent: unchanged
		require.Equal(t, "low", r.str("priority"))
		require.Equal(t, "2026-03-01T12:00:01.000Z", r.str("updatedAt"))
		require.Equal(t, y["createdAt"], r.str("createdAt"))
		tag := r.Header.Get("ETag")

		// null clears optional members.
		r = expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: `{"priority": null, "tags": null, "dueAt": null}`}), http.StatusOK)
		require.Nil(t, r.JSON["priority"])
		require.Equal(t, []any{}, r.JSON["tags"])

		// Lost-update guard.
		expectProblem(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"content": "oat milk"},
			Header: map[string]string{"If-Match": tag}}), http.StatusPreconditionFailed, "precondition_failed")
		r = expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"content": "oat milk"},
			Header: map[string]string{"If-Match": r.Header.Get("ETag")}}), http.StatusOK)
		require.Equal(t, "oat milk", r.str("content"))

		// If-Match: * only asks that the yap exists.
		expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"content": "oat milk"},
			Header: map[string]string{"If-Match": "*"}}), http.StatusOK)

		// Sending back what GET answered works.
		got := expect(t, e.get(path, owner), http.StatusOK).JSON
		got["content"] = "soy milk"
		r = expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: got}), http.StatusOK)
		require.Equal(t, "soy milk", r.str("content"))

		for name, body := range map[string]any{
			"change kind":      map[string]any{"kind": "note"},
			"wrong field":      map[string]any{"body": "x"},
			"unknown field":    map[string]any{"colour": "red"},
			"multi-line":       map[string]any{"content": "a\nb"},
			"null status":      `{"status": null}`,
			"null content":     `{"content": null}`,
			"set deletedAt":    map[string]any{"deletedAt": "2026-03-01T00:00:00Z"},
			"wrong type":       map[string]any{"status": true},
			"malformed":        `{"status": "done"`,
			"bad If-Match tag": nil,
		} {
			t.Run(name, func(t *testing.T) {
				if body == nil {
					expectProblem(t, e.in(t).do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"status": "open"},
						Header: map[string]string{"If-Match": `"nope"`}}), 412, "precondition_failed")
					return
				}
				expectProblem(t, e.in(t).do(req{Method: "PATCH", Path: path, Code: owner, Body: body}), 400, "bad_request")
			})
		}
		expectProblem(t, e.do(req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/nope", Code: owner, Body: map[string]any{"status": "open"}}), 404, "not_found")
	})
}

func TestDeleteRestorePurge(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		y := e.addYap(ref, owner, task("milk"))
		y2 := e.addYap(ref, owner, task("bread"))
		path := "/lists/" + ref + "/yaps/" + y["id"].(string)

		expect(t, e.do(req{Method: "DELETE", Path: path, Code: owner}), http.StatusNoContent)
		expectProblem(t, e.get(path, owner), 404, "not_found")
		expectProblem(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: map[string]any{"status": "done"}}), 404, "not_found")
		expectProblem(t, e.do(req{Method: "DELETE", Path: path, Code: owner}), 404, "not_found")
		page := expect(t, e.get("/lists/"+ref+"/yaps", owner), http.StatusOK)
		require.Len(t, page.JSON["yaps"], 1)
		page = expect(t, e.get("/lists/"+ref+"/yaps?includeDeleted=true", owner), http.StatusOK)
		require.Len(t, page.JSON["yaps"], 2)
		deleted := page.JSON["yaps"].([]any)[0].(map[string]any)
		require.Equal(t, y["id"], deleted["id"])
		require.Regexp(t, rfc3339Millis, deleted["deletedAt"])

		// Restore within 30 days.
		e.clock.Advance(29 * 24 * time.Hour)
		r := expect(t, e.do(req{Method: "PATCH", Path: path, Code: owner, Body: `{"deletedAt": null}`}), http.StatusOK)
		require.Nil(t, r.JSON["deletedAt"])
		expect(t, e.get(path, owner), http.StatusOK)

		// Delete again; after 30 days it is purged and answers 404.
		p2 := "/lists/" + ref + "/yaps/" + y2["id"].(string)
		expect(t, e.do(req{Method: "DELETE", Path: p2, Code: owner}), http.StatusNoContent)
		e.clock.Advance(31 * 24 * time.Hour)
		expectProblem(t, e.do(req{Method: "PATCH", Path: p2, Code: owner, Body: `{"deletedAt": null}`}), 404, "not_found")
		_, err := e.svc.Purge(t.Context())
		require.NoError(t, err)
		expectProblem(t, e.do(req{Method: "PATCH", Path: p2, Code: owner, Body: `{"deletedAt": null}`}), 404, "not_found")
		page = expect(t, e.get("/lists/"+ref+"/yaps?includeDeleted=true", owner), http.StatusOK)
		require.Len(t, page.JSON["yaps"], 1)
	})
}

func TestPaging(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		var want []any
		for i := range 7 {
			y := e.addYap(ref, owner, task(fmt.Sprintf("item %d", i)))
			want = append(want, y["id"])
			if i%2 == 0 {
				e.clock.Advance(time.Millisecond) // some share a createdAt: ordered by id then
			}
		}
		var got []any
		cursor := ""
		pages := 0
		for {
			path := "/lists/" + ref + "/yaps?limit=3"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := expect(t, e.get(path, owner), http.StatusOK)
			require.Contains(t, r.JSON, "nextCursor")
			items := r.JSON["yaps"].([]any)
			require.LessOrEqual(t, len(items), 3)
			for _, it := range items {
				got = append(got, it.(map[string]any)["id"])
			}
			pages++
			if r.JSON["nextCursor"] == nil {
				break
			}
			cursor = r.str("nextCursor")
			require.Less(t, pages, 10)
		}
		require.Equal(t, 3, pages)
		require.ElementsMatch(t, want, got)
		require.Len(t, got, 7)

		r := expect(t, e.get("/lists/"+ref+"/yaps", owner), http.StatusOK)
		require.Len(t, r.JSON["yaps"], 7)
		require.Nil(t, r.JSON["nextCursor"])
		require.Equal(t, got, idsOf(r.JSON["yaps"]))

		for _, q := range []string{"limit=0", "limit=201", "limit=-1", "limit=x", "limit=1.5", "cursor=%00", "cursor=garbage", "cursor=" + yaps.NewCode(), "includeDeleted=maybe"} {
			t.Run(q, func(t *testing.T) {
				expectProblem(t, e.in(t).get("/lists/"+ref+"/yaps?"+q, owner), 400, "bad_request")
			})
		}
		expect(t, e.get("/lists/"+ref+"/yaps?limit=200", owner), http.StatusOK)
		expect(t, e.get("/lists/"+ref+"/yaps?limit=1", owner), http.StatusOK)
	})
}

func idsOf(v any) []any {
	var out []any
	for _, it := range v.([]any) {
		out = append(out, it.(map[string]any)["id"])
	}
	return out
}

// Answers to consecutive creates stay each their own, whichever of their
// strings are member names or enum values of the API (which the body
// reader hands out without copying): each answer is, member for member,
// the yap sent with the server's members, and reads back byte for byte.
func TestCreateYapAnswersIntact(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		bodies := []map[string]any{
			{"kind": "task", "content": "open", "status": "done"},
			{"content": "in_progress", "status": "open", "priority": "low"},
			{"kind": "note", "body": "status", "title": "kind"},
			{"content": "a longer content than any member name", "status": "cancelled"},
			{"kind": "note", "body": "tags", "tags": []any{"kind", "task", "note"}},
		}
		var answers []*resp
		for _, b := range bodies {
			answers = append(answers, expect(t, e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: b}), http.StatusCreated))
		}
		ids := map[string]bool{}
		for i, b := range bodies {
			got := answers[i].JSON
			id, _ := got["id"].(string)
			require.NotEmpty(t, id, "yap %d", i)
			require.False(t, ids[id], "yap %d: id %s answered twice", i, id)
			ids[id] = true
			_, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["createdAt"]))
			require.NoError(t, err, "yap %d", i)
			// The members the server sets, then those of the kind at
			// their defaults, then what was sent.
			want := map[string]any{"id": id, "listId": ref, "createdAt": got["createdAt"], "updatedAt": got["createdAt"],
				"deletedAt": nil, "kind": "task", "tags": []any{}}
			if b["kind"] == "note" {
				want["title"] = nil
			} else {
				want["dueAt"], want["priority"] = nil, nil
			}
			for k, v := range b {
				want[k] = v
			}
			require.Equal(t, want, got, "yap %d: %s", i, answers[i].Body)
			r := expect(t, e.get("/lists/"+ref+"/yaps/"+id, owner), http.StatusOK)
			require.Equal(t, string(answers[i].Body), string(r.Body), "yap %d", i)
		}

		// Concurrent creates (their answers are rendered into pooled
		// buffers), on lists of their own so that they run in parallel:
		// each answer is its own request's yap, whole. Only -race sees a
		// buffer released before its answer is written.
		var wg sync.WaitGroup
		for g := range 8 {
			ref, owner := e.newList(nil)
			wg.Go(func() {
				for i := range 20 {
					content := fmt.Sprintf("yap %d of writer %d %s", i, g, strings.Repeat("x", (g*20+i)*5))
					body := fmt.Sprintf(`{"content":%q,"status":"open"}`, content)
					r, err := http.NewRequest("POST", e.srv.URL+e.prefix+"/lists/"+ref+"/yaps", strings.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("Authorization", "Bearer "+owner)
					res, err := e.srv.Client().Do(r)
					if err != nil {
						t.Error(err)
						return
					}
					b, err := io.ReadAll(res.Body)
					res.Body.Close()
					if err != nil || res.StatusCode != http.StatusCreated {
						t.Errorf("writer %d create %d: %d %s %v", g, i, res.StatusCode, b, err)
						return
					}
					var y map[string]any
					if err := json.Unmarshal(b, &y); err != nil || y["content"] != content || y["listId"] != ref {
						t.Errorf("writer %d create %d answered %s (%v)", g, i, b, err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}
