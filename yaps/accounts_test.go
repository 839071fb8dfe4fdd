package yaps_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// TestEmptyAccountID: an Account without an ID (a host resolver's session
// without a user) is no credential anywhere. CreateList used to accept it
// and stamp rolledUpAt on a list no account holds, which a later rollup
// then merged again.
func TestEmptyAccountID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.list()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"CreateList", func() error {
			_, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Account: &yaps.Account{}})
			return err
		}},
		{"CreateList with an Idempotency-Key", func() error {
			_, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Account: &yaps.Account{},
				IdempotencyKey: "k1", RequestHash: []byte("h")})
			return err
		}},
		{"Rollup", func() error {
			_, err := e.svc.Rollup(e.ctx, owner, &yaps.Account{})
			return err
		}},
		{"AccountLists", func() error {
			_, err := e.svc.AccountLists(e.ctx, &yaps.Account{}, "", 0)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireCode(t, yaps.EUNAUTHORIZED, tc.call())
		})
	}
	// The list was not touched: a real account can still take it.
	acct, _, err := e.svc.CreateAccount(e.ctx)
	require.NoError(t, err)
	merged, err := e.svc.Rollup(e.ctx, owner, acct)
	require.NoError(t, err)
	require.True(t, merged)
}

// accountLists pages through acct's lists with limit and returns their refs
// and the size of each page.
func accountLists(t *testing.T, e *env, acct *yaps.Account, limit int) (refs []string, sizes []int) {
	t.Helper()
	cursor := ""
	for {
		require.Less(t, len(sizes), 100, "paging does not terminate")
		page, err := e.svc.AccountLists(e.ctx, acct, cursor, limit)
		require.NoError(t, err)
		sizes = append(sizes, len(page.Lists))
		for _, l := range page.Lists {
			require.Equal(t, acct.ID, l.AccountID)
			refs = append(refs, l.Ref)
		}
		if page.NextCursor == "" {
			return refs, sizes
		}
		cursor = page.NextCursor
	}
}

// TestAccountListsPaging: GET /lists is paged like GET /lists/{ref}/yaps
// (default 50, at most 200), oldest first by (createdAt, ref) across
// createdAt ties, and only the last page has no cursor.
func TestAccountListsPaging(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *env, _ string) {
		acct, _, err := e.svc.CreateAccount(e.ctx)
		require.NoError(t, err)
		other, _, err := e.svc.CreateAccount(e.ctx)
		require.NoError(t, err)
		const n = yaps.DefaultPageLimit + 2
		var want []*yaps.List
		for i := range n {
			if i%3 == 0 { // lists tie on createdAt in threes
				e.clock.Advance(time.Millisecond)
			}
			cl, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Account: acct})
			require.NoError(t, err)
			want = append(want, cl.List)
			_, err = e.svc.CreateList(e.ctx, yaps.CreateListInput{Account: other})
			require.NoError(t, err)
		}
		e.list() // anonymous
		slices.SortFunc(want, func(a, b *yaps.List) int {
			return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Ref, b.Ref))
		})
		wantRefs := make([]string, n)
		for i, l := range want {
			wantRefs[i] = l.Ref
		}

		for _, tc := range []struct {
			name  string
			limit int
			sizes []int
		}{
			{"default 50", 0, []int{50, 2}},
			{"1", 1, slices.Repeat([]int{1}, n)},
			{"3 across ties", 3, append(slices.Repeat([]int{3}, n/3), n%3)},
			{"half: the last page is full", n / 2, []int{n / 2, n / 2}},
			{"all in one page", n, []int{n}},
			{"200", yaps.MaxPageLimit, []int{n}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				refs, sizes := accountLists(t, e, acct, tc.limit)
				require.Equal(t, wantRefs, refs)
				require.Equal(t, tc.sizes, sizes)
			})
		}

		for _, bad := range []int{-1, yaps.MaxPageLimit + 1} {
			_, err := e.svc.AccountLists(e.ctx, acct, "", bad)
			requireCode(t, yaps.EINVALID, err)
		}
	})
}

// TestAccountListsCursor: a GET /lists cursor is good only for the account
// it was issued to, and only whole; anything else is EINVALID (400), not a
// position that skips lists.
func TestAccountListsCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var accts [2]*yaps.Account
	var cursors [2]string
	for i := range accts {
		acct, _, err := e.svc.CreateAccount(e.ctx)
		require.NoError(t, err)
		accts[i] = acct
		for range 2 {
			_, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Account: acct})
			require.NoError(t, err)
		}
		page, err := e.svc.AccountLists(e.ctx, acct, "", 1)
		require.NoError(t, err)
		require.NotEmpty(t, page.NextCursor)
		cursors[i] = page.NextCursor
	}
	// A cursor of GET /lists/{ref}/yaps.
	owner := e.list()
	for _, c := range []string{"a", "b"} {
		_, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task(c), "", nil)
		require.NoError(t, err)
	}
	yapPage, err := e.svc.ListYaps(e.ctx, owner, "", 1, false)
	require.NoError(t, err)

	c := cursors[0]
	flipped := []byte(c)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		name   string
		cursor string
	}{
		{"another account's cursor", cursors[1]},
		{"a yaps cursor", yapPage.NextCursor},
		{"cut short", c[:len(c)-1]},
		{"edited", string(flipped)},
		{"not base64url", "!!!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.AccountLists(e.ctx, accts[0], tc.cursor, 1)
			requireCode(t, yaps.EINVALID, err)
		})
	}
	page, err := e.svc.AccountLists(e.ctx, accts[0], c, 1)
	require.NoError(t, err)
	require.Len(t, page.Lists, 1)
	require.Empty(t, page.NextCursor)
}
