package yaps_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// slowConfirming is a notifier on a bus whose process handles each notice
// some time after it arrives, and confirms (yaps.ConfirmingPublisher) once
// the others handled what it sent.
type slowConfirming struct {
	*fakeNotifier
	peers   *[]*slowConfirming
	delay   time.Duration
	pending atomic.Int64 // notices sent to it, not yet handled
}

func (n *slowConfirming) Publish(ctx context.Context, nt yaps.Notice) error {
	for _, p := range *n.peers {
		if p != n {
			p.pending.Add(1)
		}
	}
	return n.fakeNotifier.Publish(ctx, nt)
}

func (n *slowConfirming) PublishConfirmed(ctx context.Context, nt yaps.Notice) error {
	if err := n.Publish(ctx, nt); err != nil {
		return err
	}
	for _, p := range *n.peers {
		for p != n && p.pending.Load() > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

func (n *slowConfirming) Listen(ctx context.Context, fn func(yaps.Notice)) error {
	return n.fakeNotifier.Listen(ctx, func(nt yaps.Notice) {
		time.Sleep(n.delay)
		fn(nt)
		n.pending.Add(-1)
	})
}

// Archive, unarchive and rollup answer only once the other processes
// dropped the list from their auth caches (as a revocation does), so a
// client behind a load balancer reads its own change, and is charged in
// the rollup's rate-limit class, on its next request wherever it lands.
// Before, the other processes learned of it in the background and served
// the old row from their caches meanwhile.
func TestListChangesConfirmedAcrossProcesses(t *testing.T) {
	t.Parallel()
	b := &bus{}
	var peers []*slowConfirming
	n1 := &slowConfirming{fakeNotifier: b.notifier("p1"), peers: &peers}
	n2 := &slowConfirming{fakeNotifier: b.notifier("p2"), peers: &peers, delay: 50 * time.Millisecond}
	peers = []*slowConfirming{n1, n2}
	e1 := newEnv(t, func(c *yaps.Config) { c.Notifier = n1; c.PollInterval = -1 })
	s2, err := yaps.NewService(yaps.Config{Store: e1.store, Now: e1.clock.Now, PurgeInterval: -1, PollInterval: -1,
		Notifier: n2, AuthCacheTTL: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	<-n1.listening
	<-n2.listening

	owner := e1.list()
	ref := owner.List.Ref
	ed, err := e1.svc.IssuePermission(e1.ctx, owner, yaps.RoleEditor, "ed", nil)
	require.NoError(t, err)
	read := func() *yaps.List {
		t.Helper()
		return authOK(t, s2, ref, ed.Code).List
	}
	require.False(t, read().Archived()) // cached by the second process

	require.NoError(t, e1.svc.ArchiveList(e1.ctx, owner, ""))
	require.True(t, read().Archived(), "DELETE: the other process still served the list as not archived")

	_, err = e1.svc.UpdateList(e1.ctx, e1.reauth(owner), yaps.ListPatch{ArchivedAt: yaps.Null[time.Time]()}, "")
	require.NoError(t, err)
	require.False(t, read().Archived(), "PATCH unarchive: the other process still served the list as archived")

	_, err = e1.svc.UpdateList(e1.ctx, e1.reauth(owner), yaps.ListPatch{ArchivedAt: yaps.Set(e1.clock.Now())}, "")
	require.NoError(t, err)
	require.True(t, read().Archived(), "PATCH archive: the other process still served the list as not archived")

	acct, _, err := e1.svc.CreateAccount(e1.ctx)
	require.NoError(t, err)
	_, err = e1.svc.Rollup(e1.ctx, e1.reauth(owner), acct)
	require.NoError(t, err)
	require.Equal(t, acct.ID, read().AccountID, "rollup: the other process still served the list as anonymous")
}
