package yjs_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// A text inserted empty and then filled makes, byte for byte, the update
// and the state of the text constructed with its content (yaps' writeYap
// relies on it), when it replaces a plain string, a text, a formatted text
// or a text with an embed on a map in a document, and in a prelim map.
func TestTextFilledAfterSetSameUpdate(t *testing.T) {
	t.Parallel()
	olds := map[string]func(m *yjs.Map){
		"absent": func(*yjs.Map) {},
		"string": func(m *yjs.Map) { m.Set("k", "old") },
		"text":   func(m *yjs.Map) { m.Set("k", yjs.NewText("old\ntext")) },
		"formatted": func(m *yjs.Map) {
			txt := yjs.NewText("")
			m.Set("k", txt)
			txt.Insert(0, "old text", map[string]any{"bold": true})
			txt.Format(1, 2, map[string]any{"italic": true})
		},
		"embed": func(m *yjs.Map) {
			txt := yjs.NewText("")
			m.Set("k", txt)
			txt.Insert(0, "ab", nil)
			txt.InsertEmbed(1, map[string]any{"image": "x"}, nil)
		},
	}
	constructed := func(m *yjs.Map, s string) { m.Set("k", yjs.NewText(s)) }
	filled := func(m *yjs.Map, s string) {
		txt := yjs.NewText("")
		m.Set("k", txt)
		if s != "" {
			txt.Insert(0, s, nil)
		}
	}
	for _, s := range []string{"", "abc", "x\u00e9\U0001F600\u4e2d", "line 1\nline 2\n"} {
		for name, old := range olds {
			for _, prelim := range []bool{false, true} {
				run := func(set func(m *yjs.Map, s string)) (update, state []byte) {
					d := yjs.NewDoc(yjs.WithClientID(7))
					root := d.GetMap("m")
					d.Transact(func(*yjs.Transaction) { old(root) }, nil)
					unsub := d.OnUpdate(func(u []byte, _ any) { update = u })
					d.Transact(func(*yjs.Transaction) {
						if prelim {
							m := yjs.NewMap()
							set(m, s)
							root.Set("p", m)
						} else {
							set(root, s)
						}
					}, nil)
					unsub()
					state, err := d.EncodeStateAsUpdate(nil)
					require.NoError(t, err)
					return update, state
				}
				what := fmt.Sprintf("%q over %s, prelim %v", s, name, prelim)
				wantUpdate, wantState := run(constructed)
				gotUpdate, gotState := run(filled)
				require.NotEmpty(t, wantUpdate, what)
				require.Equal(t, wantUpdate, gotUpdate, what)
				require.Equal(t, wantState, gotState, what)

				// And the text reads back as s.
				d := yjs.NewDoc()
				require.NoError(t, d.ApplyUpdate(gotState, nil))
				m := d.GetMap("m")
				if prelim {
					v, _ := m.Get("p")
					m = v.(*yjs.Map)
				}
				v, _ := m.Get("k")
				require.Equal(t, s, v.(*yjs.Text).String(), what)
			}
		}
	}
}
