package yjs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkAny rejects exactly the values writeAny cannot encode, nested ones
// included.
func TestCheckAnyAgreesWithWriteAny(t *testing.T) {
	t.Parallel()
	type point struct{ X int }
	values := []any{
		nil, undefinedValue{}, true, "text", "\xff", 1, int8(-2), int16(3), int32(4), int64(1 << 40),
		uint(5), uint8(6), uint16(7), uint32(8), uint64(1 << 63), float32(1.5), 2.25, BigInt(9),
		[]byte{1}, []string{"a"}, []any{1, "b", []any{nil}}, map[string]any{"a": 1, "b": map[string]any{"c": []any{true}}},
		point{1}, &point{2}, []int{1}, map[string]int{"a": 1}, struct{}{}, func() {}, make(chan int),
		[]any{1, point{3}}, map[string]any{"a": []any{map[string]any{"b": func() {}}}},
	}
	for _, v := range values {
		var e encoder
		want := e.writeAny(v)
		got := checkAny(v)
		require.Equal(t, want == nil, got == nil, "%#v", v)
		if want != nil {
			require.True(t, errors.Is(got, ErrUnsupported), "%#v", v)
			require.Equal(t, want.Error(), got.Error())
		}
	}
}
