// Command embed shows Yaps inside a host application: the host keeps its
// own mux, routes, database and user authentication, and mounts the list
// API and the sync endpoint under a prefix of its choosing.
//
//	go run ./examples/embed            # http://127.0.0.1:8080
//
// The host's users roll anonymous lists into their accounts through the
// account resolver: here a stand-in that trusts an X-User header, where a
// real app would read its session cookie.
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
	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/sync/ysync"
	"github.com/yaps-dev/yaps/yaps"
)

const prefix = "/yaps/v1"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app, err := newApp(ctx, "file:host.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
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
		log.Fatal(err)
	}
	// ListenAndServe returns as soon as Shutdown starts: wait for it.
	if err := <-shutdown; err != nil {
		log.Print(err)
	}
}

// app is the host application with Yaps mounted on its mux.
type app struct {
	mux   *http.ServeMux
	db    *bun.DB
	store *bunstore.Store
	svc   *yaps.Service
	sync  *ysync.Server
}

func newApp(ctx context.Context, sqliteDSN string) (*app, error) {
	sqldb, err := sql.Open("sqlite", sqliteDSN)
	if err != nil {
		return nil, err
	}
	db := bun.NewDB(sqldb, sqlitedialect.New())

	// Yaps keeps its tables in the host's database.
	store, err := bunstore.New(db)
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		return nil, err
	}
	svc, err := yaps.NewService(yaps.Config{Store: store, Prefix: prefix, PublicURL: "http://127.0.0.1:8080"})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the host app's own page")
	})
	httpapi.Mount(mux, svc, httpapi.Config{
		Prefix:   prefix,
		Accounts: headerAccounts,
	})
	sync, err := ysync.New(svc, ysync.Config{})
	if err != nil {
		return nil, err
	}
	sync.Mount(mux, prefix)
	return &app{mux: mux, db: db, store: store, svc: svc, sync: sync}, nil
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

func (a *app) Close() {
	_ = a.sync.Close()
	_ = a.svc.Close()
	_ = a.store.Close()
	_ = a.db.Close()
}
