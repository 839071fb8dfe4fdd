package bunstore

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each form of the batch statement has the parts the batch has rows for,
// numbers its parameters 1..n, and gets n arguments, in the order of its
// parts.
func TestMultiStatementForms(t *testing.T) {
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
	for form := range 8 {
		puts, news, dels := form&1 != 0, form&2 != 0, form&4 != 0
		m := &multiRows{ref: []string{"a"}, audDetail: []string{"d"}}
		if puts {
			m.putRef, m.putData = []string{"a"}, [][]byte{{1}}
		}
		if news {
			m.newRef, m.newData = []string{"a"}, [][]byte{{2}}
		}
		if dels {
			m.delRef, m.delID = []string{"a"}, []string{"y"}
		}
		q, args := m.statement()
		require.Equal(t, params(q), len(args), form)
		require.Equal(t, puts, strings.Contains(q, "py AS ("), form)
		require.Equal(t, puts, strings.Contains(q, "ON CONFLICT"), form)
		require.Equal(t, news, strings.Contains(q, "pn AS ("), form)
		require.Equal(t, dels, strings.Contains(q, "DELETE FROM yaps"), form)
		require.Equal(t, form == 7, q == multiSQL, form)
		require.Equal(t, m.ref, args[0], form)
		require.Equal(t, m.audDetail, args[len(args)-1], form)
		if puts {
			require.Contains(t, args, any(m.putData), form)
		}
		if news {
			require.Contains(t, args, any(m.newData), form)
		}
	}
}
