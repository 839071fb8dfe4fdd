package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/internal/rawnet"
	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/pgnotify"
	"github.com/yaps-dev/yaps/sync/ysync"
	"github.com/yaps-dev/yaps/yaps"
)

func init() {
	register("serve", "run the HTTP API and the sync endpoint", runServe)
}

// serveGCPercent is the GC target of `yaps serve` when GOGC is not set:
// a server's heap is mostly short-lived request garbage, and at Go's
// default (100) the collector took about a tenth of its CPU under write
// load and added to tail latency. GOGC in the environment wins.
//
// The collector's headroom is a multiple of the live heap, though, and
// with many sync sockets open most of the live heap is theirs and idle: at
// gcManyConns open connections the target goes back to Go's 100 (10,000
// idle synced connections: 264-273 MB RSS instead of 283-308 MB), and
// returns to serveGCPercent below gcFewConns (see nextGCPercent).
const (
	serveGCPercent = 200
	gcManyConns    = 1000
	gcFewConns     = 500
)

// nextGCPercent returns the GC target for conns open sync connections
// when the current one is cur: 100 from many on, serveGCPercent again
// below few (see serveGCPercent).
func nextGCPercent(cur, conns, many, few int) int {
	switch {
	case cur == serveGCPercent && conns >= many:
		return 100
	case cur != serveGCPercent && conns < few:
		return serveGCPercent
	}
	return cur
}

// gcCheckEvery is how often Main checks the GC target (Main.adaptGC).
const gcCheckEvery = time.Second

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	m := NewMain(stderr)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
		m.adaptGC = true
	}
	if err := m.ParseFlags(args, os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := m.Run(ctx); err != nil {
		_ = m.Close()
		return err
	}
	fmt.Fprintf(stdout, "yaps listening on http://%s%s\n", m.Addr(), m.Prefix)
	<-ctx.Done()
	return m.Close()
}

// Main is the `yaps serve` program: ParseFlags reads the settings, Run opens
// the store and starts serving, Close shuts everything down gracefully. Tests
// drive it end to end on port 0.
type Main struct {
	ListenAddr string // --addr, YAPS_ADDR
	DB         string // --db, YAPS_DB
	Prefix     string // --prefix, YAPS_PREFIX
	PublicURL  string // --public-url, YAPS_PUBLIC_URL
	RateLimit  string // --rate-limit, YAPS_RATE_LIMIT: default, off or a file
	Redis      string // --redis, YAPS_REDIS
	RedisKeys  string // --redis-prefix, YAPS_REDIS_PREFIX: start of every rate-limit key in Redis
	Origins    string // --allowed-origins, YAPS_ALLOWED_ORIGINS: comma-separated, "*" for all
	Proxies    string // --trusted-proxies, YAPS_TRUSTED_PROXIES: comma-separated CIDRs
	LogLevel   string // --log-level, YAPS_LOG_LEVEL: debug (one line per request), info, warn or error
	// SyncConnsPerIP is --sync-conns-per-ip, YAPS_SYNC_CONNS_PER_IP: the
	// sync sockets one client address may hold in one list
	// (ysync.Config.MaxConnsPerIP; 0 means ysync's default).
	SyncConnsPerIP int
	// SyncConnsPerIPTotal is --sync-conns-per-ip-total,
	// YAPS_SYNC_CONNS_PER_IP_TOTAL: the sync sockets one client address may
	// hold across all lists (ysync.Config.MaxConnsPerIPTotal; 0 means
	// ysync's default).
	SyncConnsPerIPTotal int

	level    slog.LevelVar
	logger   *slog.Logger
	ln       net.Listener
	server   *http.Server
	store    *bunstore.Store
	service  *yaps.Service
	notifier *pgnotify.Notifier // Postgres only
	sync     *ysync.Server
	closing  atomic.Bool

	// adaptGC: Run keeps the process's GC target by nextGCPercent (set
	// by runServe when GOGC is not in the environment; the GC target is
	// process-wide, so a Main in tests leaves it alone).
	adaptGC        bool
	gcMany, gcFew  int           // gcManyConns and gcFewConns (tests lower them)
	gcEvery        time.Duration // gcCheckEvery (tests shorten it)
	stopGC, gcDone chan struct{}

	limiterCloser io.Closer

	// writeTimeout bounds a request from its headers to the last byte of
	// its answer (http.Server.WriteTimeout): a client that stops reading a
	// large answer would otherwise hold its handler, connection and the
	// answer's bytes for ever. Sync sockets are not bounded by it: the
	// WebSocket upgrade clears the connection's deadlines.
	writeTimeout time.Duration

	usageOut io.Writer // where ParseFlags prints the usage (-h, bad flags): NewMain's logw
}

