package yaps

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strings"
	"time"
)

// Defaults of Config (see WithDefaults).
const (
	DefaultPublicURL        = "http://127.0.0.1:4736"
	DefaultPrefix           = "/api/v1"
	DefaultDeletedRetention = 30 * 24 * time.Hour
	DefaultCompactAfter     = 200
	DefaultDocCacheSize     = 1000
	DefaultDocIdleTimeout   = 10 * time.Minute
	DefaultPurgeInterval    = time.Hour
	DefaultPollInterval     = 500 * time.Millisecond
	DefaultAuditCoalesce    = 10 * time.Second
	DefaultAuthCacheTTL     = time.Second
	// DefaultIdempotencyRetention is how long an Idempotency-Key replays
	// its first answer.
	DefaultIdempotencyRetention = 24 * time.Hour
	// DefaultNotifyPollInterval is the poll interval with a Notifier,
	// which makes polling a fallback for lost notices.
	DefaultNotifyPollInterval = 5 * time.Second
	// DefaultMaxDocBytes is the default limit on a list document's
	// encoded size (Config.MaxDocBytes).
	DefaultMaxDocBytes = 16 << 20
	// DefaultMaxDocItems is the default limit on the structs a list
	// document holds (Config.MaxDocItems).
	DefaultMaxDocItems = 250_000
	// DefaultDocCacheMemory is the default bound on the estimated memory
	// of the documents a process keeps loaded (Config.DocCacheMemory).
	DefaultDocCacheMemory = 256 << 20
	// DefaultDocCacheGrace is how long after its last use a document stays
	// loaded whatever the cache's bounds (Config.DocCacheGrace).
	DefaultDocCacheGrace = 2 * time.Second
)

// WithDefaults returns a copy of c with every zero field set to its default.
// It does not validate; NewService does.
func (c Config) WithDefaults() Config {
	if c.Limiter == nil {
		c.Limiter = Unlimited{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PublicURL == "" {
		c.PublicURL = DefaultPublicURL
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.Prefix = NormalizePrefix(c.Prefix)
	if c.DeletedRetention == 0 {
		c.DeletedRetention = DefaultDeletedRetention
	}
	if c.CompactAfter == 0 {
		c.CompactAfter = DefaultCompactAfter
	}
	if c.DocCacheSize == 0 {
		c.DocCacheSize = DefaultDocCacheSize
	}
	if c.DocCacheMemory == 0 {
		c.DocCacheMemory = DefaultDocCacheMemory
	}
	if c.DocCacheGrace == 0 {
		c.DocCacheGrace = DefaultDocCacheGrace
	}
	if c.DocIdleTimeout == 0 {
		c.DocIdleTimeout = DefaultDocIdleTimeout
	}
	if c.PurgeInterval == 0 {
		c.PurgeInterval = DefaultPurgeInterval
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
		if c.Notifier != nil {
			c.PollInterval = DefaultNotifyPollInterval
		}
	}
	if c.AuditCoalesce == 0 {
		c.AuditCoalesce = DefaultAuditCoalesce
	}
	if c.AuthCacheTTL == 0 {
		c.AuthCacheTTL = DefaultAuthCacheTTL
	}
	if c.IdempotencyRetention == 0 {
		c.IdempotencyRetention = DefaultIdempotencyRetention
	}
	if c.Render == nil {
		c.Render = RenderJSON
	}
	if c.MaxDocBytes == 0 {
		c.MaxDocBytes = DefaultMaxDocBytes
	}
	if c.MaxDocItems == 0 {
		c.MaxDocItems = DefaultMaxDocItems
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// NormalizePrefix is how a configured prefix is read: with a leading "/"
// added if missing and trailing ones removed ("api/v1/" is "/api/v1").
// CheckPrefix then says whether the result is usable.
func NormalizePrefix(prefix string) string {
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	if trimmed := strings.TrimRight(prefix, "/"); trimmed != "" {
		return trimmed
	}
	return "/" // all slashes: stays "/", which CheckPrefix refuses by name
}

// CheckPrefix reports whether prefix can prefix the API's paths, in links
// (apiBase, sliceUrl) and as a net/http mux pattern: a clean path that
// starts with "/", is not "/" itself and has no empty, "." or ".." segment,
// no trailing slash, and none of the characters { } ? # or space.
func CheckPrefix(prefix string) error {
	if !strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("prefix %q must be a path starting with /", prefix)
	}
	if strings.ContainsAny(prefix, "{}? #") {
		return fmt.Errorf("prefix %q must not contain { } ? # or spaces", prefix)
	}
	if prefix == "/" {
		return errors.New(`prefix must not be "/"`)
	}
	if path.Clean(prefix) != prefix {
		// net/http's mux refuses (panics on) patterns with such paths.
		return fmt.Errorf("prefix %q must be a clean path (no empty, . or .. segments, no trailing slash)", prefix)
	}
	return nil
}

func (c Config) validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("Store is required"))
	}
	if c.DeletedRetention < 0 {
		errs = append(errs, errors.New("DeletedRetention must not be negative"))
	}
	if c.CompactAfter < 0 {
		errs = append(errs, errors.New("CompactAfter must not be negative (0 means default)"))
	}
	if c.DocCacheSize < 0 {
		errs = append(errs, errors.New("DocCacheSize must not be negative"))
	}
	if c.DocIdleTimeout < 0 {
		errs = append(errs, errors.New("DocIdleTimeout must not be negative"))
	}
	if err := CheckPrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if err := CheckPublicURL(c.PublicURL); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckPublicURL reports whether publicURL can start every sliceUrl and
// apiBase handed to clients: a usable origin (plus an optional path), an
// absolute http or https URL without user, query or fragment.
func CheckPublicURL(publicURL string) error {
	if u, err := url.Parse(publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("PublicURL %q must be an absolute http or https URL without user, query or fragment, such as https://lists.example", publicURL)
	}
	return nil
}
