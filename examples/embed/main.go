// Command embed shows Yaps inside a host application: the host keeps its
// own mux, routes, database and user authentication, and mounts the list
// API and the sync endpoint under a prefix of its choosing.
//
//	go run ./examples/embed            # http://127.0.0.1:8080
//
// The host's users roll anonymous lists into their accounts through the
// account resolver: here a stand-in that trusts an X-User header, where a
// real app would read its session cookie.
//
// Rate limits are the host's to set up: yaps.Config.Limiter defaults to
// yaps.Unlimited, which allows everything. This host builds package
// ratelimit's limiter with RULINGS R8's defaults (in memory; set
// ratelimit.Config.Redis to share it between processes) and gives the sync
// endpoint the API's notion of the client IP, so both count the same client.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the host's SQLite driver

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/ratelimit"
	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/sync/ysync"
	"github.com/yaps-dev/yaps/yaps"
)

const prefix = "/yaps/v1"

func main() {
	// log.Fatal exits at once, skipping deferred calls: it is only called
	// here, after run has closed everything it opened.
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app, err := newApp(ctx, "file:host.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer app.Close()
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: app.mux, ReadHeaderTimeout: 10 * time.Second}
	shutdown := make(chan error, 1)
	go func() {
		<-ctx.Done()
		// Running requests finish (up to 10 s) before the deferred Close
		// takes the service and the database away from them.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- srv.Shutdown(sctx)
	}()
	log.Printf("host app on http://%s, lists under %s", srv.Addr, prefix)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err // the deferred Close still runs
	}
	// ListenAndServe returns as soon as Shutdown starts: wait for it.
	return <-shutdown
}

// app is the host application with Yaps mounted on its mux.
type app struct {
	mux     *http.ServeMux
	db      *bun.DB
	store   *bunstore.Store
	limiter *ratelimit.Limiter
	svc     *yaps.Service
	sync    *ysync.Server
}

// newApp builds the host app. On an error it closes what it opened.
func newApp(ctx context.Context, sqliteDSN string) (_ *app, err error) {
	a := &app{}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	sqldb, err := sql.Open("sqlite", sqliteDSN)
	if err != nil {
		return nil, err
	}
	a.db = bun.NewDB(sqldb, sqlitedialect.New())

	// Yaps keeps its tables in the host's database. On SQLite the store
	// holds one connection of the host's pool until Store.Close.
	if a.store, err = bunstore.New(a.db); err != nil {
		return nil, err
	}
	if err := a.store.Migrate(ctx); err != nil {
		return nil, err
	}
	// Without a Limiter nothing is rate limited. ratelimit.Config{} is
	// R8's limits in this process's memory.
	if a.limiter, err = ratelimit.New(ratelimit.Config{}); err != nil {
		return nil, err
	}
	a.svc, err = yaps.NewService(yaps.Config{
		Store:     a.store,
		Limiter:   a.limiter,
		Prefix:    prefix,
		PublicURL: "http://127.0.0.1:8080", // the origin clients reach the host at
	})
	if err != nil {
		return nil, err
	}

	a.mux = http.NewServeMux()
	a.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the host app's own page")
	})
	apiCfg := httpapi.Config{
		Prefix:   prefix,
		Accounts: headerAccounts,
		// Behind a reverse proxy, list it in TrustedProxies so the client
		// IP (and its rate limits) comes from X-Forwarded-For.
	}
	// The client IP the API rate-limits by; it also validates apiCfg,
	// on which Mount would panic.
	clientIP, err := httpapi.ClientIPFunc(apiCfg)
	if err != nil {
		return nil, err
	}
	httpapi.Mount(a.mux, a.svc, apiCfg)
	// The sync endpoint reads the same client IP and account credential.
	if a.sync, err = ysync.New(a.svc, ysync.Config{ClientIP: clientIP, Accounts: headerAccounts}); err != nil {
		return nil, err
	}
	a.sync.Mount(a.mux, prefix)
	return a, nil
}

// headerAccounts stands in for the host's own authentication: the account
// is the user the host already authenticated (here, naively, X-User).
func headerAccounts(r *http.Request) (*yaps.Account, error) {
	user := r.Header.Get("X-User")
	if user == "" {
		return nil, nil
	}
	return &yaps.Account{ID: "user:" + user}, nil
}

// Close releases everything in reverse order of creation: the sync
// endpoint's connections, the service, the limiter, the store (which gives
// its connection back to the host's pool) and last the host's database.
func (a *app) Close() {
	if a.sync != nil {
		_ = a.sync.Close()
	}
	if a.svc != nil {
		_ = a.svc.Close()
	}
	if a.limiter != nil {
		_ = a.limiter.Close()
	}
	if a.store != nil {
		_ = a.store.Close()
	}
	if a.db != nil {
		_ = a.db.Close()
	}
}
