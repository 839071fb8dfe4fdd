package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// code returns the permission code of a request: the bearer token (unless
// it is an account key), else the k query parameter (INTERFACE §5.3).
func (st *reqState) code() string {
	k := ""
	if st.r.URL.RawQuery != "" { // URL.Query makes a map even for an empty query
		k = st.r.URL.Query().Get("k")
	}
	return yaps.RequestCode(st.r.Header.Get("Authorization"), k)
}

// builtinAccount is the default AccountResolver: the service's built-in
// accounts, keyed by X-Account-Key or a "Bearer yak_..." token.
func (s *server) builtinAccount(r *http.Request) (*yaps.Account, error) {
	return s.svc.RequestAccount(r.Context(), r.Header.Get("Authorization"), r.Header.Get("X-Account-Key"))
}

// accountHint names how to send a built-in account key, for a 401 that asks
// for one; a host's own resolver reads credentials Yaps cannot describe.
func (s *server) accountHint(how string) string {
	if !s.builtin {
		return ""
	}
	return " (" + how + ")"
}

// account runs the configured resolver (see yaps.CheckAccount).
func (s *server) account(r *http.Request) (*yaps.Account, error) {
	return yaps.CheckAccount(s.accounts(r))
}

// limit counts the request against group (RULINGS R8), sets the
// X-RateLimit-* headers and returns the 429 answer when over the limit.
func (s *server) limit(ctx context.Context, st *reqState, group yaps.LimitGroup, acct *yaps.Account, a *yaps.Actor) *rawOut {
	res, err := s.svc.Limit(ctx, group, st.ip, acct, a)
	if err != nil && !yaps.IsCode(err, yaps.ERATELIMITED) {
		return st.errorOut(err)
	}
	res.SetHeaders(time.Now(), st.header().Set)
	if err != nil {
		return st.errorOut(err)
	}
	if !res.Allowed {
		wait := res.RetryAfter
		if wait <= 0 && !res.Reset.IsZero() {
			wait = time.Until(res.Reset)
		}
		return st.errorOut(&yaps.Error{Code: yaps.ERATELIMITED, Message: "rate limit exceeded; retry later", RetryAfter: wait})
	}
	return nil
}

// actor authenticates a list request in the order of RULINGS R3: unknown
// ref 404, then the code 401 (and a bad account credential 401), then the
// role 403. The request is counted against the rate limit of group either
// way, so guessing refs or codes is limited too. roles, when given, are the
// roles the operation allows.
func (s *server) actor(ctx context.Context, st *reqState, ref string, group yaps.LimitGroup, roles ...yaps.Role) (*yaps.Actor, *rawOut) {
	var a *yaps.Actor
	var err error
	if plausibleID(ref) {
		a, err = s.svc.Authenticate(ctx, ref, st.code())
	} else {
		err = yaps.Errorf(yaps.ENOTFOUND, "list not found")
	}
	// Answers about a list depend on the code: never for shared caches.
	st.header().Set("Cache-Control", "private, no-cache")
	var acct *yaps.Account
	var acctErr error
	if err == nil {
		acct, acctErr = s.account(st.r)
	}
	if out := s.limit(ctx, st, group, acct, a); out != nil {
		return nil, out
	}
	if err != nil {
		return nil, st.errorOut(err)
	}
	if acctErr != nil {
		return nil, st.errorOut(acctErr)
	}
	a.Account = acct
	a.ClientIP = st.ip
	if out := st.requireRole(a, roles...); out != nil {
		return nil, out
	}
	if out := st.checkQuery(); out != nil {
		return nil, out
	}
	return a, nil
}

// requireRole answers 403 unless the actor has one of roles (none: any).
func (st *reqState) requireRole(a *yaps.Actor, roles ...yaps.Role) *rawOut {
	if len(roles) == 0 {
		return nil
	}
	for _, r := range roles {
		if a.Permission.Role == r {
			return nil
		}
	}
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return st.errorOut(yaps.Errorf(yaps.EFORBIDDEN, "this operation needs the %s role; the code has %s", strings.Join(names, " or "), a.Permission.Role))
}

// requireWritable answers 403 for writes to an archived list (RULINGS R7).
func (st *reqState) requireWritable(a *yaps.Actor) *rawOut {
	if a.List != nil && a.List.Archived() {
		return st.errorOut(yaps.Errorf(yaps.EFORBIDDEN, "the list is archived; unarchive it (PATCH archivedAt: null) to write"))
	}
	return nil
}

// etag renders a service entity tag as an HTTP ETag (quoted).
func etag(tag string) string {
	if tag == "" || strings.HasPrefix(tag, `"`) || strings.HasPrefix(tag, `W/"`) {
		return tag
	}
	return `"` + tag + `"`
}

// ifMatch returns the If-Match header for the service, which compares it
// with the entity's ETag itself ("*", tag lists and W/ prefixes included).
func (st *reqState) ifMatch() string {
	return strings.TrimSpace(st.r.Header.Get("If-Match"))
}

// plausibleID reports whether s can be a list ref, yap id or permission id:
// 1 to 128 characters of A-Za-z0-9, '-' and '_' (refs and ids are base64url
// or UUIDs; sync clients pick yap ids of that alphabet, RULINGS R9).
// Anything else is unknown (404) without asking the store, so no control
// character or odd byte ever reaches a database query.
func plausibleID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// requireID answers 404 for a yap or permission id that cannot exist.
func (st *reqState) requireID(id, what string) *rawOut {
	if plausibleID(id) {
		return nil
	}
	return st.errorOut(yaps.Errorf(yaps.ENOTFOUND, "%s not found", what))
}
