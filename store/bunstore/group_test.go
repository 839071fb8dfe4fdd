package bunstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// A cancelled context fails the write before anything runs.
func TestGroupCommitCancelled(t *testing.T) {
	t.Parallel()
	s := open(t, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
	l := &yaps.List{Ref: "l", Kind: yaps.KindTask, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	require.NoError(t, s.CreateList(context.Background(), l, nil, []byte("u1"), nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := s.Update(ctx, "l", func(yaps.Tx) error { called = true; return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, called)
}

func TestPermissionActive(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(t *testing.T) string{
		"SQLiteFile":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "yaps.db") },
		"SQLiteMemory": func(*testing.T) string { return "sqlite::memory:" },
		"Postgres":     func(t *testing.T) string { return storetest.PostgresDSN(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t, dsn(t))
			now := time.Now()
			for _, ref := range []string{"a", "b"} {
				l := &yaps.List{Ref: ref, Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}
				p := &yaps.Permission{ID: "p" + ref, Role: yaps.RoleOwner, CreatedAt: now, CodeHash: []byte("h" + ref)}
				require.NoError(t, s.CreateList(ctx, l, p, nil, nil))
			}
			check := func(id string, found, active bool) {
				t.Helper()
				require.NoError(t, s.Update(ctx, "a", func(tx yaps.Tx) error {
					f, a, err := tx.(yaps.PermissionActiveTx).PermissionActive(id)
					require.NoError(t, err)
					require.Equal(t, found, f, "found %s", id)
					require.Equal(t, active, a, "active %s", id)
					return nil
				}))
			}
			check("pa", true, true)
			check("pb", false, false) // another list's
			check("nope", false, false)
			require.NoError(t, s.Update(ctx, "a", func(tx yaps.Tx) error { return tx.RevokePermission("pa", now) }))
			check("pa", true, false)
		})
	}
}

// The writer caches the list row and permissions between writes; a write
// by another connection (another process) must invalidate them.
func TestWriterCacheSeesOtherWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "yaps.db")
	a, b := open(t, dsn), open(t, dsn)
	now := time.Now()
	l := &yaps.List{Ref: "l", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}
	p := &yaps.Permission{ID: "p", Role: yaps.RoleOwner, CreatedAt: now, CodeHash: []byte("h")}
	require.NoError(t, a.CreateList(ctx, l, p, []byte("u1"), nil))
	appendAndCheck := func(s interface {
		Update(context.Context, string, func(yaps.Tx) error) error
	}, title string, active bool) {
		t.Helper()
		require.NoError(t, s.Update(ctx, "l", func(tx yaps.Tx) error {
			_, act, err := tx.(yaps.PermissionActiveTx).PermissionActive("p")
			require.NoError(t, err)
			require.Equal(t, active, act)
			if _, err := tx.AppendUpdate([]byte(title)); err != nil {
				return err
			}
			l := tx.List()
			l.Title = title
			return tx.SaveList(l)
		}))
	}
	appendAndCheck(a, "a1", true)
	appendAndCheck(a, "a2", true) // cached now
	appendAndCheck(b, "b1", true)
	require.NoError(t, b.Update(ctx, "l", func(tx yaps.Tx) error { return tx.RevokePermission("p", now) }))
	appendAndCheck(a, "a3", false)
	require.NoError(t, b.CompactDoc(ctx, "l", 3, []byte("state")))
	appendAndCheck(a, "a4", false)
	for _, s := range []*bunstore.Store{a, b} {
		got, err := s.List(ctx, "l")
		require.NoError(t, err)
		require.Equal(t, "a4", got.Title)
		require.EqualValues(t, 6, got.DocVersion)
		d, err := s.Doc(ctx, "l", 0)
		require.NoError(t, err)
		require.EqualValues(t, 3, d.StateSeq)
		require.Equal(t, [][]byte{[]byte("b1"), []byte("a3"), []byte("a4")}, d.Updates)
	}
	// A rolled-back write leaves no trace in the cache.
	require.Error(t, a.Update(ctx, "l", func(tx yaps.Tx) error {
		if _, err := tx.AppendUpdate([]byte("x")); err != nil {
			return err
		}
		require.NoError(t, tx.RevokePermission("p", now))
		return errors.New("no")
	}))
	appendAndCheck(a, "a5", false)
	got, err := b.List(ctx, "l")
	require.NoError(t, err)
	require.EqualValues(t, 7, got.DocVersion)
}

