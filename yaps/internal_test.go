package yaps

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

func TestRoleTable(t *testing.T) {
	t.Parallel()
	perm := func(r Role, sc ...Scope) *Permission { return &Permission{Role: r, Scopes: sc} }
	type row struct {
		name string
		p    *Permission
		// expected, in the order of ops below
		read, editList, archive, writeAny, writeTask, writeNote, writeEvent, manage, rollup, audit bool
	}
	rows := []row{
		{"owner", perm(RoleOwner), true, true, true, true, true, true, true, true, true, true},
		{"editor", perm(RoleEditor), true, true, false, true, true, true, true, false, false, false},
		{"viewer", perm(RoleViewer), true, false, false, false, false, false, false, false, false, false},
		{"agent default", perm(RoleAgent), true, false, false, true, true, false, false, false, false, false},
		{"agent tasks", perm(RoleAgent, ScopeTasksWrite), true, false, false, true, true, false, false, false, false, false},
		{"agent yaps", perm(RoleAgent, ScopeYapsWrite), true, false, false, true, true, true, true, false, false, false},
		{"unknown role", perm(Role("root")), false, false, false, false, false, false, false, false, false, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			a := &Actor{List: &List{Ref: "x"}, Permission: r.p}
			check := func(o op, k Kind, want bool) {
				t.Helper()
				err := a.can(o, k)
				if want {
					require.NoError(t, err, "%s %s", o, k)
				} else {
					require.Equal(t, EFORBIDDEN, ErrorCode(err), "%s %s", o, k)
				}
			}
			check(opRead, "", r.read)
			check(opEditList, "", r.editList)
			check(opArchiveList, "", r.archive)
			check(opWriteYap, "", r.writeAny)
			check(opWriteYap, KindTask, r.writeTask)
			check(opWriteYap, KindNote, r.writeNote)
			check(opWriteYap, KindEvent, r.writeEvent)
			check(opManage, "", r.manage)
			check(opRollup, "", r.rollup)
			check(opAudit, "", r.audit)
		})
	}
	require.Equal(t, EUNAUTHORIZED, ErrorCode((*Actor)(nil).can(opRead, "")))
}

func TestTextDiff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		old, new string
		index    int
		del      int
		ins      string
	}{
		{"", "", 0, 0, ""},
		{"", "abc", 0, 0, "abc"},
		{"abc", "", 0, 3, ""},
		{"Milk", "Oat milk", 0, 1, "Oat m"},
		{"hello world", "hello brave world", 6, 0, "brave "},
		{"hello brave world", "hello world", 6, 6, ""},
		{"abcdef", "abXYef", 2, 2, "XY"},
		{"aaa", "aaaa", 3, 0, "a"},
		// Surrogate pairs: 😀 is U+1F600 (D83D DE00), 😁 is U+1F601 (D83D DE01).
		// The pairs share the high surrogate; the edit must not split it.
		{"x😀y", "x😁y", 1, 2, "😁"},
		{"😀", "😀😀", 2, 0, "😀"},
		{"a😀b", "ab", 1, 2, ""},
		{"é😀", "é", 1, 2, ""},
		// 🙂 (D83D DE42) vs 😂 (D83D DE02): common high surrogate prefix, common suffix char.
		{"🙂!", "😂!", 0, 2, "😂"},
		// Shared low surrogate suffix: U+1F600 (D83D DE00) vs U+1F400 (D83D DC00)... and
		// U+10400 (D801 DC00) vs U+1F400 (D83D DC00) share the low surrogate.
		{"𐐀", "🐀", 0, 2, "🐀"},
	}
	for _, c := range cases {
		i, del, ins := textDiff(c.old, c.new)
		require.Equal(t, []any{c.index, c.del, c.ins}, []any{i, del, ins}, "%q -> %q", c.old, c.new)
		// Applying the edit in UTF-16 units gives new.
		u := utf16.Encode([]rune(c.old))
		out := append(append(append([]uint16{}, u[:i]...), utf16.Encode([]rune(ins))...), u[i+del:]...)
		require.Equal(t, c.new, string(utf16.Decode(out)))
	}
}

