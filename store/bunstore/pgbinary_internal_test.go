package bunstore

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
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
