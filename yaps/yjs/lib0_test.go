package yjs

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVarUintRoundTrip(t *testing.T) {
	t.Parallel()
	for _, v := range []uint64{0, 1, 127, 128, 255, 16383, 16384, 1<<32 - 1, 1 << 53, math.MaxUint64} {
		var e encoder
		e.writeVarUint(v)
		d := decoder{buf: e.buf}
		got, err := d.readVarUint()
		require.NoError(t, err)
		require.Equal(t, v, got)
		require.Zero(t, d.remaining())
	}
}

func TestVarIntMatchesLib0(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    int64
		want []byte
	}{
		{0, []byte{0}},
		{1, []byte{1}},
		{-1, []byte{0x41}},
		{63, []byte{63}},
		{64, []byte{0x80, 1}},
		{-64, []byte{0xc0, 1}},
		{math.MaxInt32, []byte{0xbf, 0xff, 0xff, 0xff, 0x0f}},
	}
	for _, c := range cases {
		var e encoder
		e.writeVarInt(c.v, false)
		require.Equal(t, c.want, e.buf, "%d", c.v)
		d := decoder{buf: e.buf}
		got, _, err := d.readVarInt()
		require.NoError(t, err)
		require.Equal(t, c.v, got)
	}
}

func TestAnyRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   any
		want any // decoded form
		tag  byte
	}{
		{"nil", nil, nil, 126},
		{"undefined", Undefined, Undefined, 127},
		{"true", true, true, 120},
		{"false", false, false, 121},
		{"int", 42, int64(42), 125},
		{"negative int", int64(-5), int64(-5), 125},
		{"int beyond 31 bits is a float", int64(1) << 40, float64(1 << 40), 124},
		{"integral float is an int", 3.0, int64(3), 125},
		{"float32", 1.5, 1.5, 124},
		{"float64", 0.1, 0.1, 123},
		{"string", "héllo 🌍", "héllo 🌍", 119},
		{"bytes", []byte{1, 2}, []byte{1, 2}, 116},
		{"array", []any{1, "a", nil}, []any{int64(1), "a", nil}, 117},
		{"object", map[string]any{"b": 1, "a": []any{true}}, map[string]any{"b": int64(1), "a": []any{true}}, 118},
		{"bigint", BigInt(-3), BigInt(-3), 122},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var e encoder
			require.NoError(t, e.writeAny(c.in))
			require.Equal(t, c.tag, e.buf[0])
			d := decoder{buf: e.buf}
			got, err := d.readAny()
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			require.Zero(t, d.remaining())
		})
	}
}

func TestAnyNegativeZero(t *testing.T) {
	t.Parallel()
	var e encoder
	require.NoError(t, e.writeAny(math.Copysign(0, -1)))
	require.Equal(t, []byte{125, 0x40}, e.buf)
	d := decoder{buf: e.buf}
	got, err := d.readAny()
	require.NoError(t, err)
	require.True(t, math.Signbit(got.(float64)))
}

func TestAnyKeyOrderLikeJavaScript(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"1", "2", "10", "a", "b"}, jsKeyOrder(map[string]any{"b": 0, "10": 0, "a": 0, "2": 0, "1": 0}))
}

func TestAnyHostile(t *testing.T) {
	t.Parallel()
	deep := make([]byte, 0, 2*maxAnyDepth+10)
	for i := 0; i < maxAnyDepth+5; i++ {
		deep = append(deep, 117, 1) // array of one element, nested
	}
	deep = append(deep, 126)
	cases := map[string][]byte{
		"empty":            {},
		"unknown tag":      {3},
		"huge array":       {117, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge string":      {119, 0xff, 0xff, 0xff, 0x7f},
		"truncated float":  {123, 1, 2},
		"truncated object": {118, 2, 1, 'a'},
		"too deep":         deep,
		"varint overflow":  {125, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	}
	for name, b := range cases {
		d := decoder{buf: b}
		_, err := d.readAny()
		require.Error(t, err, name)
		require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnexpectedEOF), name)
	}
}

func TestUTF16(t *testing.T) {
	t.Parallel()
	require.Equal(t, 5, utf16LenString("héllo"))
	require.Equal(t, 2, utf16LenString("😀"))
	l, r := splitUTF16([]byte("a😀b"), 2) // inside the surrogate pair
	require.Equal(t, "a\uFFFD", string(l))
	require.Equal(t, "\uFFFDb", string(r))
	l, r = splitUTF16([]byte("a😀b"), 3)
	require.Equal(t, "a😀", string(l))
	require.Equal(t, "b", string(r))
}

func TestContentRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		c    content
		n    int
	}{
		{"deleted", content{kind: kindDeleted}, 3},
		{"json", content{kind: kindJSON, ext: &contentExt{vals: []any{map[string]any{"a": 1.0}, "x", Undefined}}}, 3},
		{"binary", content{kind: kindBinary, ext: &contentExt{contentMore: &contentMore{bin: []byte{1, 2, 3}}}}, 1},
		{"string", content{kind: kindString, str: []byte("hi 😀")}, 5},
		{"embed", content{kind: kindEmbed, ext: &contentExt{contentMore: &contentMore{val: map[string]any{"image": "x.png"}}}}, 1},
		{"format", content{kind: kindFormat, ext: &contentExt{contentMore: &contentMore{key: "bold", val: true}}}, 1},
		{"type", content{kind: kindType, ext: &contentExt{typ: &NewXmlElement("p").typeBase}}, 1},
		{"any", content{kind: kindAny, ext: &contentExt{vals: []any{int64(1), "two", nil}}}, 3},
		{"doc", content{kind: kindDoc, ext: &contentExt{contentMore: &contentMore{key: "guid-1", val: map[string]any{}}}}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var e encoder
			c.c.write(&e, 0, c.n)
			d := decoder{buf: e.buf}
			got, n, err := readContent(&d, c.c.kind)
			require.NoError(t, err)
			require.Equal(t, c.n, n)
			require.Zero(t, d.remaining())
			var e2 encoder
			got.write(&e2, 0, n)
			require.Equal(t, e.buf, e2.buf, "lossless re-encoding")
			// truncated input is an error, never a panic
			for i := 0; i < len(e.buf); i++ {
				d := decoder{buf: e.buf[:i]}
				if _, _, err := readContent(&d, c.c.kind); err == nil && c.c.kind != kindDeleted {
					require.Less(t, d.pos, len(e.buf), "truncated at %d decoded", i)
				}
			}
		})
	}
}