func TestCursors(t *testing.T) {
	t.Parallel()
	const ref = "AAAAAAAAAAAAAAAAAAAAAA"
	c := YapCursor{CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC), ID: "0193-abc_D"}
	got, err := decodeYapCursor(ref, encodeYapCursor(ref, c))
	require.NoError(t, err)
	require.True(t, c.CreatedAt.Equal(got.CreatedAt))
	require.Equal(t, c.ID, got.ID)
	for _, bad := range []string{"", "!!!", "bm9wZQ", "MTIz", "LTEuYWJj", "MTIzLg", "MTIzLmEvYg"} {
		_, err := decodeYapCursor(ref, bad)
		require.Equal(t, EINVALID, ErrorCode(err), bad)
	}
	n, err := decodeSeqCursor(ref, encodeSeqCursor(ref, 42))
	require.NoError(t, err)
	require.EqualValues(t, 42, n)

	// A cursor cut short, or with its position edited, never decodes to
	// another position: the tag covers the position.
	raw, err := base64.RawURLEncoding.DecodeString(encodeYapCursor(ref, c))
	require.NoError(t, err)
	for _, whole := range []string{encodeYapCursor(ref, c), encodeSeqCursor(ref, 4213)} {
		for i := 1; i < len(whole); i++ {
			_, errY := decodeYapCursor(ref, whole[:i])
			_, errA := decodeSeqCursor(ref, whole[:i])
			require.Equal(t, EINVALID, ErrorCode(errY), "%d of %d characters", i, len(whole))
			require.Equal(t, EINVALID, ErrorCode(errA), "%d of %d characters", i, len(whole))
		}
	}
	edited := bytes.Clone(raw)
	edited[len(edited)-cursorTagLen-1] = 'X' // the last character of the yap id
	_, err = decodeYapCursor(ref, base64.RawURLEncoding.EncodeToString(edited))
	require.Equal(t, EINVALID, ErrorCode(err))
	// The previous format: kind, a tag of the list alone, then the position.
	h := sha256.Sum256([]byte("yaps cursor\x00" + ref))
	previous := append(append([]byte{'A'}, h[:cursorTagLen]...), "42"...)
	_, err = decodeSeqCursor(ref, base64.RawURLEncoding.EncodeToString(previous))
	require.Equal(t, EINVALID, ErrorCode(err))
	for _, bad := range []string{"", "???", encodeYapCursor(ref, c)} {
		_, err := decodeSeqCursor(ref, bad)
		require.Equal(t, EINVALID, ErrorCode(err), bad)
	}
	for in, want := range map[int]int{0: 50, 1: 1, 200: 200} {
		got, err := pageLimit(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []int{-1, 201} {
		_, err := pageLimit(bad)
		require.Equal(t, EINVALID, ErrorCode(err))
	}
}

// TestListCursors: GET /lists cursors are bound to the account (there is
// no list ref to bind them to), and to their kind: a yaps cursor bound to
// the same string is not a list cursor.
func TestListCursors(t *testing.T) {
	t.Parallel()
	const acct = "0193a000-0000-7000-8000-000000000001"
	c := ListCursor{CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC), Ref: "AAAAAAAAAAAAAAAAAAAAAA"}
	whole := encodeListCursor(acct, c)
	got, err := decodeListCursor(acct, whole)
	require.NoError(t, err)
	require.Equal(t, &c, got)
	for _, tc := range []struct {
		name, acct, cursor string
	}{
		{"another account", "0193a000-0000-7000-8000-000000000002", whole},
		{"a yaps cursor", acct, encodeYapCursor(acct, YapCursor{CreatedAt: c.CreatedAt, ID: c.Ref})},
		{"an audit cursor", acct, encodeSeqCursor(acct, 7)},
		{"no ref", acct, encodeCursor(listCursorKind, acct, "123.")},
		{"a ref outside the alphabet", acct, encodeCursor(listCursorKind, acct, "123.a/b")},
		{"negative time", acct, encodeCursor(listCursorKind, acct, "-1.abc")},
		{"empty", acct, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeListCursor(tc.acct, tc.cursor)
			require.Equal(t, EINVALID, ErrorCode(err))
		})
	}
	for i := 1; i < len(whole); i++ {
		_, err := decodeListCursor(acct, whole[:i])
		require.Equal(t, EINVALID, ErrorCode(err), "%d of %d characters", i, len(whole))
	}
}

