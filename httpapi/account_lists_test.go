package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/yaps"
)

// TestEmptyAccountID: a host resolver that yields an Account without an ID
// (a session without a user) sent an invalid credential: 401 everywhere,
// counted against the client address, never a list stamped rolledUpAt
// without an account nor one "acct:" rate-limit bucket for all such users.
func TestEmptyAccountID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{
		limiter: limiter(t, ratelimit.Limits{
			yaps.LimitCreateList: {yaps.ClassAnonymous: {{Limit: 5, Period: time.Hour}}, yaps.ClassAuthenticated: {{Limit: 7, Period: time.Hour}}},
		}),
		cfg: httpapi.Config{Accounts: func(r *http.Request) (*yaps.Account, error) {
			if r.Header.Get("X-User") == "" {
				return nil, nil
			}
			return &yaps.Account{ID: r.Header.Get("X-User-ID")}, nil
		}},
	})
	ghost := map[string]string{"X-User": "ghost"}
	ref, owner := e.newList(nil)
	for _, tc := range []struct {
		name, method, path, code string
	}{
		{"create a list", "POST", "/lists", ""},
		{"list the account's lists", "GET", "/lists", ""},
		{"roll up", "POST", "/lists/" + ref + "/rollup", owner},
		{"read a list beside a code", "GET", "/lists/" + ref, owner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.in(t).do(req{Method: tc.method, Path: tc.path, Code: tc.code, Header: ghost})
			expectProblem(t, r, http.StatusUnauthorized, "unauthorized")
		})
	}
	t.Run("counted as anonymous", func(t *testing.T) {
		t.Parallel()
		r := e.in(t).do(req{Method: "POST", Path: "/lists", Header: ghost})
		expectProblem(t, r, http.StatusUnauthorized, "unauthorized")
		require.Equal(t, "5", r.Header.Get("X-RateLimit-Limit"))
	})
	t.Run("the list stays anonymous", func(t *testing.T) {
		t.Parallel()
		e := e.in(t)
		require.Nil(t, expect(t, e.get("/lists/"+ref, owner), http.StatusOK).obj("list")["rolledUpAt"])
		bob := map[string]string{"X-User": "bob", "X-User-ID": "bob"}
		r := expect(t, e.do(req{Method: "POST", Path: "/lists", Header: bob}), http.StatusCreated)
		require.NotNil(t, r.obj("list")["rolledUpAt"], "an account with an ID still works")
	})
}

// pageLists pages through GET /lists with key and limit ("" for the
// default) and returns the refs and the size of each page.
func pageLists(t *testing.T, e *env, key, limit string) (refs []string, sizes []int) {
	t.Helper()
	path := "/lists?limit=" + limit
	for {
		require.Less(t, len(sizes), 20, "paging does not terminate")
		r := expect(t, e.get(path, key), http.StatusOK)
		require.Contains(t, r.JSON, "nextCursor", "always present, null on the last page")
		lists := r.JSON["lists"].([]any)
		sizes = append(sizes, len(lists))
		for _, l := range lists {
			refs = append(refs, l.(map[string]any)["ref"].(string))
		}
		if r.JSON["nextCursor"] == nil {
			return refs, sizes
		}
		path = "/lists?limit=" + limit + "&cursor=" + r.str("nextCursor")
	}
}

// TestAccountListsPaging: GET /lists takes limit and cursor as GET
// /lists/{ref}/yaps does and answers nextCursor; lists come oldest first
// by (createdAt, ref), ties included.
func TestAccountListsPaging(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		key := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
		other := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
		withKey := map[string]string{"X-Account-Key": key}
		for i := range 7 {
			if i%3 == 0 { // the fake clock stands still: ties in threes
				e.clock.Advance(time.Millisecond)
			}
			expect(t, e.do(req{Method: "POST", Path: "/lists", Header: withKey}), http.StatusCreated)
		}
		for range 2 {
			expect(t, e.do(req{Method: "POST", Path: "/lists", Header: map[string]string{"X-Account-Key": other}}), http.StatusCreated)
		}
		all, sizes := pageLists(t, e, key, "200")
		require.Equal(t, []int{7}, sizes)
		for _, tc := range []struct {
			limit string
			sizes []int
		}{
			{"", []int{7}}, // default 50
			{"1", []int{1, 1, 1, 1, 1, 1, 1}},
			{"3", []int{3, 3, 1}},
			{"7", []int{7}},
		} {
			t.Run("limit="+tc.limit, func(t *testing.T) {
				refs, sizes := pageLists(t, e.in(t), key, tc.limit)
				require.Equal(t, all, refs)
				require.Equal(t, tc.sizes, sizes)
			})
		}
	})
}

