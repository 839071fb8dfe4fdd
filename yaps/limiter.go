package yaps

import (
	"context"
	"net/netip"
	"strconv"
	"time"
)

// LimitGroup is a family of operations sharing a rate limit (RULINGS R8).
type LimitGroup string

const (
	LimitCreateList LimitGroup = "create_list"
	LimitMutation   LimitGroup = "mutation"
	LimitRead       LimitGroup = "read"
)

// LimitClass separates anonymous callers from authenticated ones (an account
// credential, or a list that was rolled up into an account).
type LimitClass string

const (
	ClassAnonymous     LimitClass = "anonymous"
	ClassAuthenticated LimitClass = "authenticated"
)

// Limiter decides whether one more request fits the limits of a group.
// The adapter is in ratelimit/ (ulule/limiter, memory or Redis).
type Limiter interface {
	// Take counts one request for key in the group and class and reports
	// the tightest window's state. Exceeded requests return Allowed false.
	Take(ctx context.Context, group LimitGroup, class LimitClass, key string) (LimitResult, error)
}

// LimitResult is the state of the tightest window after a Take.
type LimitResult struct {
	Allowed    bool
	Limit      int64
	Remaining  int64
	Reset      time.Time
	RetryAfter time.Duration // when not Allowed
}

// SetHeaders passes the X-RateLimit-Limit, -Remaining and -Reset headers
// of RULINGS R8 to set (http.Header.Set, say); X-RateLimit-Reset counts the
// seconds from now to the window's reset, rounded up like Retry-After. It
// sets nothing when no limit applied (Limit -1, or 0 without a window).
func (r LimitResult) SetHeaders(now time.Time, set func(name, value string)) {
	if r.Limit < 0 || (r.Limit == 0 && r.Reset.IsZero()) {
		return
	}
	set("X-RateLimit-Limit", strconv.FormatInt(r.Limit, 10))
	set("X-RateLimit-Remaining", strconv.FormatInt(max(r.Remaining, 0), 10))
	reset := int64(0)
	if !r.Reset.IsZero() {
		reset = max(int64((r.Reset.Sub(now)+time.Second-1)/time.Second), 0)
	}
	set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
}

// Unlimited is a Limiter that allows everything (for benchmarks).
type Unlimited struct{}

// Take always allows.
func (Unlimited) Take(context.Context, LimitGroup, LimitClass, string) (LimitResult, error) {
	return LimitResult{Allowed: true, Limit: -1, Remaining: -1}, nil
}

// AddressKey is the unit a client address is limited by: an IPv4 address
// as itself (an IPv4-mapped, NAT64 64:ff9b::/96 or Teredo 2001::/32 IPv6
// address as the IPv4 address it carries), any other IPv6 address by its
// /64 prefix, because one host or home is normally given a whole /64 and
// could otherwise take a fresh budget per address. A string that is not an
// address is returned as it is.
func AddressKey(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if addr.Is4() {
		// ParseAddr takes an IPv4 address only in its canonical form (no
		// leading zeros): ip is addr.String() already, without allocating.
		return ip
	}
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		// A NAT64 gateway puts every IPv4 client it serves in one /96:
		// the client is the embedded IPv4 address.
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	} else if teredo.Contains(addr) {
		// Every client of one Teredo server shares its /64; the client's
		// public IPv4 address is the last 32 bits, inverted (RFC 4380).
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	}
	if addr.Is4() {
		return addr.String()
	}
	p, _ := addr.Prefix(64) // drops the zone; cannot fail for IPv6
	return p.String()
}

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	teredo = netip.MustParsePrefix("2001::/32")
)