func TestETagMatches(t *testing.T) {
	t.Parallel()
	require.True(t, etagMatches(`"a"`, `"a"`))
	require.True(t, etagMatches(`W/"a"`, `"a"`))
	require.True(t, etagMatches(`"b", "a"`, `"a"`))
	require.True(t, etagMatches(`*`, `"a"`))
	require.False(t, etagMatches(`"b"`, `"a"`))
	require.NoError(t, checkIfMatch("", `"a"`))
	require.Equal(t, EPRECONDITION, ErrorCode(checkIfMatch(`"b"`, `"a"`)))
}

// sameYap compares what YapETag hashes, member by member.
func TestSameYapMatchesETag(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	later := at.Add(time.Millisecond)
	sub := at.Add(999 * time.Microsecond) // same millisecond
	s := func(v string) *string { return &v }
	p := PriorityHigh
	base := func() *Yap {
		return &Yap{ID: "y", ListRef: "l", Kind: KindTask, CreatedAt: at, UpdatedAt: at, Content: "c",
			Status: StatusOpen, Priority: &p, DueAt: &at, Tags: []string{"a", "b"}, Title: s("t"), Body: "b",
			StartsAt: &at, EndsAt: &at, Location: s("x")}
	}
	muts := []func(y *Yap){
		func(*Yap) {},
		func(y *Yap) { y.ID = "z" },
		func(y *Yap) { y.ListRef = "m" },
		func(y *Yap) { y.Kind = KindNote },
		func(y *Yap) { y.CreatedAt = later },
		func(y *Yap) { y.CreatedAt = sub },
		func(y *Yap) { y.UpdatedAt = later },
		func(y *Yap) { y.UpdatedAt = sub.In(time.FixedZone("x", 3600)) },
		func(y *Yap) { y.DeletedAt = &at },
		func(y *Yap) { y.Content = "d" },
		func(y *Yap) { y.Status = StatusDone },
		func(y *Yap) { y.Priority = nil },
		func(y *Yap) { q := PriorityLow; y.Priority = &q },
		func(y *Yap) { q := PriorityHigh; y.Priority = &q },
		func(y *Yap) { y.DueAt = nil },
		func(y *Yap) { y.DueAt = &later },
		func(y *Yap) { y.DueAt = &sub },
		func(y *Yap) { y.Tags = nil },
		func(y *Yap) { y.Tags = []string{"a"} },
		func(y *Yap) { y.Tags = []string{"b", "a"} },
		func(y *Yap) { y.Title = nil },
		func(y *Yap) { y.Title = s("") },
		func(y *Yap) { y.Title = s("t") },
		func(y *Yap) { y.Body = "" },
		func(y *Yap) { y.StartsAt = nil },
		func(y *Yap) { y.EndsAt = &later },
		func(y *Yap) { y.Location = nil },
		func(y *Yap) { y.Location = s("y") },
	}
	for i, m := range muts {
		y := base()
		m(y)
		require.Equal(t, YapETag(base()) == YapETag(y), sameYap(base(), y), "mutation %d", i)
		require.Equal(t, YapETag(base()) == YapETag(y), sameYap(y, base()), "mutation %d", i)
	}
	empty := base()
	empty.Tags = []string{}
	noTags := base()
	noTags.Tags = nil
	require.True(t, sameYap(empty, noTags))
	require.Equal(t, YapETag(empty), YapETag(noTags))
	require.True(t, sameYap(nil, nil))
	require.False(t, sameYap(base(), nil))
}

