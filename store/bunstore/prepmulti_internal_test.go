package bunstore

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each form of the batch statement numbers its parameters 1..n, and gets
// n arguments: one per column array, the deletes' two only when it has
// them.
func TestMultiStatementParams(t *testing.T) {
	t.Parallel()
	params := func(q string) int {
		seen := map[int]bool{}
		for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(q, -1) {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			seen[n] = true
		}
		for i := 1; i <= len(seen); i++ {
			require.True(t, seen[i], "$%d missing", i)
		}
		return len(seen)
	}
	for _, tc := range []struct {
		name    string
		m       *multiRows
		sql     string
		deletes bool
	}{
		{"without deletes", &multiRows{ref: []string{"a"}}, multiSQLNoDeletes, false},
		{"with deletes", &multiRows{ref: []string{"a"}, delRef: []string{"a"}, delID: []string{"y"}}, multiSQL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, args := tc.m.statement()
			require.Equal(t, tc.sql, q)
			require.Equal(t, params(q), len(args))
			require.Equal(t, tc.deletes, regexp.MustCompile(`DELETE FROM yaps`).MatchString(q))
			require.Equal(t, tc.m.audDetail, args[len(args)-1], "the audit rows' columns come last")
		})
	}
}
