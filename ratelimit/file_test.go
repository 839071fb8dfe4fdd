package ratelimit_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/yaps"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.json")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `{
		"create_list": {
			"anonymous": [{"limit": 30, "period": "1h"}, {"limit": 200, "period": "1d"}]
		},
		"mutation": {"authenticated": [{"limit": 1000, "period": "90s"}]},
		"read": {}
	}`)
	cfg, err := ratelimit.LoadFile(path)
	require.NoError(t, err)
	got := cfg.WithDefaults().Limits
	def := ratelimit.DefaultLimits()
	require.Equal(t, []ratelimit.Window{{Limit: 30, Period: time.Hour}, {Limit: 200, Period: 24 * time.Hour}},
		got[yaps.LimitCreateList][yaps.ClassAnonymous])
	require.Equal(t, def[yaps.LimitCreateList][yaps.ClassAuthenticated], got[yaps.LimitCreateList][yaps.ClassAuthenticated])
	require.Equal(t, []ratelimit.Window{{Limit: 1000, Period: 90 * time.Second}}, got[yaps.LimitMutation][yaps.ClassAuthenticated])
	require.Equal(t, def[yaps.LimitMutation][yaps.ClassAnonymous], got[yaps.LimitMutation][yaps.ClassAnonymous])
	require.Equal(t, def[yaps.LimitRead], got[yaps.LimitRead])

	l, err := ratelimit.New(cfg)
	require.NoError(t, err)
	res := take(t, l, yaps.LimitCreateList, yaps.ClassAnonymous, "ip")
	require.EqualValues(t, 30, res.Limit)
}

