package yjs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRootName(t *testing.T) {
	t.Parallel()
	d := NewDoc()
	inner, text, el := NewMap(), NewText("x"), NewXmlElement("p")
	d.Transact(func(*Transaction) {
		d.GetMap("m").Set("inner", inner)
		inner.Set("text", text)
		d.GetXmlFragment("frag").Insert(0, el)
	}, nil)
	for _, tc := range []struct {
		typ  any
		root string
	}{
		{d.GetMap("m"), "m"}, {inner, "m"}, {text, "m"},
		{d.GetXmlFragment("frag"), "frag"}, {el, "frag"}, {d.GetText("t"), "t"},
	} {
		name, ok := RootName(tc.typ)
		require.True(t, ok, tc.root)
		require.Equal(t, tc.root, name)
	}
	_, ok := RootName(NewMap()) // prelim: in no document
	require.False(t, ok)
	_, ok = RootName("not a type")
	require.False(t, ok)
}