// A write queued behind a long SQLite batch leaves the queue at its
// deadline instead of waiting for the batch, and nothing of it runs.
func TestGroupCommitQueuedDeadline(t *testing.T) {
	t.Parallel()
	s := open(t, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
	ctx := context.Background()
	for _, ref := range []string{"a", "b"} {
		l := &yaps.List{Ref: ref, Kind: yaps.KindTask, CreatedAt: time.Now(), UpdatedAt: time.Now()}
		require.NoError(t, s.CreateList(ctx, l, nil, []byte("u1"), nil))
	}
	inside, hold := make(chan struct{}), make(chan struct{})
	leader := make(chan error, 1)
	go func() {
		leader <- s.Update(ctx, "a", func(yaps.Tx) error { close(inside); <-hold; return nil })
	}()
	<-inside
	go func() { time.Sleep(2 * time.Second); close(hold) }() // were the write to wait for the batch
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	called := false
	start := time.Now()
	err := s.Update(qctx, "b", func(yaps.Tx) error { called = true; return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second, "the write waited for the batch ahead of it")
	require.NoError(t, <-leader)
	require.False(t, called)
	// The queue is intact: the next write runs.
	require.NoError(t, s.Update(ctx, "b", func(yaps.Tx) error { called = true; return nil }))
	require.True(t, called)
}

// A batch of replayable writes runs without a savepoint per write. One that
// fails before it wrote leaves the others alone; one that fails or panics
// after writing makes the batch run again, each write in its savepoint,
// and leaves no trace. A batch holding a write that cannot run again is
// guarded from the start.
func TestReplayableBatch(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	type write struct {
		replayable bool
		fail       string // "", "before", "after", "panic"
	}
	for _, tc := range []struct {
		name           string
		writes         []write
		wantCalls      []int
		wantSavepoints int64
	}{
		{"all succeed", []write{{true, ""}, {true, ""}, {true, ""}}, []int{1, 1, 1}, 0},
		{"one fails before writing", []write{{true, ""}, {true, "before"}, {true, ""}}, []int{1, 1, 1}, 0},
		{"one fails after writing", []write{{true, ""}, {true, "after"}, {true, ""}}, []int{2, 2, 1}, 3},
		{"one panics after writing", []write{{true, ""}, {true, "panic"}, {true, ""}}, []int{2, 2, 1}, 3},
		{"one cannot run again", []write{{true, ""}, {false, "after"}, {true, ""}}, []int{1, 1, 1}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := open(t, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
			for i := range tc.writes {
				l := &yaps.List{Ref: fmt.Sprintf("l%d", i), Kind: yaps.KindTask, CreatedAt: time.Now(), UpdatedAt: time.Now()}
				require.NoError(t, s.CreateList(ctx, l, nil, []byte("u1"), nil))
			}
			wait, release := bunstore.GateWrites(t, s)
			calls := make([]int, len(tc.writes))
			errs := make([]error, len(tc.writes))
			var wg sync.WaitGroup
			for i, w := range tc.writes {
				ref := fmt.Sprintf("l%d", i)
				fn := func(tx yaps.Tx) error {
					calls[i]++
					if w.fail == "before" {
						return errBoom
					}
					if _, err := tx.AppendUpdate([]byte(ref)); err != nil {
						return err
					}
					switch w.fail {
					case "after":
						return errBoom
					case "panic":
						panic("kaboom")
					}
					return nil
				}
				update := s.Update
				if w.replayable {
					update = s.UpdateReplayable
				}
				wg.Go(func() {
					defer func() {
						if p := recover(); p != nil {
							require.Equal(t, "kaboom", p)
							errs[i] = errBoom
						}
					}()
					errs[i] = update(ctx, ref, fn)
				})
				wait(i + 1) // queued in order
			}
			release()
			wg.Wait()
			require.Equal(t, tc.wantCalls, calls)
			require.Equal(t, tc.wantSavepoints, bunstore.Savepoints(s))
			for i, w := range tc.writes {
				ref := fmt.Sprintf("l%d", i)
				d, err := s.Doc(ctx, ref, 0)
				require.NoError(t, err)
				if w.fail != "" {
					require.ErrorIs(t, errs[i], errBoom, ref)
					require.Equal(t, [][]byte{[]byte("u1")}, d.Updates, ref)
					continue
				}
				require.NoError(t, errs[i], ref)
				require.Equal(t, [][]byte{[]byte("u1"), []byte(ref)}, d.Updates, ref)
			}
		})
	}
}
