package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/yaps-dev/yaps/yaps"
)

// DefaultPrefix is the path prefix the API is mounted under when
// Config.Prefix is empty (RULINGS R1).
const DefaultPrefix = "/api/v1"

// DefaultMaxBodyBytes is the request body limit when Config.MaxBodyBytes is
// zero: 1 MiB (RULINGS R6).
const DefaultMaxBodyBytes int64 = 1 << 20

// DefaultBodyReadTimeout is Config.BodyReadTimeout when it is zero.
const DefaultBodyReadTimeout = 30 * time.Second

// AccountResolver resolves the account credential of a request, if any. It
// returns (nil, nil) when the request carries no account credential and an
// error (preferably a *yaps.Error of kind EUNAUTHORIZED) when it carries one
// that is not valid. An Account with an empty ID is an invalid credential
// too (401), never an anonymous request. The embedding application supplies its own to let its
// users roll lists up into their accounts (RULINGS R7).
type AccountResolver func(r *http.Request) (*yaps.Account, error)

// Config configures the HTTP API. The zero value is usable: every zero field
// takes the default named in its comment (see WithDefaults).
type Config struct {
	// Prefix is the path prefix of every operation, e.g. "/api/v1" or "/v1".
	// It is normalised as yaps.Config.Prefix is: a missing leading "/" is
	// added and trailing slashes are trimmed ("lists/" is "/lists").
	// Default: with Mount, the service's prefix (yaps.Config.Prefix, whose
	// default is "/api/v1"); otherwise "/api/v1".
	Prefix string

	// PublicURL is the externally visible origin of the server, e.g.
	// "https://yaps.example". It is used for the OpenAPI servers entry; the
	// links in answers use yaps.Config.PublicURL, so set both alike.
	// Default: "" (the OpenAPI document then names the bare prefix).
	PublicURL string

	// MaxBodyBytes caps request bodies; a longer body answers 413
	// payload_too_large. Default: 1 MiB.
	MaxBodyBytes int64

	// BodyReadTimeout bounds how long a request may take to send its body,
	// from when the API starts reading it; a body still arriving then
	// answers 408 request_timeout and the connection is closed. It holds
	// whatever timeouts the host's http.Server has (ReadHeaderTimeout
	// covers the headers only), through http.ResponseController, so a
	// middleware that wraps the ResponseWriter must offer Unwrap for it to
	// apply. Default: 30 s (1 MiB at about 35 KB/s); negative: no bound.
	// Writing the answer is bounded by the host's http.Server.WriteTimeout
	// only (yaps serve sets 2 min): set one, or a client that stops reading
	// a large page holds its handler.
	BodyReadTimeout time.Duration

	// TrustedProxies lists the peers (CIDRs such as "10.0.0.0/8", or single
	// addresses) whose X-Forwarded-For header is believed. The client IP is
	// the socket peer unless that peer is trusted; then it is the rightmost
	// X-Forwarded-For entry that is not itself a trusted proxy.
	// Default: none (always the socket peer).
	TrustedProxies []string

	// Accounts resolves account credentials. Default: the built-in accounts
	// of the service (svc.RequestAccount) with the key taken from the
	// X-Account-Key header, or from "Authorization: Bearer yak_..." when
	// the bearer token is an account key rather than a list code. Only with
	// the default resolver is POST /accounts offered, and only then does the
	// OpenAPI document name the built-in keys (security schemes accountKey
	// and accountKeyHeader, the X-Account-Key parameter of rollup).
	Accounts AccountResolver

	// AccountScheme describes the credential a custom Accounts resolver
	// reads, for the OpenAPI document: it is added as the security scheme
	// "account", which GET /lists requires, and POST /lists/{ref}/rollup
	// requires beside the list code. For example, for a session cookie:
	//
	//	&huma.SecurityScheme{Type: "apiKey", In: "cookie", Name: "session"}
	//
	// Default: nil, and then with a custom resolver the document names no
	// account credential (GET /lists has no security requirement; rollup
	// requires the list code only). A host whose credential one scheme
	// cannot describe edits api.OpenAPI() after Mount. Ignored with the
	// built-in accounts, whose schemes are always documented.
	AccountScheme *huma.SecurityScheme

	// Logger receives request logs (Debug) and server faults (Error). Codes
	// and keys are never logged; the k query parameter is redacted.
	// Default: slog.Default().
	Logger *slog.Logger

	trusted []netip.Prefix
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	// As yaps.Config reads its prefix, so both accept the same ones.
	c.Prefix = yaps.NormalizePrefix(c.Prefix)
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first problem of a configuration after defaults.
func (c Config) Validate() error {
	c = c.WithDefaults()
	_, err := c.validate()
	return err
}

// validate checks c (defaults applied) and returns it with the trusted proxy
// list parsed.
func (c Config) validate() (Config, error) {
	if err := yaps.CheckPrefix(c.Prefix); err != nil {
		return c, err
	}
	if c.MaxBodyBytes < 0 {
		return c, errors.New("MaxBodyBytes must not be negative")
	}
	c.trusted = nil
	for _, s := range c.TrustedProxies {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return c, fmt.Errorf("trusted proxy %q: %v", s, err)
			}
			c.trusted = append(c.trusted, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return c, fmt.Errorf("trusted proxy %q: %v", s, err)
		}
		a = a.Unmap()
		c.trusted = append(c.trusted, netip.PrefixFrom(a, a.BitLen()))
	}
	return c, nil
}

func (c *Config) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP returns the client address of r (RULINGS R8).
func (c *Config) clientIP(r *http.Request) string {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	is4 := peer.Is4()
	peer = peer.Unmap()
	if len(c.trusted) == 0 || !c.isTrusted(peer) {
		if is4 {
			// ParseAddr takes an IPv4 address only in its canonical
			// form (no leading zeros): host is peer.String() already.
			return host
		}
		return peer.String()
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, part := range strings.Split(v, ",") {
			if p := strings.TrimSpace(part); p != "" {
				hops = append(hops, p)
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		h := hops[i]
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		a, err := netip.ParseAddr(h)
		if err != nil {
			break // garbage: stop believing the chain
		}
		a = a.Unmap()
		if !c.isTrusted(a) {
			return a.String()
		}
		peer = a
	}
	return peer.String()
}

// ClientIPFunc returns the client-IP resolution the API uses for cfg (the
// socket peer, or X-Forwarded-For from trusted proxies), so endpoints
// mounted beside the API, such as the sync socket, rate-limit the same
// client address. It fails on an invalid configuration.
func ClientIPFunc(cfg Config) (func(r *http.Request) string, error) {
	c, err := cfg.WithDefaults().validate()
	if err != nil {
		return nil, err
	}
	return c.clientIP, nil
}
