package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cursorListsHTTP sets up the mix-up scenario over HTTP: list B gets
// three yaps, then list A (later) three more. It returns each list's ref,
// owner code and yap ids, A first.
func cursorListsHTTP(e *env) (refs, owners [2]string, ids [2][]string) {
	refs[1], owners[1] = e.newList(nil)
	refs[0], owners[0] = e.newList(nil)
	for _, i := range []int{1, 0} {
		for n := range 3 {
			e.clock.Advance(time.Millisecond)
			ids[i] = append(ids[i], e.addYap(refs[i], owners[i], task(strconv.Itoa(n)))["id"].(string))
		}
	}
	return refs, owners, ids
}

// firstCursor returns the nextCursor of the first one-item page of path.
func firstCursor(t *testing.T, e *env, path, code string) string {
	t.Helper()
	r := expect(t, e.get(path+"?limit=1", code), http.StatusOK)
	c := r.str("nextCursor")
	require.NotEmpty(t, c, "body: %s", r.Body)
	return c
}

// TestCursorForeignList: a cursor is good only on the list and endpoint it
// was issued for. Another list's cursor is 400 bad_request like any bad
// cursor (RULINGS R3), not a 200 with an empty last page.
func TestCursorForeignList(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		refs, owners, ids := cursorListsHTTP(e)
		yapsPath := func(i int) string { return "/lists/" + refs[i] + "/yaps" }
		auditPath := func(i int) string { return "/lists/" + refs[i] + "/audit" }
		yapsCur := [2]string{firstCursor(t, e, yapsPath(0), owners[0]), firstCursor(t, e, yapsPath(1), owners[1])}
		auditCur := [2]string{firstCursor(t, e, auditPath(0), owners[0]), firstCursor(t, e, auditPath(1), owners[1])}

		// Cursors in the format before lists were bound: a bare position.
		first := expect(t, e.get(yapsPath(0)+"/"+ids[0][0], owners[0]), http.StatusOK)
		at, err := time.Parse(time.RFC3339Nano, first.str("createdAt"))
		require.NoError(t, err)
		legacyYaps := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMilli(), 10) + "." + ids[0][0]))
		legacyAudit := base64.RawURLEncoding.EncodeToString([]byte("a1"))

		for _, c := range []struct {
			name   string
			path   string
			list   int // whose code is sent
			cursor string
			status int
		}{
			{"yaps: own cursor", yapsPath(0), 0, yapsCur[0], http.StatusOK},
			{"yaps: A's cursor on B", yapsPath(1), 1, yapsCur[0], http.StatusBadRequest},
			{"yaps: B's cursor on A", yapsPath(0), 0, yapsCur[1], http.StatusBadRequest},
			{"yaps: audit cursor", yapsPath(0), 0, auditCur[0], http.StatusBadRequest},
			{"yaps: legacy cursor", yapsPath(0), 0, legacyYaps, http.StatusBadRequest},
			{"audit: own cursor", auditPath(0), 0, auditCur[0], http.StatusOK},
			{"audit: A's cursor on B", auditPath(1), 1, auditCur[0], http.StatusBadRequest},
			{"audit: B's cursor on A", auditPath(0), 0, auditCur[1], http.StatusBadRequest},
			{"audit: yaps cursor", auditPath(0), 0, yapsCur[0], http.StatusBadRequest},
			{"audit: legacy cursor", auditPath(0), 0, legacyAudit, http.StatusBadRequest},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.in(t).get(c.path+"?limit=1&cursor="+c.cursor, owners[c.list])
				if c.status == http.StatusOK {
					expect(t, r, http.StatusOK)
					return
				}
				expectProblem(t, r, c.status, "bad_request")
			})
		}
	})
}

// TestCursorPagingTwoLists: a client paging two lists at once gets every
// yap and audit entry of each once, in order, with each list's own
// cursors, and 400 whenever it sends one list the other's cursor.
func TestCursorPagingTwoLists(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		refs, owners, ids := cursorListsHTTP(e)
		for _, c := range []struct {
			endpoint string // under /lists/{ref}/
			items    string // the array member of the page
			idKey    string // the member of an item naming the yap
		}{
			{"yaps", "yaps", "id"},
			{"audit", "entries", "yapId"},
		} {
			t.Run(c.endpoint, func(t *testing.T) {
				e := e.in(t)
				var cursors [2]string
				var got [2][]string
				var done [2]bool
				for round := 0; !done[0] || !done[1]; round++ {
					require.Less(t, round, 10)
					for i := range 2 {
						if done[i] {
							continue
						}
						path := "/lists/" + refs[i] + "/" + c.endpoint + "?limit=1"
						if other := cursors[1-i]; other != "" {
							expectProblem(t, e.get(path+"&cursor="+other, owners[i]), http.StatusBadRequest, "bad_request")
						}
						if cursors[i] != "" {
							path += "&cursor=" + cursors[i]
						}
						r := expect(t, e.get(path, owners[i]), http.StatusOK)
						for _, it := range r.JSON[c.items].([]any) {
							got[i] = append(got[i], it.(map[string]any)[c.idKey].(string))
						}
						cursors[i] = r.str("nextCursor")
						done[i] = r.JSON["nextCursor"] == nil
					}
				}
				require.Equal(t, ids, got)
			})
		}
	})
}