// NewMain returns a Main with the documented defaults, logging to logw.
func NewMain(logw io.Writer) *Main {
	m := &Main{
		ListenAddr: "127.0.0.1:4736",
		DB:         "sqlite:yaps.db",
		Prefix:     "/api/v1",
		RateLimit:  "default",
		LogLevel:   "info",

		writeTimeout: responseWriteTimeout,
		gcMany:       gcManyConns,
		gcFew:        gcFewConns,
		gcEvery:      gcCheckEvery,
	}
	m.logger = slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: &m.level}))
	m.usageOut = logw
	return m
}

// ParseFlags reads settings from the environment (YAPS_*) and then from
// args, so flags win over the environment.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	env := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	env(&m.ListenAddr, "YAPS_ADDR")
	env(&m.DB, "YAPS_DB")
	env(&m.Prefix, "YAPS_PREFIX")
	env(&m.PublicURL, "YAPS_PUBLIC_URL")
	env(&m.RateLimit, "YAPS_RATE_LIMIT")
	env(&m.Redis, "YAPS_REDIS")
	env(&m.RedisKeys, "YAPS_REDIS_PREFIX")
	env(&m.Origins, "YAPS_ALLOWED_ORIGINS")
	env(&m.Proxies, "YAPS_TRUSTED_PROXIES")
	env(&m.LogLevel, "YAPS_LOG_LEVEL")
	for name, dst := range map[string]*int{"YAPS_SYNC_CONNS_PER_IP": &m.SyncConnsPerIP, "YAPS_SYNC_CONNS_PER_IP_TOTAL": &m.SyncConnsPerIPTotal} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("serve: %s must be a number, got %q", name, v)
			}
			*dst = n
		}
	}

	fs := flag.NewFlagSet("yaps serve", flag.ContinueOnError)
	fs.SetOutput(m.usageOut)
	fs.StringVar(&m.ListenAddr, "addr", m.ListenAddr, "listen address (YAPS_ADDR)")
	fs.StringVar(&m.DB, "db", m.DB, "database: sqlite:PATH, sqlite::memory: or postgres://... (YAPS_DB)")
	fs.StringVar(&m.Prefix, "prefix", m.Prefix, "API path prefix (YAPS_PREFIX)")
	fs.StringVar(&m.PublicURL, "public-url", m.PublicURL, "external origin for sliceUrl and apiBase; default http:// + the address the listener bound (--addr localhost:4736 gives http://127.0.0.1:4736), or http://127.0.0.1:PORT when it listens on every interface (0.0.0.0, ::, no host) (YAPS_PUBLIC_URL)")
	fs.StringVar(&m.RateLimit, "rate-limit", m.RateLimit, "rate limits: default, off, or a JSON file (YAPS_RATE_LIMIT)")
	fs.StringVar(&m.Redis, "redis", m.Redis, "Redis URL to share rate limits between processes (YAPS_REDIS)")
	fs.StringVar(&m.RedisKeys, "redis-prefix", m.RedisKeys, "start of every rate-limit key in Redis, to keep deployments sharing one Redis apart; default "+ratelimit.DefaultKeyPrefix+" (YAPS_REDIS_PREFIX)")
	fs.StringVar(&m.Origins, "allowed-origins", m.Origins, "browser origins allowed to call the API (CORS) and open sync sockets, comma-separated, * for any; default same origin only (YAPS_ALLOWED_ORIGINS)")
	fs.StringVar(&m.Proxies, "trusted-proxies", m.Proxies, "reverse proxies (CIDRs or addresses, comma-separated) whose X-Forwarded-For names the client IP (YAPS_TRUSTED_PROXIES)")
	fs.IntVar(&m.SyncConnsPerIP, "sync-conns-per-ip", m.SyncConnsPerIP, fmt.Sprintf("sync sockets one client address may hold in one list; raise it when many users share an address without --trusted-proxies; default %d (YAPS_SYNC_CONNS_PER_IP)", ysync.Config{}.WithDefaults().MaxConnsPerIP))
	fs.IntVar(&m.SyncConnsPerIPTotal, "sync-conns-per-ip-total", m.SyncConnsPerIPTotal, fmt.Sprintf("sync sockets one client address may hold across all lists; default %d (YAPS_SYNC_CONNS_PER_IP_TOTAL)", ysync.Config{}.WithDefaults().MaxConnsPerIPTotal))
	fs.StringVar(&m.LogLevel, "log-level", m.LogLevel, "debug (adds one line per request, codes redacted), info, warn or error (YAPS_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	// The libraries would normalise "v1/" to "/v1"; the binary takes the
	// prefix as written, since the access log and the banner use it too.
	if !strings.HasPrefix(m.Prefix, "/") {
		return fmt.Errorf("serve: --prefix must start with /, got %q", m.Prefix)
	}
	if strings.HasSuffix(m.Prefix, "/") {
		return fmt.Errorf("serve: --prefix must not end with /, got %q", m.Prefix)
	}
	if err := (httpapi.Config{Prefix: m.Prefix}).Validate(); err != nil {
		return fmt.Errorf("serve: --prefix: %w", err)
	}
	if _, err := yaps.CanonicalOrigins(splitList(m.Origins)); err != nil {
		return fmt.Errorf("serve: --allowed-origins: %w", err)
	}
	if m.SyncConnsPerIPTotal < 0 {
		return fmt.Errorf("serve: --sync-conns-per-ip-total must not be negative, got %d", m.SyncConnsPerIPTotal)
	}
	if m.SyncConnsPerIP < 0 {
		return fmt.Errorf("serve: --sync-conns-per-ip must not be negative, got %d", m.SyncConnsPerIP)
	}
	if err := m.level.UnmarshalText([]byte(m.LogLevel)); err != nil {
		return fmt.Errorf("serve: --log-level must be debug, info, warn or error, got %q", m.LogLevel)
	}
	// Checked here, before Run opens the listener and the database (and
	// creates and migrates a new SQLite file), not only by yaps.NewService
	// and httpapi.ClientIPFunc.
	if m.PublicURL != "" {
		if err := yaps.CheckPublicURL(strings.TrimRight(m.PublicURL, "/")); err != nil {
			return fmt.Errorf("serve: --public-url: %w", err)
		}
	}
	if _, err := httpapi.ClientIPFunc(httpapi.Config{Prefix: m.Prefix, TrustedProxies: splitList(m.Proxies)}); err != nil {
		return fmt.Errorf("serve: --trusted-proxies: %w", err)
	}
	return nil
}

