package yaps

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestPrintableASCII8 checks the word test against the byte range for every
// byte value at every position of a word of printable bytes.
func TestPrintableASCII8(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for pos := range 8 {
		for v := range 256 {
			for range 4 {
				b := make([]byte, 8)
				for i := range b {
					b[i] = byte(0x20 + rng.IntN(0x7f-0x20))
				}
				b[pos] = byte(v)
				want := v >= 0x20 && v <= 0x7e
				require.Equal(t, want, printableASCII8(string(b)), "byte %#x at %d in %q", v, pos, b)
			}
		}
	}
	// Two bytes out of range, one of them borrowing into the other.
	require.False(t, printableASCII8("\x00\x7f      "))
	require.False(t, printableASCII8("      \x1f\x80"))
	require.True(t, printableASCII8(" ~~~~~~~"))
}

// TestCheckText puts each kind of refused character at every offset of a
// text longer than a few words, so it lands at each position of a word and
// in the tail that the word test does not cover.
func TestCheckText(t *testing.T) {
	t.Parallel()
	type row struct {
		name      string
		bad       string
		multiLine bool
		want      string // "" = accepted
	}
	rows := []row{
		{"tab", "\t", false, ""},
		{"LF one-line", "\n", false, "must be a single line"},
		{"LF multi-line", "\n", true, ""},
		{"CR one-line", "\r", false, "must be a single line"},
		{"CR multi-line", "\r", true, "must not contain CR"},
		{"NUL", "\x00", false, "control character"},
		{"ESC", "\x1b", true, "control character"},
		{"DEL", "\x7f", false, "control character"},
		{"NEL (C1)", "\u0085", true, "control character"},
		{"C1 last", "\u009f", false, "control character"},
		{"NBSP", "\u00a0", false, ""},
		{"é", "é", false, ""},
		{"emoji", "😀", false, ""},
		{"lone continuation byte", "\x80", false, "not valid UTF-8"},
		{"truncated sequence", "\xc3", false, "not valid UTF-8"},
	}
	base := strings.Repeat("abcdefgh", 3) + "xyz" // 27 bytes: three words and a tail
	for _, r := range rows {
		for at := 0; at <= len(base); at++ {
			s := base[:at] + r.bad + base[at:]
			err := checkText("f", s, 1000, r.multiLine)
			if r.want == "" {
				require.NoError(t, err, "%s at %d", r.name, at)
				continue
			}
			require.Error(t, err, "%s at %d", r.name, at)
			require.Contains(t, err.Error(), r.want, "%s at %d", r.name, at)
		}
	}
}

func TestCheckTextLength(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkText("f", strings.Repeat("a", 10), 10, false))
	require.ErrorContains(t, checkText("f", strings.Repeat("a", 11), 10, false), "longer than 10 characters")
	// Counted in code points, not bytes.
	s := strings.Repeat("é", 10)
	require.Equal(t, 20, len(s))
	require.Equal(t, 10, utf8.RuneCountInString(s))
	require.NoError(t, checkText("f", s, 10, false))
}

// BenchmarkCheckText is a task's content at its length limit, all ASCII:
// what every keystroke into it validates.
func BenchmarkCheckText(b *testing.B) {
	s := strings.Repeat("typing a task ", MaxContentLen/14)
	for b.Loop() {
		if err := checkText("content", s, MaxContentLen, false); err != nil {
			b.Fatal(err)
		}
	}
}
