package ratelimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// Spec values understood by ParseSpec besides a file path.
const (
	SpecDefault = "default"
	SpecOff     = "off"
)

// ParseSpec interprets the value of `yaps serve --rate-limit`:
//
//   - "" or "default": R8's default limits (a zero Config);
//   - "off": every limit switched off (Config{Disabled: true});
//   - anything else: the path of a JSON limits file, read with LoadFile.
//
// Fields other than Limits and Disabled (Redis, KeyPrefix, ...) are left
// for the caller to set.
func ParseSpec(s string) (Config, error) {
	switch strings.TrimSpace(s) {
	case "", SpecDefault:
		return Config{}, nil
	case SpecOff:
		return Config{Disabled: true}, nil
	}
	return LoadFile(s)
}

// LoadFile reads a JSON limits file:
//
//	{
//	  "create_list": {
//	    "anonymous":     [{"limit": 30, "period": "1h"}, {"limit": 200, "period": "24h"}],
//	    "authenticated": [{"limit": 100, "period": "1h"}]
//	  },
//	  "mutation": {"anonymous": [{"limit": 60, "period": "1m"}]},
//	  "read": {}
//	}
//
// Top-level keys are groups (create_list, mutation, read), their keys are
// classes (anonymous, authenticated), each holding one or more windows.
// A period is a Go duration ("90s", "1m", "1h30m", "1.5s") in whole
// milliseconds, or a whole number of days ("1d", "7d"); it is at least 1s
// and at most 36500d (100 years, MaxPeriod). Groups and classes left out
// keep their defaults. The file is validated in full: unknown groups,
// classes or fields, keys spelled other than shown (names are
// case-sensitive), keys given twice in one object, limits below 1, periods
// out of range, and empty or duplicate windows are errors.
func LoadFile(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("ratelimit: %w", err)
	}
	limits, err := parseLimits(data)
	if err != nil {
		return Config{}, fmt.Errorf("ratelimit: %s: %w", path, err)
	}
	cfg := Config{Limits: limits}
	if err := cfg.WithDefaults().validate(); err != nil {
		return Config{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return cfg, nil
}

func parseLimits(data []byte) (Limits, error) {
	var groups map[string]map[string]json.RawMessage
	if err := strictUnmarshal(data, &groups); err != nil {
		return nil, err
	}
	// Decoding into maps keeps the last of duplicate keys without a word.
	if err := checkDuplicateKeys(data); err != nil {
		return nil, err
	}
	if groups == nil {
		return nil, errors.New("want a JSON object of groups, got null")
	}
	limits := Limits{}
	var errs []error
	for gname, classes := range groups {
		g := yaps.LimitGroup(gname)
		if !slices.Contains(Groups, g) {
			errs = append(errs, fmt.Errorf("unknown group %q (want one of %s)", gname, joinNames(Groups)))
			continue
		}
		limits[g] = map[yaps.LimitClass][]Window{}
		for cname, raw := range classes {
			c := yaps.LimitClass(cname)
			if !slices.Contains(Classes, c) {
				errs = append(errs, fmt.Errorf("%s: unknown class %q (want one of %s)", gname, cname, joinNames(Classes)))
				continue
			}
			ws, err := parseWindows(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", gname, cname, err))
				continue
			}
			limits[g][c] = ws
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return limits, nil
}

func parseWindows(raw json.RawMessage) ([]Window, error) {
	// Maps, not a struct: encoding/json matches struct fields
	// case-insensitively, so "Limit" would pass for "limit".
	var fws []map[string]json.RawMessage
	if err := strictUnmarshal(raw, &fws); err != nil {
		return nil, err
	}
	if len(fws) == 0 {
		return nil, errors.New("no windows (give at least one, or use --rate-limit off)")
	}
	ws := make([]Window, len(fws))
	for i, fw := range fws {
		w, err := parseWindow(fw)
		if err != nil {
			return nil, fmt.Errorf("window %d: %w", i, err)
		}
		ws[i] = w
	}
	if err := validateWindows(ws); err != nil {
		return nil, err
	}
	return ws, nil
}

// parseWindow reads one window object, whose keys must be exactly
// "limit" and "period".
func parseWindow(fw map[string]json.RawMessage) (Window, error) {
	for _, k := range slices.Sorted(maps.Keys(fw)) {
		if k != "limit" && k != "period" {
			return Window{}, fmt.Errorf("unknown field %q (want \"limit\" and \"period\", in lower case)", k)
		}
	}
	var (
		limit  *int64
		period *string
	)
	if raw, ok := fw["limit"]; ok {
		if err := json.Unmarshal(raw, &limit); err != nil {
			return Window{}, fmt.Errorf("\"limit\": %w", err)
		}
	}
	if raw, ok := fw["period"]; ok {
		if err := json.Unmarshal(raw, &period); err != nil {
			return Window{}, fmt.Errorf("\"period\": %w", err)
		}
	}
	if limit == nil {
		return Window{}, errors.New("missing \"limit\"")
	}
	if period == nil {
		return Window{}, errors.New("missing \"period\"")
	}
	p, err := parsePeriod(*period)
	if err != nil {
		return Window{}, err
	}
	return Window{Limit: *limit, Period: p}, nil
}

const day = 24 * time.Hour

// parsePeriod accepts Go durations and whole days ("7d"), refusing day
// counts above MaxPeriod (validateWindows checks the rest).
func parsePeriod(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return 0, fmt.Errorf("bad period %q: want a Go duration like \"1h\" or whole days like \"1d\"", s)
		case strings.HasPrefix(days, "-"):
			return 0, fmt.Errorf("period %q must be positive", s)
		case err != nil || n > maxPeriodDays:
			return 0, fmt.Errorf("period %q is too long: at most %dd (100 years)", s, maxPeriodDays)
		}
		return time.Duration(n) * day, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad period %q: want a Go duration like \"1h\" or whole days like \"1d\"", s)
	}
	return d, nil
}

// checkDuplicateKeys reports the first key that appears twice in one
// object of data, which must be valid JSON.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path []any) error
	walk = func(path []any) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return err
				}
				key := tok.(string) // object keys are strings in valid JSON
				if seen[key] {
					return duplicateKeyError(path, key)
				}
				seen[key] = true
				if err := walk(append(path, key)); err != nil {
					return err
				}
			}
			_, err = dec.Token() // '}'
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(append(path, i)); err != nil {
					return err
				}
			}
			_, err = dec.Token() // ']'
			return err
		}
		return nil
	}
	return walk(nil)
}

// duplicateKeyError names a duplicate key the way the other errors of
// the file name their place: group, group.class, window and field.
func duplicateKeyError(path []any, key string) error {
	switch len(path) {
	case 0:
		return fmt.Errorf("duplicate group %q", key)
	case 1:
		return fmt.Errorf("%v: duplicate class %q", path[0], key)
	case 3:
		if i, ok := path[2].(int); ok {
			return fmt.Errorf("%v.%v: window %d: duplicate field %q", path[0], path[1], i, key)
		}
	}
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = fmt.Sprint(p)
	}
	return fmt.Errorf("%s: duplicate key %q", strings.Join(parts, "."), key)
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
