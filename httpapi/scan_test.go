package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/yaps-dev/yaps/yaps"
)

// BenchmarkParseYapBody measures what createYap does with the create-yap
// benchmark's body before the service sees it: decode the object, parse
// the yap's members, check that nothing else came.
func BenchmarkParseYapBody(b *testing.B) {
	body := []byte(`{"kind":"task","content":"bench yap 12345 with some words","status":"open"}`)
	b.ReportAllocs()
	for b.Loop() {
		o, err := decodeObject(body, false)
		if err != nil {
			b.Fatal(err)
		}
		f, err := parseYap(o, yaps.KindTask, true)
		if err != nil || !f.Content.Present {
			b.Fatal(err)
		}
		if err := o.unknown(); err != nil {
			b.Fatal(err)
		}
	}
}

// scanObject accepts only what encoding/json accepts, and reads the same
// members with the same raw values; a repeated member is reported.
func FuzzScanObject(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"kind":"task","content":"x","status":"open"}`,
		`{"tags":["a","b"],"n":null,"t":true,"f":false}`, `{"a":{"b":[1,{"c":"d"}]}}`,
		`{"a":-0,"b":1e5,"c":1.5E-3,"d":-12.5e+3}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`,
		`{"a":"\u00e9\n\"q\""}`, `{"\u0061":1}`, `{"a":1,"a":2}`, `{"a":1,}`, `{"a" : [ 1 , 2 ] }`,
		`{"a":"x"} `, `{"a":[}`, `{"a":"\x"}`, `{"a":"` + "\x01" + `"}`, `{"é":"ü"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.TrimSpace(b)
		if len(b) == 0 || b[0] != '{' || !utf8.Valid(b) {
			return
		}
		m, dup, ok := scanObject(b)
		var want map[string]json.RawMessage
		err := json.Unmarshal(b, &want)
		if !ok {
			return // encoding/json's path decides
		}
		if err != nil {
			t.Fatalf("scanObject accepted %q, encoding/json: %v", b, err)
		}
		if dup {
			if members(b) == len(want) {
				t.Fatalf("scanObject reported a repeated member in %q", b)
			}
			return
		}
		if members(b) != len(want) {
			t.Fatalf("scanObject missed a repeated member in %q", b)
		}
		if len(m) != len(want) {
			t.Fatalf("%q: %d members, encoding/json %d", b, len(m), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(m[k], v) {
				t.Fatalf("%q: member %q is %q, encoding/json %q", b, k, m[k], v)
			}
		}
	})
}

// plainJSONString returns the same text for the names and enum values it
// interns as for any other string, and takes no allocation for them.
func TestPlainJSONStringKnown(t *testing.T) {
	for _, s := range []string{"kind", "content", "status", "createdAt", "in_progress", "task", "tasks:write", "title",
		"tas", "taskx", "Task", "", "unknown member", "a much longer string than any member name or enum value"} {
		got, ok := plainJSONString(json.RawMessage(`"` + s + `"`))
		if !ok || got != s {
			t.Errorf("plainJSONString(%q) = %q, %v", s, got, ok)
		}
	}
	for _, s := range []string{"kind", "status", "in_progress", "deletedAt"} {
		if _, ok := knownStrings.m[s]; !ok {
			t.Errorf("%q is not interned", s)
		}
	}
	raw := json.RawMessage(`"in_progress"`)
	if n := testing.AllocsPerRun(100, func() { _, _ = plainJSONString(raw) }); n != 0 {
		t.Errorf("plainJSONString of an enum value allocates %v times", n)
	}
}
