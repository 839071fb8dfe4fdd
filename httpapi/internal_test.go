package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestClientIP(t *testing.T) {
	t.Parallel()
	cfg, err := Config{TrustedProxies: []string{"10.0.0.0/8", "::1"}}.WithDefaults().validate()
	require.NoError(t, err)
	none, err := Config{}.WithDefaults().validate()
	require.NoError(t, err)
	cases := []struct {
		remote, xff string
		cfg         *Config
		want        string
	}{
		{"203.0.113.5:1234", "", &cfg, "203.0.113.5"},
		{"203.0.113.5:1234", "1.2.3.4", &cfg, "203.0.113.5"}, // untrusted peer: header ignored
		{"10.1.2.3:1234", "1.2.3.4", &cfg, "1.2.3.4"},
		{"10.1.2.3:1234", "1.2.3.4, 10.0.0.9", &cfg, "1.2.3.4"},          // rightmost untrusted
		{"10.1.2.3:1234", "9.9.9.9, 1.2.3.4, 10.0.0.9", &cfg, "1.2.3.4"}, // spoofed left part ignored
		{"10.1.2.3:1234", "10.0.0.7", &cfg, "10.0.0.7"},                  // all trusted: the leftmost
		{"10.1.2.3:1234", "garbage", &cfg, "10.1.2.3"},
		{"10.1.2.3:1234", "", &cfg, "10.1.2.3"},
		{"[::1]:80", "2001:db8::1", &cfg, "2001:db8::1"},
		{"[::ffff:10.0.0.1]:80", "1.2.3.4", &cfg, "1.2.3.4"},
		{"10.1.2.3:1234", "1.2.3.4", &none, "10.1.2.3"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		require.Equal(t, c.want, c.cfg.clientIP(r), "%s xff=%q", c.remote, c.xff)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("/api/v1/lists/x/sync?k=yap_secret&sv=AA")
	require.Equal(t, "/api/v1/lists/x/sync?k=REDACTED&sv=AA", RedactURL(u))
	u, _ = url.Parse("/a?K=yap_secret")
	require.NotContains(t, RedactURL(u), "secret")
	u, _ = url.Parse("/a?%zz=yap_secret")
	require.NotContains(t, RedactURL(u), "secret")
	u, _ = url.Parse("/a")
	require.Equal(t, "/a", RedactURL(u))
	// A code or key under any other name is hidden too.
	u, _ = url.Parse("/a?to=yap_secret&acct=yak_secret&x=1")
	require.Equal(t, "/a?acct=REDACTED&to=REDACTED&x=1", RedactURL(u))
}

func TestDecodeB64(t *testing.T) {
	t.Parallel()
	want := []byte{0xfb, 0xff, 0x01}
	for _, s := range []string{"+/8B", "-_8B", "+/8B", " +/8B "} {
		b, err := decodeB64(s)
		require.NoError(t, err, s)
		require.Equal(t, want, b)
	}
	for _, s := range []string{"+/8", "-_8"} {
		b, err := decodeB64(s)
		require.NoError(t, err, s)
		require.Equal(t, want[:2], b)
	}
	_, err := decodeB64("AA=")
	require.NoError(t, err)
	_, err = decodeB64("***")
	require.Error(t, err)
}

func TestErrorTable(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]errorKind{
		yaps.EINVALID: {400, "bad_request"}, yaps.EUNAUTHORIZED: {401, "unauthorized"},
		yaps.EFORBIDDEN: {403, "forbidden"}, yaps.ENOTFOUND: {404, "not_found"},
		yaps.EPRECONDITION: {412, "precondition_failed"}, yaps.ETOOLARGE: {413, "payload_too_large"},
		yaps.ERATELIMITED: {429, "rate_limited"}, yaps.EINTERNAL: {500, "internal_error"},
	} {
		p, k := problemFor(yaps.Errorf(kind, "m"), "/x")
		require.Equal(t, want, k)
		require.Equal(t, want.Status, p.Status)
		require.Equal(t, want.Code, p.Error.Code)
	}
	// Internal errors never leak.
	p, k := problemFor(&yaps.Error{Code: yaps.EINTERNAL, Message: "db password wrong", Err: http.ErrAbortHandler}, "/x")
	require.Equal(t, 500, k.Status)
	require.Equal(t, "internal server error", p.Detail)
	p, _ = problemFor(http.ErrBodyNotAllowed, "/x")
	require.Equal(t, "internal_error", p.Error.Code)
	require.Equal(t, 400, kindForStatus(422).Status)
	require.Equal(t, "bad_request", kindForStatus(422).Code)
	require.Equal(t, "bad_request", kindForStatus(418).Code)
	require.Equal(t, "internal_error", kindForStatus(502).Code)
}

// FuzzParseYap: no body makes the parser panic; every rejection is EINVALID.
func FuzzParseYap(f *testing.F) {
	for _, s := range []string{
		`{"kind":"task","content":"x","status":"open"}`, `{"deletedAt":null}`, `{"tags":["a",1]}`,
		`{"dueAt":"2026-01-01T00:00:00Z","priority":null}`, `{`, `[]`, ``, `null`, `{"a":1}{}`, "{\"body\":\"\x00\"}",
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, create bool) {
		o, err := decodeObject(body, false)
		if err != nil {
			require.Equal(t, yaps.EINVALID, yaps.ErrorCode(err))
			return
		}
		kind := yaps.Kind("")
		if create {
			kind = yaps.KindTask
		}
		if _, err := parseYap(o, kind, create); err != nil {
			require.Equal(t, yaps.EINVALID, yaps.ErrorCode(err))
		}
	})
}