func TestLoadFilePeriods(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		period string
		want   time.Duration
	}{
		{"1s", time.Second},
		{"90s", 90 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"1d", 24 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"+2d", 2 * 24 * time.Hour},
		{"36500d", ratelimit.MaxPeriod},
		{"876000h", ratelimit.MaxPeriod},
		{"1.5s", 1500 * time.Millisecond},
		{"1001ms", 1001 * time.Millisecond},
	} {
		t.Run(tc.period, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, `{"read": {"anonymous": [{"limit": 5, "period": "`+tc.period+`"}]}}`)
			cfg, err := ratelimit.LoadFile(path)
			require.NoError(t, err)
			require.Equal(t, []ratelimit.Window{{Limit: 5, Period: tc.want}}, cfg.Limits[yaps.LimitRead][yaps.ClassAnonymous])
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"unknown group", `{"writes": {}}`, `unknown group "writes" (want one of create_list, mutation, read)`},
		{"unknown class", `{"read": {"admin": [{"limit": 1, "period": "1m"}]}}`, `read: unknown class "admin" (want one of anonymous, authenticated)`},
		{"zero limit", `{"read": {"anonymous": [{"limit": 0, "period": "1m"}]}}`, "read.anonymous: window 0: limit 0 must be positive"},
		{"negative limit", `{"read": {"anonymous": [{"limit": 5, "period": "1m"}, {"limit": -1, "period": "1h"}]}}`, "read.anonymous: window 1: limit -1 must be positive"},
		{"zero period", `{"mutation": {"authenticated": [{"limit": 5, "period": "0s"}]}}`, "mutation.authenticated: window 0: period 0s must be positive"},
		{"negative period", `{"mutation": {"authenticated": [{"limit": 5, "period": "-1m"}]}}`, "period -1m0s must be positive"},
		{"sub-second period", `{"read": {"anonymous": [{"limit": 5, "period": "10ms"}]}}`, "shorter than 1s"},
		{"bad period", `{"read": {"anonymous": [{"limit": 5, "period": "hourly"}]}}`, `bad period "hourly"`},
		{"bad days", `{"read": {"anonymous": [{"limit": 5, "period": "1.5d"}]}}`, `bad period "1.5d"`},
		{"days overflow", `{"read": {"anonymous": [{"limit": 5, "period": "300000d"}]}}`, `read.anonymous: window 0: period "300000d" is too long: at most 36500d (100 years)`},
		{"days overflow to negative", `{"read": {"anonymous": [{"limit": 5, "period": "200000d"}]}}`, `period "200000d" is too long`},
		{"one day too many", `{"read": {"anonymous": [{"limit": 5, "period": "36501d"}]}}`, `period "36501d" is too long: at most 36500d`},
		{"days overflowing the memory store", `{"read": {"anonymous": [{"limit": 5, "period": "90000d"}]}}`, `period "90000d" is too long`},
		{"longest days a duration holds", `{"read": {"anonymous": [{"limit": 5, "period": "106751d"}]}}`, `period "106751d" is too long`},
		{"hours too long", `{"read": {"anonymous": [{"limit": 5, "period": "876001h"}]}}`, "read.anonymous: window 0: period 876001h0m0s is longer than 36500d (100 years)"},
		{"longest hours a duration holds", `{"read": {"anonymous": [{"limit": 5, "period": "2562047h"}]}}`, "is longer than 36500d"},
		{"sub-millisecond period", `{"read": {"anonymous": [{"limit": 5, "period": "1.0004s"}]}}`, "read.anonymous: window 0: period 1.0004s is not a whole number of milliseconds"},
		{"periods equal in ms", `{"read": {"anonymous": [{"limit": 4, "period": "1s"}, {"limit": 4, "period": "1000400us"}]}}`, "window 1: period 1.0004s is not a whole number of milliseconds"},
		{"days beyond int64", `{"read": {"anonymous": [{"limit": 5, "period": "99999999999999999999d"}]}}`, `period "99999999999999999999d" is too long`},
		{"days beyond int32", `{"read": {"anonymous": [{"limit": 5, "period": "3000000000d"}]}}`, `period "3000000000d" is too long`},
		{"negative days", `{"read": {"anonymous": [{"limit": 5, "period": "-1d"}]}}`, `period "-1d" must be positive`},
		{"huge negative days", `{"read": {"anonymous": [{"limit": 5, "period": "-300000d"}]}}`, `period "-300000d" must be positive`},
		{"duration overflow", `{"read": {"anonymous": [{"limit": 5, "period": "100000000h"}]}}`, `bad period "100000000h"`},
		{"numeric period", `{"read": {"anonymous": [{"limit": 5, "period": 60}]}}`, "cannot unmarshal number"},
		{"missing limit", `{"read": {"anonymous": [{"period": "1m"}]}}`, `window 0: missing "limit"`},
		{"missing period", `{"read": {"anonymous": [{"limit": 1}]}}`, `window 0: missing "period"`},
		{"unknown field", `{"read": {"anonymous": [{"limit": 1, "period": "1m", "burst": 3}]}}`, `unknown field "burst"`},
		{"field in upper case", `{"read": {"anonymous": [{"limit": 1, "period": "1m", "Limit": 5}]}}`, `read.anonymous: window 0: unknown field "Limit" (want "limit" and "period", in lower case)`},
		{"only field in upper case", `{"read": {"anonymous": [{"LIMIT": 1, "period": "1m"}]}}`, `read.anonymous: window 0: unknown field "LIMIT"`},
		{"group in upper case", `{"Read": {}}`, `unknown group "Read"`},
		{"class in upper case", `{"read": {"Anonymous": [{"limit": 1, "period": "1m"}]}}`, `read: unknown class "Anonymous"`},
		{"duplicate group", `{"read": {"anonymous": [{"limit": 1, "period": "1m"}]}, "read": {"anonymous": [{"limit": 999, "period": "1m"}]}}`, `duplicate group "read"`},
		{"duplicate empty group", `{"mutation": {}, "read": {}, "mutation": {}}`, `duplicate group "mutation"`},
		{"duplicate class", `{"read": {"anonymous": [{"limit": 1, "period": "1m"}], "anonymous": [{"limit": 999, "period": "1m"}]}}`, `read: duplicate class "anonymous"`},
		{"duplicate field", `{"read": {"anonymous": [{"limit": 1, "period": "1h"}, {"limit": 1, "period": "1m", "limit": 999}]}}`, `read.anonymous: window 1: duplicate field "limit"`},
		{"duplicate key elsewhere", `{"read": {"anonymous": {"a": 1, "a": 2}}}`, `read.anonymous: duplicate key "a"`},
		{"null limit", `{"read": {"anonymous": [{"limit": null, "period": "1m"}]}}`, `window 0: missing "limit"`},
		{"fractional limit", `{"read": {"anonymous": [{"limit": 1.5, "period": "1m"}]}}`, `window 0: "limit": json: cannot unmarshal number 1.5`},
		{"window not an object", `{"read": {"anonymous": [5]}}`, "cannot unmarshal number"},
		{"empty windows", `{"read": {"anonymous": []}}`, "read.anonymous: no windows"},
		{"duplicate period", `{"read": {"anonymous": [{"limit": 1, "period": "60s"}, {"limit": 2, "period": "1m"}]}}`, "appears twice"},
		{"not an object", `[1, 2]`, "cannot unmarshal array"},
		{"null", `null`, "got null"},
		{"syntax", `{"read": `, "unexpected EOF"},
		{"trailing data", `{} {}`, "trailing data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tc.content)
			_, err := ratelimit.LoadFile(path)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, path, "the error names the file")
		})
	}

	_, err := ratelimit.LoadFile(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseSpec(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "default", " default "} {
		cfg, err := ratelimit.ParseSpec(s)
		require.NoError(t, err, "%q", s)
		require.Equal(t, ratelimit.Config{}, cfg, "%q", s)
	}

	cfg, err := ratelimit.ParseSpec("off")
	require.NoError(t, err)
	require.True(t, cfg.Disabled)
	l, err := ratelimit.New(cfg)
	require.NoError(t, err)
	for range 3 {
		require.True(t, take(t, l, yaps.LimitCreateList, yaps.ClassAnonymous, "ip").Allowed)
	}

	path := writeFile(t, `{"read": {"anonymous": [{"limit": 7, "period": "1m"}]}}`)
	cfg, err = ratelimit.ParseSpec(path)
	require.NoError(t, err)
	require.Equal(t, []ratelimit.Window{{Limit: 7, Period: time.Minute}}, cfg.Limits[yaps.LimitRead][yaps.ClassAnonymous])

	_, err = ratelimit.ParseSpec("nope.json")
	require.ErrorIs(t, err, os.ErrNotExist)
}
