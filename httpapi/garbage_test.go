package httpapi_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGarbageNeverFails5xx sends malformed input to every endpoint: every
// answer is below 500 (env.do checks that) and every error is a Problem.
func TestGarbageNeverFails5xx(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		y := e.addYap(ref, owner, task("x"))
		id := y["id"].(string)
		endpoints := []struct{ method, path string }{
			{"POST", "/lists"}, {"POST", "/accounts"}, {"GET", "/lists"},
			{"GET", "/lists/" + ref}, {"PATCH", "/lists/" + ref},
			{"GET", "/lists/" + ref + "/yaps"}, {"POST", "/lists/" + ref + "/yaps"},
			{"GET", "/lists/" + ref + "/yaps/" + id}, {"PATCH", "/lists/" + ref + "/yaps/" + id},
			{"GET", "/lists/" + ref + "/permissions"}, {"POST", "/lists/" + ref + "/permissions"},
			{"POST", "/lists/" + ref + "/rollup"}, {"GET", "/lists/" + ref + "/snapshot"},
			{"GET", "/lists/" + ref + "/audit"},
		}
		rng := rand.New(rand.NewPCG(1, 2))
		randomBytes := func(n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			return b
		}
		bodies := []any{
			"{\"title\": \"\\u0000\"}", "{\"content\": \"\\ud800\"}", `{"content": "` + "\xff\xfe" + `"}`,
			strings.Repeat("[", 20000), `{"a":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat("}", 5001),
			`{"limit": 1e999}`, `{"kind": {"$ne": 1}}`, `{"tags": [` + strings.Repeat(`"t",`, 1000) + `"t"]}`,
			`{"title": "` + strings.Repeat("☃", 5000) + `"}`, `{"dueAt": "9999-99-99T99:99:99Z", "content": "x", "status": "open"}`,
			`{"startsAt": "0000-01-01T00:00:00Z", "kind": "event", "title": "x"}`, `{"role": "owner\u0000"}`,
			`{"label": "` + strings.Repeat("x", 300) + `", "role": "viewer"}`, `{"status": ["open"]}`,
			randomBytes(64), randomBytes(4096),
		}
		queries := []string{"", "?limit=%00", "?cursor=%ff%fe", "?cursor=" + strings.Repeat("A", 5000), "?sv=%00", "?includeDeleted=%00", "?k=%00"}
		for _, ep := range endpoints {
			for i, b := range bodies {
				q := queries[i%len(queries)]
				t.Run(fmt.Sprintf("%s %s #%d", ep.method, ep.path, i), func(t *testing.T) {
					r := e.in(t).do(req{Method: ep.method, Path: ep.path + q, Code: owner, Body: b})
					if r.Status >= 400 {
						require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "%s", r.Body)
						require.NotEmpty(t, r.obj("error")["code"])
					}
				})
			}
		}
		// The list is still fine.
		expect(t, e.get("/lists/"+ref, owner), http.StatusOK)
	})
}
