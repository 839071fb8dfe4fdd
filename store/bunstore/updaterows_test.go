package bunstore

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUpdateRows(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{7}, 200)
	for _, tc := range []struct {
		name    string
		updates [][]byte
	}{
		{"one", [][]byte{[]byte("a")}},
		{"one empty", [][]byte{{}}},
		{"several", [][]byte{[]byte("a"), {}, big, []byte("z")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := int64(len(tc.updates))
			data := packUpdates(tc.updates)
			for after := int64(-1); after <= 12; after++ {
				// The row holds seqs 10-n+1 .. 10.
				got, err := appendRowUpdates(nil, 10, n, data, after)
				require.NoError(t, err)
				skip := min(max(after-(10-n), 0), n)
				require.Len(t, got, int(n-skip), "after %d", after)
				for i, u := range got {
					require.Equal(t, tc.updates[int(skip)+i], u, "after %d, update %d", after, i)
				}
			}
		})
	}

	// Appending to a returned update must not overwrite the next one.
	got, err := appendRowUpdates(nil, 2, 2, packUpdates([][]byte{[]byte("ab"), []byte("cd")}), 0)
	require.NoError(t, err)
	_ = append(got[0], 'X')
	require.Equal(t, []byte("cd"), got[1])

	good := packUpdates([][]byte{[]byte("ab"), []byte("cd")})
	leftOver := append(bytes.Clone(good), 0)
	for _, tc := range []struct {
		name string
		seq  int64
		n    int64
		data []byte
	}{
		{"no updates", 5, 0, good},
		{"more updates than seqs", 1, 2, good},
		{"fewer updates than n", 5, 3, good},
		{"truncated", 5, 2, good[:len(good)-1]},
		{"bytes left over", 5, 2, leftOver},
		{"length past the end", 5, 2, []byte{0x7f, 'a'}},
		{"bad varint", 5, 2, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		_, err := appendRowUpdates(nil, tc.seq, tc.n, tc.data, 0)
		require.Error(t, err, tc.name)
	}
}
