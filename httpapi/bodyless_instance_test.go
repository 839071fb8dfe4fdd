package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// countingStore counts the accounts created through it.
type countingStore struct {
	yaps.Store
	accounts atomic.Int64
}

func (s *countingStore) CreateAccount(ctx context.Context, a *yaps.Account) error {
	err := s.Store.CreateAccount(ctx, a)
	if err == nil {
		s.accounts.Add(1)
	}
	return err
}

// TestCreateAccountBody: POST /accounts takes no body, like
// rollup and rotate-owner: nothing, null or {} create an account; members,
// malformed JSON and oversized bodies are 400/413 and create none.
func TestCreateAccountBody(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			var store *countingStore
			counted := backend{name: b.name, open: func(t *testing.T) yaps.Store {
				store = &countingStore{Store: b.open(t)}
				return store
			}}
			e := newEnv(t, counted, envOptions{})
			for _, tc := range []struct {
				name   string
				body   any // nil: none
				status int
				code   string
			}{
				{"no body", nil, http.StatusCreated, ""},
				{"empty", "", http.StatusCreated, ""},
				{"whitespace", " \n", http.StatusCreated, ""},
				{"null", "null", http.StatusCreated, ""},
				{"empty object", "{}", http.StatusCreated, ""},
				{"malformed", "{bad", http.StatusBadRequest, "bad_request"},
				{"unknown member", `{"nope":1}`, http.StatusBadRequest, "bad_request"},
				{"array", "[1,2]", http.StatusBadRequest, "bad_request"},
				{"string", `"x"`, http.StatusBadRequest, "bad_request"},
				{"trailing data", "{} {}", http.StatusBadRequest, "bad_request"},
				{"invalid UTF-8", "{\"\xff\":1}", http.StatusBadRequest, "bad_request"},
				{"over 1 MiB", `{"x":"` + strings.Repeat("a", 2<<20) + `"}`, http.StatusRequestEntityTooLarge, "payload_too_large"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					before := store.accounts.Load()
					r := e.in(t).do(req{Method: "POST", Path: "/accounts", Body: tc.body})
					if tc.code != "" {
						expectProblem(t, r, tc.status, tc.code)
						require.Equal(t, before, store.accounts.Load(), "a rejected body created an account")
						return
					}
					expect(t, r, tc.status)
					require.True(t, strings.HasPrefix(r.str("accountKey"), "yak_"))
					require.Equal(t, before+1, store.accounts.Load())
					// The key works.
					expect(t, e.in(t).do(req{Method: "GET", Path: "/lists", Code: r.str("accountKey")}), http.StatusOK)
				})
			}
		})
	}
}

// uriChars are the characters a URI reference may hold (RFC 3986:
// unreserved, reserved and the % of percent-encodings).
const uriChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~:/?#[]@!$&'()*+,;=%"

// TestProblemInstanceIsURI: the Problem instance is the
// escaped request path, a URI reference (INTERFACE §2.4): no raw space,
// quote or control character, and %2F stays escaped.
func TestProblemInstanceIsURI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{})
	ref, owner := e.newList(nil)
	for _, tc := range []struct {
		name     string
		method   string
		path     string // as sent, relative to the prefix
		code     string
		status   int
		errCode  string
		instance string // relative to the prefix
	}{
		{"space and quote in a ref", "GET", "/lists/a%20b%22c", "", 404, "not_found", "/lists/a%20b%22c"},
		{"LF in a yap id", "GET", "/lists/" + ref + "/yaps/x%0Ay", owner, 404, "not_found", "/lists/" + ref + "/yaps/x%0Ay"},
		{"LF in a yap id, no code", "GET", "/lists/" + ref + "/yaps/x%0Ay", "", 401, "unauthorized", "/lists/" + ref + "/yaps/x%0Ay"},
		{"escaped slash", "GET", "/lists/" + ref + "/yaps/a%2Fb", owner, 404, "not_found", "/lists/" + ref + "/yaps/a%2Fb"},
		{"escaped slash in a write", "PATCH", "/lists/" + ref + "/yaps/a%2Fb", owner, 404, "not_found", "/lists/" + ref + "/yaps/a%2Fb"},
		{"unknown endpoint", "GET", "/no%20such/%22thing%22", "", 404, "not_found", "/no%20such/%22thing%22"},
		{"method not allowed", "PUT", "/lists/a%20b", "", 405, "method_not_allowed", "/lists/a%20b"},
		{"non-ASCII", "GET", "/lists/%C3%A9t%C3%A9", "", 404, "not_found", "/lists/%C3%A9t%C3%A9"},
		{"query left out", "GET", "/lists/a%20b?k=" + owner, "", 404, "not_found", "/lists/a%20b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.in(t).do(req{Method: tc.method, Path: tc.path, Code: tc.code})
			expectProblem(t, r, tc.status, tc.errCode)
			inst, _ := r.JSON["instance"].(string)
			require.Equal(t, e.prefix+tc.instance, inst)
			for _, c := range inst {
				require.True(t, strings.ContainsRune(uriChars, c), "instance %q holds %q, not a URI character", inst, c)
			}
			u, err := url.Parse(inst)
			require.NoError(t, err)
			require.Empty(t, u.RawQuery)
		})
	}
}
