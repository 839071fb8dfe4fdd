package ratelimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
// A period is a Go duration ("90s", "1m", "1h30m") or a whole number of
// days ("1d", "7d"; at most 106751d, the longest time.Duration). Groups and
// classes left out keep their defaults. The file is validated in full:
// unknown groups, classes or fields, limits below 1, periods below 1s or
// too long, and empty or duplicate windows are errors.
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

type fileWindow struct {
	Limit  *int64  `json:"limit"`
	Period *string `json:"period"`
}

func parseLimits(data []byte) (Limits, error) {
	var groups map[string]map[string]json.RawMessage
	if err := strictUnmarshal(data, &groups); err != nil {
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
	var fws []fileWindow
	if err := strictUnmarshal(raw, &fws); err != nil {
		return nil, err
	}
	if len(fws) == 0 {
		return nil, errors.New("no windows (give at least one, or use --rate-limit off)")
	}
	ws := make([]Window, len(fws))
	for i, fw := range fws {
		if fw.Limit == nil {
			return nil, fmt.Errorf("window %d: missing \"limit\"", i)
		}
		if fw.Period == nil {
			return nil, fmt.Errorf("window %d: missing \"period\"", i)
		}
		p, err := parsePeriod(*fw.Period)
		if err != nil {
			return nil, fmt.Errorf("window %d: %w", i, err)
		}
		ws[i] = Window{Limit: *fw.Limit, Period: p}
	}
	if err := validateWindows(ws); err != nil {
		return nil, err
	}
	return ws, nil
}

const (
	day = 24 * time.Hour
	// maxDays is the most days a time.Duration holds (106751).
	maxDays = int64(math.MaxInt64 / day)
)

// parsePeriod accepts Go durations and whole days ("7d"), refusing day
// counts a time.Duration cannot hold.
func parsePeriod(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return 0, fmt.Errorf("bad period %q: want a Go duration like \"1h\" or whole days like \"1d\"", s)
		case strings.HasPrefix(days, "-"):
			return 0, fmt.Errorf("period %q must be positive", s)
		case err != nil || n > maxDays:
			return 0, fmt.Errorf("period %q is too long: at most %dd (about 292 years)", s, maxDays)
		}
		return time.Duration(n) * day, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad period %q: want a Go duration like \"1h\" or whole days like \"1d\"", s)
	}
	return d, nil
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
