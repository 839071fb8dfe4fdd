package yjs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Holds is true exactly when applying the update would change nothing:
// checked against ApplyUpdate on a copy for each case.
func TestHolds(t *testing.T) {
	t.Parallel()
	server := yjs.NewDoc(yjs.WithClientID(1))
	tx := server.GetText("t")
	tx.Insert(0, "hello world", nil)
	tx.Delete(0, 2) // "llo world": the server deleted "he"
	full, err := server.EncodeStateAsUpdate(nil)
	require.NoError(t, err)

	// deletion returns the update of deleting [index, index+n) of "t" on a
	// client that has the server's state.
	deletion := func(index, n int) []byte {
		c := copyDoc(t, server)
		sv := c.EncodeStateVector()
		c.GetText("t").Delete(index, n)
		u, err := c.EncodeStateAsUpdate(sv)
		require.NoError(t, err)
		return u
	}
	other := yjs.NewDoc(yjs.WithClientID(2))
	other.GetText("t").Insert(0, "x", nil)
	foreign, err := other.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	onlyDeletes := func(u []byte) []byte {
		t.Helper()
		// The delete set alone: an update with no structs (a viewer's
		// step 2 that only deletes).
		c := copyDoc(t, server)
		if u != nil {
			require.NoError(t, c.ApplyUpdate(u, nil))
		}
		out, err := c.EncodeStateAsUpdate(c.EncodeStateVector())
		require.NoError(t, err)
		return out
	}

	cases := []struct {
		name   string
		update []byte
		want   bool
	}{
		{"the server's own state", full, true},
		{"the empty update", []byte{0, 0}, true},
		{"its delete set alone", onlyDeletes(nil), true},
		{"a struct of another client", foreign, false},
		{"a deletion the server has not made", onlyDeletes(deletion(4, 1)), false},
		{"a client's deletion as it sends it", deletion(3, 2), false},
		{"a range the server deleted only in part", onlyDeletes(deletion(0, 1)), false},
	}
	for _, c := range cases {
		got, err := server.Holds(c.update)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
		// The definition: applying it to a copy changes nothing.
		cp := copyDoc(t, server)
		before, err := cp.EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		require.NoError(t, cp.ApplyUpdate(c.update, nil))
		after, err := cp.EncodeStateAsUpdate(nil)
		require.NoError(t, err)
		require.Equal(t, c.want, string(before) == string(after), "%s: Holds disagrees with ApplyUpdate", c.name)
	}

	// Deletions of structs the document does not have at all.
	d := yjs.NewDoc(yjs.WithClientID(3))
	require.NoError(t, d.ApplyUpdate(foreign, nil))
	d.GetText("t").Delete(0, 1)
	del, err := d.EncodeStateAsUpdate(d.EncodeStateVector())
	require.NoError(t, err)
	got, err := server.Holds(del)
	require.NoError(t, err)
	require.False(t, got, "a deletion of an unknown client")

	_, err = server.Holds([]byte{1, 2, 3})
	require.Error(t, err)
}
