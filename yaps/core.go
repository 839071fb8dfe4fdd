package yaps

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// NewService validates cfg, applies defaults and returns a Service. It
// starts the background purge and compaction ticker (see
// Config.PurgeInterval); Close stops it.
func NewService(cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("yaps: invalid config: %w", err)
	}
	s := &Service{
		cfg:  cfg,
		log:  cfg.Logger,
		subs: make(map[int]func(Event)),

		compactions: make(chan struct{}, maxCompactions),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.docs = newDocCache(cfg.DocCacheSize, cfg.DocCacheMemory, cfg.DocIdleTimeout)
	s.docs.grace = max(cfg.DocCacheGrace, 0)
	s.auth = newAuthCache(cfg.AuthCacheTTL)
	s.coalesceDetail = "sync"
	if cfg.AuditCoalesce > 0 {
		s.coalesceDetail = "sync, coalescing " + cfg.AuditCoalesce.String()
	}
	s.wg.Add(1)
	go s.background(cfg.PurgeInterval)
	if cfg.PollInterval > 0 {
		s.wg.Add(1)
		go s.poller(cfg.PollInterval)
	}
	if cfg.Notifier != nil {
		s.notices = make(chan Notice, noticeQueue)
		s.refresh = refresher{pending: map[string]*refreshWork{}, queue: make(chan string, refreshQueue)}
		s.wg.Add(2 + refreshWorkers)
		go s.publisher()
		go s.listener()
		for range refreshWorkers {
			go s.refreshWorker()
		}
	}
	return s, nil
}

// Prefix returns the API path prefix the service writes into apiBase and
// sliceUrl (Config.Prefix, defaults applied).
func (s *Service) Prefix() string { return s.cfg.Prefix }

// PublicURL returns the origin the service writes into apiBase and
// sliceUrl (Config.PublicURL, defaults applied).
func (s *Service) PublicURL() string { return s.cfg.PublicURL }

// Close stops background work (compaction, purge, polling, eviction,
// notices; queued notices get up to a second to be published): what waits
// on the store is cancelled, and nothing new starts once Close began. It
// does not close the Store or the Notifier. The Service must not be used
// afterwards.
func (s *Service) Close() error {
	s.bgMu.Lock()
	s.cancel()
	s.bgMu.Unlock()
	s.wg.Wait()
	return nil
}

// Subscribe registers fn for every Event of this process; fn must not
// block (it runs while the list's lock is held, which keeps events of one
// list in seq order).
func (s *Service) Subscribe(fn func(Event)) (unsubscribe func()) {
	s.subMu.Lock()
	id := s.nextID
	s.nextID++
	s.subs[id] = fn
	s.subMu.Unlock()
	return func() {
		s.subMu.Lock()
		delete(s.subs, id)
		s.subMu.Unlock()
	}
}

func (s *Service) emit(e Event) {
	s.subMu.RLock()
	fns := make([]func(Event), 0, len(s.subs))
	for _, fn := range s.subs {
		fns = append(fns, fn)
	}
	s.subMu.RUnlock()
	for _, fn := range fns {
		fn(e)
	}
}

func (s *Service) now() time.Time { return Truncate(s.cfg.Now()) }

// Limit counts a request against the group's limits. ip is the client IP;
// acct and a (both optional) decide the class and key (RULINGS R8):
//   - a request with an account credential is authenticated and counted
//     per account;
//   - a request by a code on a list rolled up into an account is
//     authenticated and counted per account and client address, so a
//     code holder elsewhere (a viewer sending refused writes, say) cannot
//     use up the budget of the account's owner, and issuing more codes
//     gives no more budget;
//   - every other request is anonymous and counted per client address
//     (AddressKey: an IPv6 client by its /64).
//
// When the limit is exceeded the result is returned together with an
// ERATELIMITED *Error carrying RetryAfter. A failing Limiter (e.g. Redis
// down) lets the request through and logs a warning.
func (s *Service) Limit(ctx context.Context, group LimitGroup, ip string, acct *Account, a *Actor) (LimitResult, error) {
	class, key := limitKey(ip, acct, a)
	res, err := s.cfg.Limiter.Take(ctx, group, class, key)
	if err != nil {
		s.log.WarnContext(ctx, "rate limiter failed; allowing the request", "group", group, "err", err)
		return LimitResult{Allowed: true, Limit: -1, Remaining: -1}, nil
	}
	if !res.Allowed {
		ra := res.RetryAfter
		if ra <= 0 {
			ra = time.Second
		}
		return res, &Error{Code: ERATELIMITED, Message: "rate limit exceeded", RetryAfter: ra}
	}
	return res, nil
}

// limitKey is the class and key Limit counts a request under.
func limitKey(ip string, acct *Account, a *Actor) (LimitClass, string) {
	switch {
	case acct != nil && acct.ID != "":
		// An account without an ID is no credential: its callers would
		// all share the one bucket "acct:".
		return ClassAuthenticated, "acct:" + acct.ID
	case a != nil && a.List != nil && a.List.AccountID != "":
		return ClassAuthenticated, "acct:" + a.List.AccountID + "|ip:" + AddressKey(ip)
	default:
		return ClassAnonymous, "ip:" + AddressKey(ip)
	}
}

// audit builds an audit entry for a mutation by a.
func (s *Service) audit(a *Actor, action, yapID, detail string) *AuditEntry {
	return &AuditEntry{ListRef: a.List.Ref, At: s.now(), PermissionID: a.Permission.ID,
		Role: a.Permission.Role, Action: action, YapID: yapID, Detail: detail}
}

func internal(err error, msg string) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: EINTERNAL, Message: msg, Err: err}
}
