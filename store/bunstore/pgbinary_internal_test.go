package bunstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// The batcher's own array encoding gives the bytes pgx's type map gives for
// every argument type of the batch statement.
func TestArrayParamsMatchPgx(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	i64 := func(n int64) *int64 { return &n }
	m := pgtype.NewMap()
	for _, c := range []struct {
		name string
		oid  uint32
		v    any
	}{
		{"text", oidTextArray, []string{"a", "", "ünïcødé ✓", "x\x00y"}},
		{"text, one", oidTextArray, []string{"ref"}},
		{"text, empty", oidTextArray, []string{}},
		{"text, NULLs", oidTextArray, []*string{str("acct"), nil, str("")}},
		{"text, no NULL", oidTextArray, []*string{str("acct")}},
		{"text, all NULL", oidTextArray, []*string{nil, nil}},
		{"bytea", oidByteaArray, [][]byte{{0, 1, 2, 255}, {}, []byte("state")}},
		{"bytea, empty", oidByteaArray, [][]byte{}},
		{"bytea, NULL", oidByteaArray, [][]byte{[]byte("x"), nil, {}}},
		{"bigint", oidInt8Array, []int64{0, -1, 1 << 62, -1 << 63, 1764400000000}},
		{"bigint, NULLs", oidInt8Array, []*int64{nil, i64(7), i64(-7)}},
		{"bigint, no NULL", oidInt8Array, []*int64{i64(42)}},
		{"bigint, empty", oidInt8Array, []int64{}},
		{"int", oidInt4Array, []int32{1, 0, -1, 1<<31 - 1, -1 << 31}},
		{"int, empty", oidInt4Array, []int32{}},
	} {
		want, err := m.Encode(c.oid, pgtype.BinaryFormatCode, c.v, nil)
		require.NoError(t, err, c.name)
		got, err := appendArrayParam([]byte("prefix"), c.oid, c.v)
		require.NoError(t, err, c.name)
		require.Equal(t, "prefix", string(got[:6]), c.name)
		require.Equal(t, want, got[6:], c.name)
	}
}

func TestArrayParamsRefuseOtherTypes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		oid uint32
		v   any
	}{
		{oidTextArray, []int64{1}},
		{oidInt8Array, []string{"1"}},
		{oidInt4Array, []int64{1}},
		{oidByteaArray, []string{"x"}},
		{oidText, "x"}, // not an array
	} {
		_, err := appendArrayParam(nil, c.oid, c.v)
		require.Error(t, err, "%T as %d", c.v, c.oid)
	}
	_, _, err := encodeArrayParams(nil, []uint32{oidTextArray}, []any{[]string{"a"}, []string{"b"}})
	require.Error(t, err)
}

// encodeArrayParams slices every value out of one buffer, after it grew:
// each value is its own encoding, and appending to one cannot clobber the
// next.
func TestEncodeArrayParams(t *testing.T) {
	t.Parallel()
	oids := []uint32{oidTextArray, oidInt8Array, oidByteaArray}
	args := []any{[]string{"a", "bc"}, []int64{5}, [][]byte{make([]byte, 4096)}}
	vals, buf, err := encodeArrayParams(make([]byte, 0, 8), oids, args)
	require.NoError(t, err)
	require.Len(t, vals, 3)
	total := 0
	for i, v := range vals {
		want, err := appendArrayParam(nil, oids[i], args[i])
		require.NoError(t, err)
		require.Equal(t, want, v)
		require.Equal(t, len(v), cap(v), "value %d may grow into the next", i)
		total += len(v)
	}
	require.Len(t, buf, total)
}

// BenchmarkBatchParams encodes the batch statement's arguments for eight
// created yaps (the create-yap benchmark's usual batch): the batcher's own
// encoding against pgx's type map, which the batcher used before.
func BenchmarkBatchParams(b *testing.B) {
	now := time.UnixMilli(1764400000000).UTC()
	rs := make([]*prepReq, 8)
	for i := range rs {
		ref := fmt.Sprintf("list-%02d-xxxxxxxxxxxxxx", i)
		row := &yaps.List{Ref: ref, Title: "bench list", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now, DocVersion: 41}
		next := *row
		next.DocVersion++
		y := &yaps.Yap{ID: fmt.Sprintf("0193a5b2-7c4d-7e8f-9a0b-%012d", i), ListRef: ref, Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}
		rs[i] = &prepReq{p: &yaps.PreparedWrite{Expect: row, PermissionID: "perm-" + ref, List: &next, Ops: []yaps.PreparedOp{
			{Update: make([]byte, 320)},
			{PutYap: y, NewYap: true},
			{Audit: &yaps.AuditEntry{ListRef: ref, At: now, PermissionID: "perm-" + ref, Role: yaps.RoleOwner, Action: "yap.create", YapID: y.ID}},
		}}}
	}
	m, ok := collectMulti(rs)
	require.True(b, ok)
	_, args := m.statement()
	oids := make([]uint32, len(args))
	for i, a := range args {
		switch a.(type) {
		case []string, []*string:
			oids[i] = oidTextArray
		case []int64, []*int64:
			oids[i] = oidInt8Array
		case []int32:
			oids[i] = oidInt4Array
		case [][]byte:
			oids[i] = oidByteaArray
		default:
			b.Fatalf("argument %d: %T", i, a)
		}
	}
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if _, buf, err = encodeArrayParams(buf[:0], oids, args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pgx", func(b *testing.B) {
		b.ReportAllocs()
		m := pgtype.NewMap()
		for b.Loop() {
			for i, a := range args {
				if _, err := m.Encode(oids[i], pgtype.BinaryFormatCode, a, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
