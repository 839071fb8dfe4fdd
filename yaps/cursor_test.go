package yaps_test

import (
	"encoding/base64"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// cursorLists sets up the mix-up scenario: list B gets three yaps,
// then list A (later) three more, so a bare keyset position taken from A
// lies after everything in B. It returns the owners and the yap ids.
func cursorLists(t *testing.T, e *env) (a, b *yaps.Actor, aIDs, bIDs []string) {
	t.Helper()
	b = e.list()
	a = e.list()
	for _, l := range []struct {
		owner *yaps.Actor
		ids   *[]string
	}{{b, &bIDs}, {a, &aIDs}} {
		for i := range 3 {
			e.clock.Advance(time.Millisecond)
			y, _, err := e.svc.CreateYap(e.ctx, l.owner, yaps.KindTask, task(strconv.Itoa(i)), "", nil)
			require.NoError(t, err)
			*l.ids = append(*l.ids, y.ID)
		}
	}
	return a, b, aIDs, bIDs
}

// TestCursorBoundToList: a cursor is valid only on the list (and the
// endpoint) it was issued for; any other is EINVALID, never a page that
// silently skips items.
func TestCursorBoundToList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, aIDs, _ := cursorLists(t, e)

	yapsA, err := e.svc.ListYaps(e.ctx, a, "", 1, false)
	require.NoError(t, err)
	require.NotEmpty(t, yapsA.NextCursor)
	yapsB, err := e.svc.ListYaps(e.ctx, b, "", 1, false)
	require.NoError(t, err)
	require.NotEmpty(t, yapsB.NextCursor)
	auditA, err := e.svc.Audit(e.ctx, a, "", 1)
	require.NoError(t, err)
	require.NotEmpty(t, auditA.NextCursor)
	auditB, err := e.svc.Audit(e.ctx, b, "", 1)
	require.NoError(t, err)
	require.NotEmpty(t, auditB.NextCursor)

	// Cursors of the earlier, unbound format: a's first yap's position and
	// an audit seq. They are not accepted after the upgrade.
	first, err := e.svc.GetYap(e.ctx, a, aIDs[0])
	require.NoError(t, err)
	legacyYap := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(first.CreatedAt.UnixMilli(), 10) + "." + first.ID))
	legacyAudit := base64.RawURLEncoding.EncodeToString([]byte("a1"))

	listYaps := func(who *yaps.Actor, c string) error { _, err := e.svc.ListYaps(e.ctx, who, c, 1, false); return err }
	audit := func(who *yaps.Actor, c string) error { _, err := e.svc.Audit(e.ctx, who, c, 1); return err }
	for _, c := range []struct {
		name   string
		call   func(*yaps.Actor, string) error
		who    *yaps.Actor
		cursor string
		ok     bool
	}{
		{"yaps: own cursor", listYaps, a, yapsA.NextCursor, true},
		{"yaps: A's cursor on B", listYaps, b, yapsA.NextCursor, false},
		{"yaps: B's cursor on A", listYaps, a, yapsB.NextCursor, false},
		{"yaps: audit cursor of the same list", listYaps, a, auditA.NextCursor, false},
		{"yaps: legacy unbound cursor", listYaps, a, legacyYap, false},
		{"audit: own cursor", audit, a, auditA.NextCursor, true},
		{"audit: A's cursor on B", audit, b, auditA.NextCursor, false},
		{"audit: B's cursor on A", audit, a, auditB.NextCursor, false},
		{"audit: yaps cursor of the same list", audit, a, yapsA.NextCursor, false},
		{"audit: legacy unbound cursor", audit, a, legacyAudit, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(c.who, c.cursor)
			if c.ok {
				require.NoError(t, err)
			} else {
				requireCode(t, yaps.EINVALID, err)
			}
		})
	}
}

// TestCursorPagingInterleaved: a client paging two lists at once, yaps and
// audit log, gets every item of each list once and in order with its own
// cursors, and EINVALID whenever it hands one list the other's cursor.
func TestCursorPagingInterleaved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, aIDs, bIDs := cursorLists(t, e)
	type pager struct {
		owner  *yaps.Actor
		cursor string
		done   bool
		got    []string
	}
	for _, c := range []struct {
		name string
		page func(who *yaps.Actor, cursor string) (items []string, next string, err error)
	}{
		{"yaps", func(who *yaps.Actor, cursor string) ([]string, string, error) {
			p, err := e.svc.ListYaps(e.ctx, who, cursor, 1, false)
			if err != nil {
				return nil, "", err
			}
			var ids []string
			for _, y := range p.Yaps {
				ids = append(ids, y.ID)
			}
			return ids, p.NextCursor, nil
		}},
		{"audit", func(who *yaps.Actor, cursor string) ([]string, string, error) {
			p, err := e.svc.Audit(e.ctx, who, cursor, 1)
			if err != nil {
				return nil, "", err
			}
			var ids []string
			for _, en := range p.Entries {
				ids = append(ids, en.YapID)
			}
			return ids, p.NextCursor, nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := [2]*pager{{owner: a}, {owner: b}}
			for round := 0; !ps[0].done || !ps[1].done; round++ {
				require.Less(t, round, 10)
				for i, p := range ps {
					if p.done {
						continue
					}
					if other := ps[1-i]; other.cursor != "" {
						_, _, err := c.page(p.owner, other.cursor)
						requireCode(t, yaps.EINVALID, err)
					}
					items, next, err := c.page(p.owner, p.cursor)
					require.NoError(t, err)
					p.got = append(p.got, items...)
					p.cursor, p.done = next, next == ""
				}
			}
			require.Equal(t, aIDs, ps[0].got)
			require.Equal(t, bIDs, ps[1].got)
		})
	}
}
