package yaps_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestCanonicalOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string // want "" means an error
	}{
		{"https://app.example", "https://app.example"},
		{"https://app.example/", "https://app.example"},
		{"HTTPS://App.Example", "https://app.example"},
		{"https://app.example:443", "https://app.example"},
		{"http://app.example:80/", "http://app.example"},
		{"http://localhost:5173", "http://localhost:5173"},
		{"https://app.example:80", "https://app.example:80"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"*", "*"},
		{"", ""},
		{"app.example", ""},
		{"localhost:5173", ""},
		{"ftp://app.example", ""},
		{"https://app.example/path", ""},
		{"https://app.example?x=1", ""},
		{"https://user@app.example", ""},
		{"https://", ""},
		{"null", ""},
	} {
		got, err := yaps.CanonicalOrigin(tc.in)
		if tc.want == "" {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}
