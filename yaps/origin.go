package yaps

import (
	"fmt"
	"net/url"
	"strings"
)

// CanonicalOrigin returns a browser origin from an allow-list in the form
// browsers send in the Origin header (RFC 6454): lower-case scheme and host,
// no default port, no trailing slash. "*" (any origin) is returned as is.
// Anything that is not an http or https origin (no scheme, a path, a query,
// user info) is an error: such an entry could never match a request, and a
// list that silently never matches is worse than a refusal at start-up.
func CanonicalOrigin(origin string) (string, error) {
	if origin == "*" {
		return origin, nil
	}
	u, err := url.Parse(strings.TrimSuffix(origin, "/"))
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q is not scheme://host[:port]", origin)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("origin %q must use http or https", origin)
	}
	if u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("origin %q must be only scheme://host[:port], without path, query or user", origin)
	}
	host := strings.ToLower(u.Host)
	if (scheme == "http" && u.Port() == "80") || (scheme == "https" && u.Port() == "443") {
		host = strings.TrimSuffix(host, ":"+u.Port())
	}
	return scheme + "://" + host, nil
}

// CanonicalOrigins applies CanonicalOrigin to each entry of origins.
func CanonicalOrigins(origins []string) ([]string, error) {
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		c, err := CanonicalOrigin(strings.TrimSpace(o))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
