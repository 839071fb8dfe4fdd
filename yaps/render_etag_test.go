package yaps

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// etagHashRef is the original, streaming etagHash.
func etagHashRef(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return `"` + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12]) + `"`
}

func TestETagHashUnchanged(t *testing.T) {
	cases := [][]string{
		nil, {""}, {"list", "ref", "title", "task", "-", "-", ""},
		{"yap", strings.Repeat("x", 600), "é\x00;:", ""},
		{strings.Repeat("a", 300), strings.Repeat("b", 300)},
	}
	for _, c := range cases {
		if got, want := etagHash(c...), etagHashRef(c...); got != want {
			t.Fatalf("%q: %s != %s", c, got, want)
		}
	}
}