// defaultPublicURL is the public URL when --public-url is not set: the
// listen address, except that an address on every interface (0.0.0.0, ::,
// or no host) is no address a client can use; links then name 127.0.0.1
// and the second result says so.
func defaultPublicURL(addr net.Addr) (publicURL string, unspecified bool) {
	if a, ok := addr.(*net.TCPAddr); ok && (a.IP == nil || a.IP.IsUnspecified()) {
		return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port)), true
	}
	return "http://" + addr.String(), false
}

// Addr returns the address the server listens on, once Run has returned.
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// Run opens the store, builds the service and starts serving in the
// background. It returns once the server accepts connections.
func (m *Main) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", m.ListenAddr)
	if err != nil {
		return fmt.Errorf("serve: listen: %w", err)
	}
	m.ln = ln
	publicURL := m.PublicURL
	if publicURL == "" {
		var unspecified bool
		publicURL, unspecified = defaultPublicURL(ln.Addr())
		if unspecified {
			m.logger.Warn("serve: listening on every interface without --public-url, so the links in answers (sliceUrl, apiBase) name "+
				publicURL+", which works only on this machine; set --public-url (YAPS_PUBLIC_URL) to the address clients use",
				"addr", ln.Addr().String(), "publicUrl", publicURL)
		}
	}

	limiter, err := m.limiter()
	if err != nil {
		return err
	}
	m.store, err = bunstore.Open(ctx, m.DB)
	if err != nil {
		return fmt.Errorf("serve: open database: %w", redactErr(err))
	}
	// On Postgres, processes sharing the database push writes, revocations
	// and awareness to each other with LISTEN/NOTIFY (the channel follows
	// the DSN's search_path); polling stays as the fallback.
	var notifier yaps.Notifier
	if strings.HasPrefix(m.DB, "postgres://") || strings.HasPrefix(m.DB, "postgresql://") {
		m.notifier, err = pgnotify.Open(ctx, pgnotify.Config{DSN: m.DB, Logger: m.logger})
		if err != nil {
			return fmt.Errorf("serve: listen for notices: %w", redactErr(err))
		}
		notifier = m.notifier
	}
	m.service, err = yaps.NewService(yaps.Config{
		Store:     m.store,
		Limiter:   limiter,
		PublicURL: publicURL,
		Prefix:    m.Prefix,
		Logger:    m.logger,
		Notifier:  notifier,
	})
	if err != nil {
		// Wrapped so that main's "yaps: " is not followed directly by the
		// service's own "yaps: ".
		return fmt.Errorf("serve: %w", err)
	}

	mux := http.NewServeMux()
	apiCfg := httpapi.Config{Prefix: m.Prefix, PublicURL: publicURL, TrustedProxies: splitList(m.Proxies), Logger: m.logger}
	// Validates the API settings before Mount, which panics on bad ones.
	clientIP, err := httpapi.ClientIPFunc(apiCfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	httpapi.Mount(mux, m.service, apiCfg)
	m.sync, err = ysync.New(m.service, ysync.Config{AllowedOrigins: splitList(m.Origins), ClientIP: clientIP, MaxConnsPerIP: m.SyncConnsPerIP, MaxConnsPerIPTotal: m.SyncConnsPerIPTotal, Logger: m.logger})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	m.sync.Mount(mux, m.Prefix)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if m.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})

	m.server = &http.Server{
		Handler:           accessLog(m.logger, m.Prefix, httpapi.CORS(splitList(m.Origins), mux)),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      m.writeTimeout,
		IdleTimeout:       2 * time.Minute,
	}
	go func() {
		// Accepted sockets are read and written with raw system calls
		// (internal/rawnet): cheaper for the scheduler under load.
		if err := m.server.Serve(rawnet.Listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.logger.Error("serve", "err", err)
		}
	}()
	if m.adaptGC {
		m.stopGC, m.gcDone = make(chan struct{}), make(chan struct{})
		go m.keepGCPercent(serveGCPercent)
	}
	return nil
}

