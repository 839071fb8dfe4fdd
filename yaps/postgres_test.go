package yaps_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// postgresProcesses starts two services (as two processes would be), each
// with its own connection pool on one fresh Postgres schema, with cfg
// (PurgeInterval off), and returns them with an owner of one new list
// authenticated on each.
func postgresProcesses(t *testing.T, cfg yaps.Config) ([]*yaps.Service, []*yaps.Actor) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()
	var svcs []*yaps.Service
	for range 2 {
		st, err := bunstore.Open(ctx, dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		c := cfg
		c.Store, c.PurgeInterval = st, -1
		s, err := yaps.NewService(c)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		svcs = append(svcs, s)
	}
	cl, err := svcs[0].CreateList(ctx, yaps.CreateListInput{Title: yaps.Set("shared")})
	require.NoError(t, err)
	var actors []*yaps.Actor
	for _, s := range svcs {
		a, err := s.Authenticate(ctx, cl.List.Ref, cl.OwnerCode)
		require.NoError(t, err)
		actors = append(actors, a)
	}
	return svcs, actors
}

// TestPostgresTwoProcesses runs two services, each with its own connection
// pool, on one Postgres schema: concurrent HTTP writes and sync writes on
// both must serialize into one update log, and both documents must agree
// with the projection. Runs when YAPS_TEST_POSTGRES is set.
func TestPostgresTwoProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svcs, actors := postgresProcesses(t, yaps.Config{CompactAfter: 7})
	ref := actors[0].List.Ref
	note, _, err := svcs[0].CreateYap(ctx, actors[0], yaps.KindNote, yaps.YapFields{Body: yaps.Set("")}, "", nil)
	require.NoError(t, err)

	const each = 8
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, s := range svcs {
		a := actors[i]
		wg.Add(2)
		go func() { // HTTP creates
			defer wg.Done()
			for j := range each {
				if _, _, err := s.CreateYap(ctx, a, yaps.KindTask, task(fmt.Sprintf("p%d-%d", i, j)), "", nil); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // sync typing into the shared note, as a client on process i
			defer wg.Done()
			for j := range each {
				state, err := s.EncodeState(ctx, ref, nil)
				if err != nil {
					errs <- err
					return
				}
				d := yjs.NewDoc()
				if err := d.ApplyUpdate(state, nil); err != nil {
					errs <- err
					return
				}
				sv := d.EncodeStateVector()
				v, _ := d.GetMap("yaps").Get(note.ID)
				body, _ := v.(*yjs.Map).Get("body")
				body.(*yjs.Text).Insert(0, fmt.Sprint(i), nil)
				u, err := d.EncodeStateAsUpdate(sv)
				if err != nil {
					errs <- err
					return
				}
				_ = j
				if err := s.ApplyUpdate(ctx, a, u, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	p, err := svcs[1].ListYaps(ctx, actors[1], "", 200, false)
	require.NoError(t, err)
	require.Len(t, p.Yaps, 2*each+1)
	n, err := svcs[0].GetYap(ctx, actors[0], note.ID)
	require.NoError(t, err)
	require.Len(t, n.Body, 2*each)
	for _, s := range svcs {
		require.NoError(t, s.Refresh(ctx, ref))
	}
	s0, err := svcs[0].EncodeState(ctx, ref, nil)
	require.NoError(t, err)
	s1, err := svcs[1].EncodeState(ctx, ref, nil)
	require.NoError(t, err)
	d0, d1 := yjs.NewDoc(), yjs.NewDoc()
	require.NoError(t, d0.ApplyUpdate(s0, nil))
	require.NoError(t, d1.ApplyUpdate(s1, nil))
	require.Equal(t, d0.ToJSON(), d1.ToJSON())
	sv0, err := svcs[0].StateVector(ctx, ref)
	require.NoError(t, err)
	sv1, err := svcs[1].StateVector(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, sv0, sv1)
}