// TestDecodeObject: one valid object is read in one pass; anything else
// gets the message of the decoder path, and unknown members are reported
// whatever order members were consumed in.
func TestDecodeObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		allowEmpty bool
		err        string // substring of the error; "" for success
		members    int
	}{
		{"object", `{"a":1,"b":"x"}`, false, "", 2},
		{"surrounding space", " \n{\"a\":1}\t ", false, "", 1},
		{"empty allowed", ``, true, "", 0},
		{"null allowed", `null`, true, "", 0},
		{"empty refused", ` `, false, "a JSON object body is required", 0},
		{"array", `[1]`, false, "must be a JSON object", 0},
		{"trailing object", `{"a":1}{"b":2}`, false, "unexpected data after the object", 0},
		{"trailing garbage", `{"a":1} x`, false, "unexpected data after the object", 0},
		{"syntax", `{"a":}`, false, "malformed JSON: invalid character '}' looking for beginning of value at offset 6", 0},
		{"truncated", `{"a":1`, false, "malformed JSON: unexpected end of input", 0},
		{"bad utf-8", "{\"a\":\"\xff\"}", false, "not valid UTF-8", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := decodeObject([]byte(tc.body), tc.allowEmpty)
			if tc.err != "" {
				require.Error(t, err)
				require.Equal(t, yaps.EINVALID, yaps.ErrorCode(err))
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, o.m, tc.members)
		})
	}
}

func TestObjectUnknownMembers(t *testing.T) {
	t.Parallel()
	o, err := decodeObject([]byte(`{"a":2,"b":null,"c":"x"}`), false)
	require.NoError(t, err)
	v, ok := o.raw("a")
	require.True(t, ok)
	require.JSONEq(t, `2`, string(v))
	_, _ = o.raw("a") // consumed twice, listed once
	_, ok = o.raw("absent")
	require.False(t, ok)
	require.ErrorContains(t, o.unknown(), `unknown field(s): "b", "c"`)
	o.ignore("c", "also-absent")
	require.ErrorContains(t, o.unknown(), `unknown field(s): "b"`)
	require.True(t, o.has("b"))
	_, _ = o.raw("b")
	require.NoError(t, o.unknown())
	require.Equal(t, []string{"a", "c", "b"}, o.used, "only present members are recorded, once each")
}

// TestDuplicateMembers: a member given twice is refused, whichever
// spelling (encoding/json would keep the last one silently); nested
// objects and strings that look like members do not count.
func TestDuplicateMembers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		dup  bool
	}{
		{`{}`, false},
		{`{"a":1,"b":2}`, false},
		{`{"a":1,"a":2}`, true},
		{`{"role":"agent","role":"owner"}`, true},
		{`{"a":1,"\u0061":2}`, true},
		{`{ "a" : [1,{"a":2,"a":3}], "b" : {"c":{"c":1}} }`, false},
		{`{"a\"b":"x,\"a\":1","c":"{\"c\":2}"}`, false},
		{`{"a\\":1,"a\\":2}`, true},
		{`{"s":"\\","t":"]"}`, false},
	} {
		_, err := decodeObject([]byte(tc.body), false)
		if tc.dup {
			require.Error(t, err, tc.body)
			require.Contains(t, err.Error(), "more than once", tc.body)
		} else {
			require.NoError(t, err, tc.body)
		}
	}
}