// keepGCPercent sets the GC target by nextGCPercent every m.gcEvery, from
// cur, until Close.
func (m *Main) keepGCPercent(cur int) {
	defer close(m.gcDone)
	tick := time.NewTicker(m.gcEvery)
	defer tick.Stop()
	for {
		select {
		case <-m.stopGC:
			return
		case <-tick.C:
		}
		conns := m.sync.Stats().Conns
		if next := nextGCPercent(cur, conns, m.gcMany, m.gcFew); next != cur {
			debug.SetGCPercent(next)
			m.logger.Debug("serve: GC target", "gogc", next, "syncConns", conns)
			cur = next
		}
	}
}

func (m *Main) limiter() (yaps.Limiter, error) {
	cfg, err := ratelimit.ParseSpec(m.RateLimit)
	if err != nil {
		return nil, fmt.Errorf("serve: --rate-limit: %w", err)
	}
	cfg.Redis = m.Redis
	cfg.KeyPrefix = m.RedisKeys
	if cfg.Redis != "" {
		ratelimit.LogRedisTo(m.logger) // go-redis prints to stderr otherwise
	}
	if cfg.Disabled {
		return yaps.Unlimited{}, nil
	}
	lim, err := ratelimit.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("serve: rate limiter: %w", err)
	}
	m.limiterCloser = lim
	return lim, nil
}

// shutdownGrace is how long Close lets running requests finish.
const shutdownGrace = 10 * time.Second

// responseWriteTimeout is Main.writeTimeout's value: well past the API's
// own bounds on a request (httpapi's 30 s BodyReadTimeout, the store's
// timeouts), and time enough to send a page of 200 notes of 100,000 ASCII
// characters (20 MB) at 1.5 Mbit/s.
const responseWriteTimeout = 2 * time.Minute

// Close stops accepting requests, lets running ones finish (up to
// shutdownGrace), closes sync connections and then the store.
func (m *Main) Close() error {
	m.closing.Store(true)
	if m.stopGC != nil {
		close(m.stopGC)
		<-m.gcDone
		m.stopGC = nil
	}
	var errs []error
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := m.server.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, fmt.Errorf("serve: shutdown: requests still running after %v were cut off", shutdownGrace))
		} else {
			errs = append(errs, err)
		}
	} else if m.ln != nil {
		errs = append(errs, m.ln.Close())
	}
	if m.sync != nil {
		errs = append(errs, m.sync.Close())
	}
	if m.service != nil {
		errs = append(errs, m.service.Close())
	}
	if m.notifier != nil {
		errs = append(errs, m.notifier.Close())
	}
	if m.store != nil {
		errs = append(errs, m.store.Close())
	}
	if m.limiterCloser != nil {
		errs = append(errs, m.limiterCloser.Close())
	}
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// accessLog logs, at debug level, one line per request that httpapi does
// not log itself: sync connections, /healthz and paths outside the API.
// Codes travel in the k query parameter, so the query is logged with k
// redacted.
func accessLog(logger *slog.Logger, prefix string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if !logger.Enabled(r.Context(), slog.LevelDebug) ||
			(strings.HasPrefix(p, prefix+"/") && !strings.HasSuffix(p, "/sync")) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		logger.Debug("http", "method", r.Method, "path", r.URL.Path, "query", redactQuery(r.URL.RawQuery),
			"status", rec.status, "ms", time.Since(start).Milliseconds())
	})
}

// redactQuery hides the secrets in a query string as the API's own log
// does (httpapi.RedactURL).
func redactQuery(raw string) string {
	return strings.TrimPrefix(httpapi.RedactURL(&url.URL{RawQuery: raw}), "?")
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack passes the WebSocket upgrade through; gorilla/websocket asserts
// http.Hijacker directly instead of using http.ResponseController. The
// upgrade's 101 is then written on the raw connection, never through
// WriteHeader, so a successful hijack records it.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil {
		r.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}