// TestAccountListsBadQuery: a bad limit or cursor on GET /lists is 400
// bad_request like on GET /lists/{ref}/yaps, after the credential (401).
func TestAccountListsBadQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	var keys, cursors [2]string
	for i := range keys {
		keys[i] = expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
		for range 2 {
			expect(t, e.do(req{Method: "POST", Path: "/lists", Header: map[string]string{"X-Account-Key": keys[i]}}), http.StatusCreated)
		}
		cursors[i] = firstCursor(t, e, "/lists", keys[i])
	}
	ref, owner := e.newList(nil)
	e.addYap(ref, owner, task("a"))
	e.addYap(ref, owner, task("b"))
	yapsCursor := firstCursor(t, e, "/lists/"+ref+"/yaps", owner)
	c := cursors[0]
	edited := []byte(c)
	edited[len(edited)/2] ^= 1

	for _, tc := range []struct {
		name, query string
	}{
		{"limit 0", "limit=0"},
		{"limit 201", "limit=201"},
		{"limit -1", "limit=-1"},
		{"limit not a number", "limit=ten"},
		{"another account's cursor", "cursor=" + cursors[1]},
		{"a yaps cursor", "cursor=" + yapsCursor},
		{"a cursor cut short", "cursor=" + c[:len(c)-1]},
		{"an edited cursor", "cursor=" + string(edited)},
		{"a cursor that is not base64url", "cursor=%21%21"},
		{"a cursor too long", "cursor=" + strings.Repeat("A", 1025)},
		{"a query that does not decode", "cursor=%zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := e.in(t)
			expectProblem(t, e.get("/lists?"+tc.query, keys[0]), http.StatusBadRequest, "bad_request")
			expectProblem(t, e.get("/lists?"+tc.query, ""), http.StatusUnauthorized, "unauthorized")
		})
	}
	r := expect(t, e.get("/lists?limit=1&cursor="+c, keys[0]), http.StatusOK)
	require.Len(t, r.JSON["lists"], 1)
	require.Nil(t, r.JSON["nextCursor"])
}

// TestOpenAPIAccountLists: GET /lists documents its paging parameters, and
// its answers, on a middle and the last page, fit the documented schema.
func TestOpenAPIAccountLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	d := openAPI(t, e)
	o := d.op(t, "GET", "/lists")
	require.ElementsMatch(t, []string{"cursor", "limit"}, paramNames(o))
	schema := d.responseSchema(t, "GET", "/lists", http.StatusOK)
	require.Contains(t, d.resolve(schema)["properties"], "nextCursor")

	key := expect(t, e.do(req{Method: "POST", Path: "/accounts"}), http.StatusCreated).str("accountKey")
	for range 2 {
		expect(t, e.do(req{Method: "POST", Path: "/lists", Header: map[string]string{"X-Account-Key": key}}), http.StatusCreated)
	}
	first := expect(t, e.get("/lists?limit=1", key), http.StatusOK)
	last := expect(t, e.get("/lists?limit=1&cursor="+first.str("nextCursor"), key), http.StatusOK)
	for _, r := range []*resp{first, last} {
		require.NoError(t, d.validate(schema, decodeJSON(t, r.Body), "body"), "%s", r.Body)
	}
}

// TestAccountHint: a 401 that asks for an account credential names the
// built-in keys only when they are in use; a host's own resolver reads a
// credential Yaps cannot describe (and POST /accounts does not exist).
func TestAccountHint(t *testing.T) {
	t.Parallel()
	host := httpapi.Config{Accounts: func(*http.Request) (*yaps.Account, error) { return nil, nil }}
	for _, tc := range []struct {
		name    string
		cfg     httpapi.Config
		builtin bool
	}{{"built-in accounts", httpapi.Config{}, true}, {"host resolver", host, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, backends()[0], envOptions{cfg: tc.cfg})
			ref, owner := e.newList(nil)
			for path, hint := range map[string]string{
				"GET /lists":                     "Bearer yak_",
				"POST /lists/" + ref + "/rollup": "X-Account-Key",
			} {
				method, p, _ := strings.Cut(path, " ")
				code := ""
				if strings.Contains(p, "rollup") {
					code = owner
				}
				r := e.do(req{Method: method, Path: p, Code: code})
				expectProblem(t, r, http.StatusUnauthorized, "unauthorized")
				detail, _ := r.JSON["detail"].(string)
				require.Contains(t, detail, "account credential", path)
				if tc.builtin {
					require.Contains(t, detail, hint, path)
				} else {
					require.NotContains(t, detail, "yak_", path)
					require.NotContains(t, detail, "X-Account-Key", path)
				}
			}
		})
	}
}
