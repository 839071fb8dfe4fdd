package yaps_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testStore is memstore, or with YAPS_TEST_STORE=sqlite a private
// in-memory SQLite bunstore, so the suite also runs against a SQL store.
func testStore(t *testing.T) yaps.Store {
	t.Helper()
	if os.Getenv("YAPS_TEST_STORE") == "sqlite" {
		st, err := bunstore.Open(context.Background(), "sqlite::memory:")
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	return memstore.New()
}

type env struct {
	t     *testing.T
	svc   *yaps.Service
	store yaps.Store
	clock *clock
	ctx   context.Context
}

func newEnv(t *testing.T, mods ...func(*yaps.Config)) *env {
	t.Helper()
	return newEnvOn(t, testStore(t), mods...)
}

// storeKinds names the stores a test can run on with newEnvOn, each a
// function returning a fresh one: memstore, an in-memory SQLite bunstore,
// and Postgres (skipped unless YAPS_TEST_POSTGRES is set, which CI sets).
var storeKinds = []struct {
	name string
	open func(t *testing.T) yaps.Store
}{
	{"memstore", func(*testing.T) yaps.Store { return memstore.New() }},
	{"sqlite", func(t *testing.T) yaps.Store { return openStore(t, "sqlite::memory:") }},
	{"postgres", func(t *testing.T) yaps.Store { return openStore(t, storetest.PostgresDSN(t)) }},
}

func openStore(t *testing.T, dsn string) yaps.Store {
	t.Helper()
	st, err := bunstore.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// newEnvOn is newEnv on the given store.
func newEnvOn(t *testing.T, st yaps.Store, mods ...func(*yaps.Config)) *env {
	t.Helper()
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	cfg := yaps.Config{Store: st, Now: c.Now, PurgeInterval: -1}
	for _, m := range mods {
		m(&cfg)
	}
	svc, err := yaps.NewService(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	return &env{t: t, svc: svc, store: st, clock: c, ctx: context.Background()}
}

// list creates a list and returns the owner actor.
func (e *env) list() *yaps.Actor {
	e.t.Helper()
	cl, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Title: yaps.Set("Groceries")})
	require.NoError(e.t, err)
	a, err := e.svc.Authenticate(e.ctx, cl.List.Ref, cl.OwnerCode)
	require.NoError(e.t, err)
	return a
}

// actor issues a code of role on owner's list and authenticates it.
func (e *env) actor(owner *yaps.Actor, role yaps.Role, scopes ...yaps.Scope) *yaps.Actor {
	e.t.Helper()
	ip, err := e.svc.IssuePermission(e.ctx, owner, role, string(role), scopes)
	require.NoError(e.t, err)
	a, err := e.svc.Authenticate(e.ctx, owner.List.Ref, ip.Code)
	require.NoError(e.t, err)
	return a
}

// reauth refreshes a.List (archive state) as the edge does per request.
func (e *env) reauth(a *yaps.Actor) *yaps.Actor {
	e.t.Helper()
	l, err := e.store.List(e.ctx, a.List.Ref)
	require.NoError(e.t, err)
	cp := *a
	cp.List = l
	return &cp
}

func task(content string) yaps.YapFields {
	return yaps.YapFields{Content: yaps.Set(content), Status: yaps.Set(yaps.StatusOpen)}
}

func requireCode(t *testing.T, code string, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, yaps.ErrorCode(err), "error: %v", err)
}

// secondProcess returns another Service on e's store, as a second process
// sharing the database would be: no notifier, polling off.
func (e *env) secondProcess(mods ...func(*yaps.Config)) *yaps.Service {
	e.t.Helper()
	cfg := yaps.Config{Store: e.store, Now: e.clock.Now, PurgeInterval: -1, PollInterval: -1}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := yaps.NewService(cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}