func TestCompactDue(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{CompactAfter: 200}}
	for _, c := range []struct {
		name                          string
		since, sinceBytes, stateBytes int64
		want                          bool
	}{
		{"few updates", 200, 1 << 20, 0, false},
		{"new list", 201, 4000, 0, true},
		{"small next to the state", 201, 9999, 10000, false},
		{"the state's size", 201, 10000, 10000, false},
		{"under four times the state's size", 201, 39999, 10000, false},
		{"four times the state's size", 201, 40000, 10000, true},
		{"tiny state, many small updates", 3200, 10, 63, false},
		{"past 16x CompactAfter", 3201, 10, 63, true},
		{"small state, many small updates", 3300, 100, 6400, false},
		{"past 16x CompactAfter and 100 more", 3301, 100, 6400, true},
		{"large state, many small updates", 3200 + 1<<24, 100, 1 << 30, false},
		{"past 16x CompactAfter and one per 64 bytes of state", 3201 + 1<<24, 100, 1 << 30, true},
	} {
		e := &docEntry{sinceState: c.since, sinceBytes: c.sinceBytes, stateBytes: c.stateBytes}
		require.Equal(t, c.want, s.compactDue(e), c.name)
	}
}

// TestSealedAnswers: a sealed record opens to its body and ETag; one sealed
// before ETags were kept (the plain body) still opens; a tampered length
// is an error, not a panic.
func TestSealedAnswers(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"y1"}`)
	for _, tag := range []string{"", `"abc"`, string(make([]byte, 300))} {
		sealed := sealRecord(&IdempotencyRecord{Scope: "s", Key: "k", Status: 201, Body: body, ETag: tag})
		require.Empty(t, sealed.ETag)
		require.NotContains(t, string(sealed.Body), `"id"`)
		opened, err := openRecord(sealed, "s", "k")
		require.NoError(t, err)
		require.Equal(t, body, opened.Body)
		require.Equal(t, tag, opened.ETag)
		_, err = openRecord(sealed, "s", "other key")
		require.Error(t, err)
	}
	// The layout before ETags: the sealed plaintext is the body itself.
	legacy := sealRecord(&IdempotencyRecord{Scope: "s", Key: "k", Body: body})
	opened, err := openRecord(legacy, "s", "k")
	require.NoError(t, err)
	require.Equal(t, body, opened.Body)
	require.Empty(t, opened.ETag)
	// A tagged plaintext whose length runs past its end.
	bad := sealRecord(&IdempotencyRecord{Scope: "s", Key: "k", Body: []byte{answerTagged, 200, 1, 'x'}})
	_, err = openRecord(bad, "s", "k")
	require.Error(t, err)
}

// TestMutationHoldsBounded: past maxMutationHolds live holds, a new one
// still takes effect (another makes room), so a spent key is never let
// through because the map is full.
func TestMutationHoldsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &Service{cfg: Config{Now: func() time.Time { return now }}}
	for i := range maxMutationHolds {
		s.hold(fmt.Sprint("ip:", i), now.Add(time.Minute))
	}
	a := &Actor{List: &List{}, Permission: &Permission{}, ClientIP: "192.0.2.99"}
	s.hold(holdKey(a), now.Add(time.Minute))
	require.Len(t, s.holds.until, maxMutationHolds)
	wait, held := s.mutationsHeld(a)
	require.True(t, held)
	require.Equal(t, time.Minute, wait)
	require.Equal(t, time.Minute, errMutationsHeld(wait).(*Error).RetryAfter)
	require.Equal(t, 2*time.Second, errMutationsHeld(1100*time.Millisecond).(*Error).RetryAfter, "rounded up")
	now = now.Add(time.Minute) // expired: dropped on the next look
	_, held = s.mutationsHeld(a)
	require.False(t, held)
}

// rereadYap reads again only the shared members an update changed; what
// it returns must be what readYap reads, and it must decline whenever a
// change was not inside one of those members.
func TestRereadYapMatchesRead(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	title := "Trip"
	prio := PriorityHigh
	for _, tc := range []struct {
		name  string
		yap   Yap
		setup func(m *yjs.Map) // before the yap is read, if set
		edit  func(m *yjs.Map)
		reads bool // rereadYap can tell
	}{
		{"insert into content", Yap{Kind: KindTask, Content: "Milk", Status: StatusOpen}, nil,
			func(m *yjs.Map) { text(m, "content").Insert(4, " and bread", nil) }, true},
		{"delete from content", Yap{Kind: KindTask, Content: "Milk and bread", Status: StatusOpen, Priority: &prio}, nil,
			func(m *yjs.Map) { text(m, "content").Delete(0, 5) }, true},
		{"format content", Yap{Kind: KindTask, Content: "Milk", Status: StatusOpen}, nil,
			func(m *yjs.Map) { text(m, "content").Format(0, 2, map[string]any{"bold": true}) }, true},
		{"note title and body", Yap{Kind: KindNote, Title: &title, Body: "pack", Tags: []string{"a"}}, nil,
			func(m *yjs.Map) {
				text(m, "title").Insert(0, "Ski ", nil)
				text(m, "body").Insert(4, " boots", nil)
			}, true},
		{"push a tag", Yap{Kind: KindNote, Body: "x", Tags: []string{"a"}}, nil,
			func(m *yjs.Map) { array(m, "tags").Push([]any{"b"}) }, true},
		{"delete a tag", Yap{Kind: KindNote, Body: "x", Tags: []string{"a", "b"}}, nil,
			func(m *yjs.Map) { array(m, "tags").Delete(0, 1) }, true},
		{"a tag that is not a string", Yap{Kind: KindNote, Body: "x", Tags: []string{"a"}}, nil,
			func(m *yjs.Map) { array(m, "tags").Push([]any{float64(1)}) }, true},
		{"set a member", Yap{Kind: KindTask, Content: "Milk", Status: StatusOpen}, nil,
			func(m *yjs.Map) { m.Set("status", "done") }, false},
		{"remove the title", Yap{Kind: KindNote, Title: &title, Body: "x"}, nil,
			func(m *yjs.Map) { m.Delete("title") }, false},
		{"text and member", Yap{Kind: KindTask, Content: "Milk", Status: StatusOpen}, nil,
			func(m *yjs.Map) {
				text(m, "content").Insert(0, "Oat ", nil)
				m.Set("status", "done")
			}, false},
		{"insert an embed", Yap{Kind: KindTask, Content: "Milk", Status: StatusOpen}, nil,
			func(m *yjs.Map) { text(m, "content").InsertEmbed(0, yjs.NewMap(), nil) }, true},
		{"inside an embed", Yap{Kind: KindTask, Content: "Milk", Status: StatusOpen},
			func(m *yjs.Map) { text(m, "content").InsertEmbed(0, yjs.NewMap(), nil) },
			func(m *yjs.Map) {
				for _, op := range text(m, "content").ToDelta() {
					if em, ok := op.Insert.(*yjs.Map); ok {
						em.Set("k", "v")
					}
				}
			}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := yjs.NewDoc()
			y := tc.yap
			y.ID, y.ListRef, y.CreatedAt, y.UpdatedAt = "y1", "L", now, now
			d.GetMap(rootYaps).Set("y1", newYapMap(&y))
			v, _ := d.GetMap(rootYaps).Get("y1")
			m := v.(*yjs.Map)
			if tc.setup != nil {
				tc.setup(m)
			}
			old, err := readYap("L", "y1", m)
			require.NoError(t, err)
			var changed []any
			unsub := d.OnAfterTransaction(func(tx *yjs.Transaction) {
				for ct := range tx.Changed() {
					changed = append(changed, ct)
				}
			})
			d.Transact(func(*yjs.Transaction) { tc.edit(m) }, nil)
			unsub()
			want, wantErr := readYap("L", "y1", m)
			got, ok, err := rereadYap(old, m, changed)
			require.Equal(t, tc.reads, ok)
			if !ok {
				return
			}
			if wantErr != nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.True(t, sameYap(want, got), "reread %+v, read %+v", got, want)
			require.Equal(t, want.Tags, got.Tags)
		})
	}
}

func text(m *yjs.Map, key string) *yjs.Text {
	v, _ := m.Get(key)
	return v.(*yjs.Text)
}

func array(m *yjs.Map, key string) *yjs.Array {
	v, _ := m.Get(key)
	return v.(*yjs.Array)
}

// sampleYaps returns a yap of every kind with every member set, or left
// out, at least once (without IDs and times but for the members').
func sampleYaps(now time.Time) []Yap {
	later := now.Add(time.Hour)
	title, loc := "Trip", "Oslo"
	prio := PriorityUrgent
	return []Yap{
		{Kind: KindTask, Content: "Milk", Status: StatusOpen},
		{Kind: KindTask, Content: "", Status: StatusDone, Priority: &prio, DueAt: &later, Tags: []string{"a", "b"}},
		{Kind: KindTask, Content: "x\u00e9\U0001F600", Status: StatusOpen, Tags: []string{}},
		{Kind: KindNote, Body: "pack\nboots", Title: &title, Tags: []string{"trip"}},
		{Kind: KindNote, Body: "pack\\nboots"},
		{Kind: KindNote, Body: ""},
		{Kind: KindEvent, Title: &title, StartsAt: &now, EndsAt: &later, Location: &loc},
		{Kind: KindTask, Content: "deleted", Status: StatusOpen, DeletedAt: &later},
	}
}

// What CreateYap hands commit instead of reading the new yap back
// (projected) is what readYap reads from the map newYapMap writes, for
// every kind and member.
func TestProjectedMatchesRead(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 123_000_000, time.UTC)
	for _, y := range sampleYaps(now) {
		y.ID, y.ListRef, y.CreatedAt, y.UpdatedAt = "y1", "L", now, now
		require.NoError(t, ValidateYap(&y))
		d := yjs.NewDoc()
		d.GetMap(rootYaps).Set("y1", newYapMap(&y))
		v, _ := d.GetMap(rootYaps).Get("y1")
		read, err := readYap("L", "y1", v)
		require.NoError(t, err)
		require.Equal(t, read, projected(&y), "%s", y.Kind)
	}
}

// setNewYap makes the update inserting newYapMap makes, byte for byte, for
// every kind and member, into an empty document and one with a yap.
func TestSetNewYapSameUpdate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 123_000_000, time.UTC)
	for i, y := range sampleYaps(now) {
		y.ID, y.ListRef, y.CreatedAt, y.UpdatedAt = fmt.Sprintf("y%d", i), "L", now, now
		for _, existing := range []bool{false, true} {
			updates := func(set func(ym *yjs.Map)) (tx []byte, state []byte) {
				d := yjs.NewDoc(yjs.WithClientID(7))
				ym := d.GetMap(rootYaps)
				if existing {
					prev := Yap{ID: "prev", ListRef: "L", Kind: KindNote, Body: "b", CreatedAt: now, UpdatedAt: now}
					d.Transact(func(*yjs.Transaction) { setNewYap(ym, &prev) }, nil)
				}
				unsub := d.OnUpdate(func(u []byte, _ any) { tx = u })
				d.Transact(func(*yjs.Transaction) { set(ym) }, nil)
				unsub()
				state, err := d.EncodeStateAsUpdate(nil)
				require.NoError(t, err)
				return tx, state
			}
			wantTx, wantState := updates(func(ym *yjs.Map) { ym.Set(y.ID, newYapMap(&y)) })
			gotTx, gotState := updates(func(ym *yjs.Map) { setNewYap(ym, &y) })
			require.NotEmpty(t, wantTx)
			require.Equal(t, wantTx, gotTx, "%s %d existing=%v", y.Kind, i, existing)
			require.Equal(t, wantState, gotState, "%s %d existing=%v", y.Kind, i, existing)
		}
	}
}

// setNewYap makes, byte for byte, the update of a yap map built member by
// member as a prelim map with a prelim text (how CreateYap wrote yaps).
func TestSetNewYapSameAsPrelim(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 123_000_000, time.UTC)
	y := Yap{ID: "y1", ListRef: "L", Kind: KindTask, Content: "Milk \U0001F600", Status: StatusOpen, CreatedAt: now, UpdatedAt: now}
	update := func(set func(ym *yjs.Map)) (u []byte) {
		d := yjs.NewDoc(yjs.WithClientID(7))
		unsub := d.OnUpdate(func(b []byte, _ any) { u = b })
		d.Transact(func(*yjs.Transaction) { set(d.GetMap(rootYaps)) }, nil)
		unsub()
		return u
	}
	want := update(func(ym *yjs.Map) {
		m := yjs.NewMap()
		m.Set("id", y.ID)
		m.Set("kind", string(y.Kind))
		m.Set("createdAt", FormatTime(y.CreatedAt))
		m.Set("updatedAt", FormatTime(y.UpdatedAt))
		m.Set("content", yjs.NewText(y.Content))
		m.Set("status", string(y.Status))
		ym.Set(y.ID, m)
	})
	require.Equal(t, want, update(func(ym *yjs.Map) { setNewYap(ym, &y) }))
	require.Equal(t, want, update(func(ym *yjs.Map) { ym.Set(y.ID, newYapMap(&y)) }))
}

// An edit inside an edit joins the outer edit's transaction, as nested
// yjs transactions do: the updates and origins recorded before stay, and
// the outer edit records one update holding both.
func TestNestedEditJoinsOuter(t *testing.T) {
	t.Parallel()
	d := yjs.NewDoc(yjs.WithClientID(7))
	m := d.GetMap("m")
	w := &writeOp{e: &docEntry{}, doc: d}
	w.edit(func() { m.Set("a", "A") }, "o1")
	w.edit(func() {
		w.edit(func() { m.Set("b", "B") }, "inner")
		m.Set("c", "C")
	}, "o2")
	require.Len(t, w.updates, 2)
	require.Equal(t, []any{"o1", "o2"}, w.origins)
	fresh := yjs.NewDoc()
	for _, u := range w.updates {
		require.NoError(t, fresh.ApplyUpdate(u, nil))
	}
	require.Equal(t, map[string]any{"a": "A", "b": "B", "c": "C"}, fresh.GetMap("m").ToJSON())
}

// fieldsPresent lists the fields in kindFields' order: each field set
// alone on a kind that lacks it is refused under its own name.
func TestWrongFieldNamed(t *testing.T) {
	t.Parallel()
	set := map[string]func(f *YapFields){
		"content":  func(f *YapFields) { f.Content = Set("x") },
		"status":   func(f *YapFields) { f.Status = Set(StatusOpen) },
		"priority": func(f *YapFields) { f.Priority = Set(PriorityUrgent) },
		"dueAt":    func(f *YapFields) { f.DueAt = Set(time.Unix(0, 0)) },
		"tags":     func(f *YapFields) { f.Tags = Set([]string{"a"}) },
		"title":    func(f *YapFields) { f.Title = Set("x") },
		"body":     func(f *YapFields) { f.Body = Set("x") },
		"startsAt": func(f *YapFields) { f.StartsAt = Set(time.Unix(0, 0)) },
		"endsAt":   func(f *YapFields) { f.EndsAt = Set(time.Unix(0, 0)) },
		"location": func(f *YapFields) { f.Location = Set("x") },
	}
	require.Len(t, set, len(kindFields))
	for _, x := range kindFields {
		var f YapFields
		require.Contains(t, set, x.name)
		set[x.name](&f)
		refused := false
		for _, k := range []Kind{KindTask, KindNote, KindEvent} {
			if slices.Contains(x.kinds, k) {
				continue
			}
			refused = true
			err := applyFields(&Yap{Kind: k}, &f, false)
			require.Equal(t, EINVALID, ErrorCode(err), "%s on a %s", x.name, k)
			require.Equal(t, fmt.Sprintf("wrong field for the kind %s: %s", k, x.name), ErrorMessage(err))
		}
		require.True(t, refused, "%s belongs to every kind", x.name)
	}
}
