package yaps

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Notifier carries notices between server processes that share one
// database, so a write committed by one process reaches the sync rooms of
// the others at once instead of at the next poll (RULINGS R10). Package
// store/pgnotify implements it with Postgres LISTEN/NOTIFY. A nil
// Config.Notifier means polling only.
//
// Contract for implementations:
//   - Publish sends n to every other process listening on the same
//     database and channel. It is best effort: the Service calls it after
//     the commit, from one background goroutine, with a bounded context;
//     an error is logged and the poller makes up for the lost notice. The
//     implementation sets n.Sender to its own process id.
//   - Listen calls fn for every notice published by another Notifier (a
//     Notifier never delivers its own notices) until ctx is done, and then
//     returns ctx.Err(). fn is called from one goroutine, in arrival order,
//     and must not block for long. Listen reconnects by itself; when it
//     stops listening (the connection failed) it calls fn with a notice of
//     kind NoticeLost at once, and after any gap in which notices may have
//     been lost, with one of kind NoticeResync once it listens again.
//   - Notices may be delivered late, twice or not at all; the Service
//     treats them as hints and always reads the truth from the Store.
type Notifier interface {
	Publish(ctx context.Context, n Notice) error
	Listen(ctx context.Context, fn func(Notice)) error
}

// BatchPublisher is an optional interface of a Notifier: PublishBatch
// sends several notices at once, in order, where Publish would take a round
// trip each (store/pgnotify sends them in one statement). The publisher
// uses it when more than one notice is waiting.
type BatchPublisher interface {
	PublishBatch(ctx context.Context, ns []Notice) error
}

// ConfirmingPublisher is an optional interface of a Notifier:
// PublishConfirmed sends n and returns nil once every other process
// listening has handled it (its Listen callbacks returned), or an error
// when it cannot tell by the time ctx ends. A revocation uses it (RULINGS
// R4: it takes effect at once for HTTP): the call that revokes returns only
// after the other processes dropped the code from their caches, or, when
// one does not confirm, after Config.AuthCacheTTL, by which time whatever
// they cached before the revocation has expired. store/pgnotify
// implements it with acks sent back over the channel.
type ConfirmingPublisher interface {
	PublishConfirmed(ctx context.Context, n Notice) error
}

// publishConfirmed tells the other processes n, a change their auth caches
// may hold (a revoked permission; a list row changed by archive, unarchive
// or rollup), made in a transaction that committed at committed, and
// returns once none of them can still answer from its cache what n
// changed (see ConfirmingPublisher): a client behind a load balancer sees
// its own change on its next request, whichever process answers it.
// Without a ConfirmingPublisher, or without an auth cache to outwait, the
// notice goes out in the background like any other.
func (s *Service) publishConfirmed(n Notice, committed time.Time) {
	cp, ok := s.cfg.Notifier.(ConfirmingPublisher)
	if !ok || !s.auth.enabled() {
		s.notify(n)
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), committed.Add(s.cfg.AuthCacheTTL))
	defer cancel()
	if err := cp.PublishConfirmed(ctx, n); err != nil {
		s.log.Warn("yaps: a change was not confirmed by every process; waiting out the auth cache", "list", n.ListRef, "notice", n.Kind, "err", err)
		<-ctx.Done()
	}
}

// Notice is one message between processes. Only the fields of its Kind
// are set.
type Notice struct {
	Kind         NoticeKind
	ListRef      string
	Seq          int64  // NoticeDoc: the list's last update seq after the commit
	PermissionID string // NoticePermission: the revoked permission
	Payload      []byte // NoticeAwareness: an encoded awareness update
	Sender       string // set by the Notifier: the publishing process
}

// NoticeKind names a Notice.
type NoticeKind uint8

const (
	// NoticeDoc: document updates up to Seq were committed.
	NoticeDoc NoticeKind = iota + 1
	// NoticePermission: PermissionID was revoked (revoke or owner rotation).
	NoticePermission
	// NoticeList: the list row changed outside the document (rollup).
	NoticeList
	// NoticeAwareness: a sync awareness update (Payload) for ListRef.
	NoticeAwareness
	// NoticeResync is delivered by a Notifier, never published: notices
	// may have been lost (e.g. after a reconnect), refresh everything.
	NoticeResync
	// NoticeLost is delivered by a Notifier, never published: it stopped
	// listening, and notices are missed until the NoticeResync that
	// follows. Other processes may not wait for this one meanwhile
	// (ConfirmingPublisher lists only the processes listening), so the
	// Service stops trusting its auth cache until then.
	NoticeLost
)

// ErrNoticeDropped is returned by PublishAwareness when the outgoing notice
// queue is full (the database is slow or unreachable).
var ErrNoticeDropped = errors.New("yaps: notice queue full; notice dropped")

const (
	noticeQueue     = 1024 // outgoing notices waiting for Publish
	refreshQueue    = 4096 // lists waiting for a notice-driven refresh
	refreshWorkers  = 2
	publishTimeout  = 5 * time.Second
	refreshTimeout  = 30 * time.Second
	notifyErrorEach = 10 * time.Second // at most one publish error log per period
)

// notify queues n for publication after a commit. It never blocks: when
// the queue is full the notice is dropped and the poller catches up.
func (s *Service) notify(n Notice) {
	if s.cfg.Notifier == nil {
		return
	}
	select {
	case s.notices <- n:
	default:
		s.log.Debug("yaps: notice queue full; notice dropped", "list", n.ListRef, "kind", n.Kind)
	}
}

// PublishAwareness hands an awareness update of list ref to the other
// server processes (RULINGS R10: awareness crosses processes). It is for
// the sync module and the contract is:
//
//   - payload is the payload of a y-websocket awareness message: the
//     encoded awareness update (varUint count, then per client varUint
//     clientID, varUint clock, varString state JSON), without the message
//     type and without the length prefix. The Service does not decode it.
//   - Call it for every awareness update the room accepted from a local
//     connection, including the removal (clock+1, state null) the room
//     makes when a connection goes away; never for updates that arrived as
//     EventAwareness (no echo between processes).
//   - It never blocks on the network: it copies payload, queues it and
//     returns nil; ErrNoticeDropped when the queue is full, ctx.Err() when
//     ctx is already done. Without a Config.Notifier it does nothing and
//     returns nil.
//   - Delivery is best effort, at most once, unordered with respect to
//     document updates. The Notifier may drop payloads over its limit
//     (store/pgnotify: MaxAwarenessMessageBytes, 256 KiB by default; it
//     sends a payload over MaxAwarenessPayload, about 5.8 KB, in parts).
//
// Other processes emit the update as an EventAwareness with Update set to
// payload, to their subscribers, when they have the list pinned or watched
// (see Pin); the sync module applies it to the room's awareness states and
// relays it to the room's connections as an awareness message.
func (s *Service) PublishAwareness(ctx context.Context, ref string, payload []byte) error {
	if s.cfg.Notifier == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := Notice{Kind: NoticeAwareness, ListRef: ref, Payload: append([]byte(nil), payload...)}
	select {
	case s.notices <- n:
		return nil
	default:
		return ErrNoticeDropped
	}
}

// publisher publishes queued notices until Close, then flushes what is
// queued (briefly). Document notices of one list waiting together are
// merged into the last one.
func (s *Service) publisher() {
	defer s.wg.Done()
	var lastErr time.Time
	batch := make([]Notice, 0, 64)
	// publish runs fn with the publish timeout and logs its error, at most
	// once per notifyErrorEach.
	publish := func(ctx context.Context, fn func(context.Context) error, what ...any) {
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := fn(pctx)
		cancel()
		if err != nil && time.Since(lastErr) > notifyErrorEach {
			lastErr = time.Now()
			s.log.Warn("yaps: publishing failed; other processes catch up by polling", append(what, "err", err)...)
		}
	}
	send := func(ctx context.Context) {
		batch = mergeDocNotices(batch)
		if bp, ok := s.cfg.Notifier.(BatchPublisher); ok && len(batch) > 1 {
			publish(ctx, func(ctx context.Context) error { return bp.PublishBatch(ctx, batch) }, "notices", len(batch))
			return
		}
		for _, n := range batch {
			if ctx.Err() != nil {
				return
			}
			publish(ctx, func(ctx context.Context) error { return s.cfg.Notifier.Publish(ctx, n) }, "list", n.ListRef)
		}
	}
	drain := func() {
		for len(batch) < cap(batch) {
			select {
			case n := <-s.notices:
				batch = append(batch, n)
			default:
				return
			}
		}
	}
	for {
		select {
		case <-s.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			for {
				batch = batch[:0]
				drain()
				if len(batch) == 0 || ctx.Err() != nil {
					return
				}
				send(ctx)
			}
		case n := <-s.notices:
			batch = append(batch[:0], n)
			drain()
			send(context.Background())
		}
	}
}

// mergeDocNotices keeps, of the NoticeDoc notices of each list, only the one
// with the highest seq (at the position of the first); other notices stay.
func mergeDocNotices(ns []Notice) []Notice {
	if len(ns) < 2 {
		return ns
	}
	first := map[string]int{}
	out := ns[:0]
	for _, n := range ns {
		if n.Kind == NoticeDoc {
			if i, ok := first[n.ListRef]; ok {
				out[i].Seq = max(out[i].Seq, n.Seq)
				continue
			}
			first[n.ListRef] = len(out)
		}
		out = append(out, n)
	}
	return out
}

// listener runs Config.Notifier.Listen until Close, restarting it if it
// returns early.
func (s *Service) listener() {
	defer s.wg.Done()
	ctx := s.ctx // cancelled by Close
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		err := s.cfg.Notifier.Listen(ctx, s.onNotice)
		if ctx.Err() != nil {
			return
		}
		s.onNotice(Notice{Kind: NoticeLost})
		s.log.Warn("yaps: listening for notices failed; retrying", "err", err)
		if time.Since(start) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
		s.onNotice(Notice{Kind: NoticeResync})
	}
}

// onNotice handles a notice of another process. Notices about lists this
// process does not have pinned or watched are ignored: nobody here listens
// to their events, and reads and writes catch up with the store anyway.
//
// Notices about a list's document, permissions or row also drop what the
// auth cache holds of it, watched here or not: reads must not trust it.
func (s *Service) onNotice(n Notice) {
	switch n.Kind {
	case NoticeAwareness:
		if s.docs.interested(n.ListRef) {
			s.emit(Event{Kind: EventAwareness, ListRef: n.ListRef, Update: n.Payload})
		}
	case NoticeLost:
		s.auth.suspend(true)
	case NoticeResync:
		s.auth.suspend(false)
		for _, ref := range s.docs.watched() {
			s.refreshLater(ref, refreshWork{full: true})
			s.emit(Event{Kind: EventResync, ListRef: ref})
		}
	case NoticeDoc:
		s.auth.forget(n.ListRef)
		if s.docs.interested(n.ListRef) {
			s.refreshLater(n.ListRef, refreshWork{seq: n.Seq})
		}
	case NoticePermission:
		s.auth.forget(n.ListRef)
		if s.docs.interested(n.ListRef) && n.PermissionID != "" {
			s.refreshLater(n.ListRef, refreshWork{perms: []string{n.PermissionID}})
		}
	case NoticeList:
		s.auth.forget(n.ListRef)
		if s.docs.interested(n.ListRef) {
			s.refreshLater(n.ListRef, refreshWork{list: true})
		}
	}
}

// refreshWork is what notices asked to be done for one list.
type refreshWork struct {
	seq   int64    // catch the document up to at least seq
	perms []string // emit EventCodeRevoked for these
	list  bool     // emit EventListChanged
	full  bool     // catch up and re-read permissions (after lost notices)
}

func (w *refreshWork) merge(o refreshWork) {
	w.seq = max(w.seq, o.seq)
	w.perms = append(w.perms, o.perms...)
	w.list = w.list || o.list
	w.full = w.full || o.full
}

// refresher is the queue of lists to refresh because of notices. A list is
// queued at most once; notices arriving meanwhile merge into its work.
type refresher struct {
	mu      sync.Mutex
	pending map[string]*refreshWork
	queue   chan string
}

func (s *Service) refreshLater(ref string, w refreshWork) {
	r := &s.refresh
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pending[ref]; p != nil {
		p.merge(w)
		return
	}
	select {
	case r.queue <- ref:
		r.pending[ref] = &w
	default:
		s.log.Debug("yaps: refresh queue full; leaving the list to the poller", "list", ref)
	}
}

// refreshWorker carries out queued refreshes until Close.
func (s *Service) refreshWorker() {
	defer s.wg.Done()
	ctx := s.ctx // cancelled by Close
	r := &s.refresh
	for {
		select {
		case <-s.ctx.Done():
			return
		case ref := <-r.queue:
			r.mu.Lock()
			w := r.pending[ref]
			delete(r.pending, ref)
			r.mu.Unlock()
			if w == nil {
				continue
			}
			wctx, wcancel := context.WithTimeout(ctx, refreshTimeout)
			err := s.refreshFromNotice(wctx, ref, *w)
			wcancel()
			if err != nil && ctx.Err() == nil && !IsCode(err, ENOTFOUND) {
				s.log.Warn("yaps: refreshing a list document after a notice failed", "list", ref, "err", err)
			}
		}
	}
}

// refreshFromNotice does w for ref if the list is still pinned or watched,
// emitting what the poller would: EventDocUpdate for each update other
// processes stored, EventListChanged, EventCodeRevoked.
func (s *Service) refreshFromNotice(ctx context.Context, ref string, w refreshWork) error {
	e := s.docs.acquireWatched(ref)
	if e == nil {
		return nil
	}
	defer s.docs.release(e)
	for _, id := range w.perms {
		s.emit(Event{Kind: EventCodeRevoked, ListRef: ref, PermissionID: id})
		delete(e.perms, id) // so the poller does not announce it again
	}
	if w.full || e.doc == nil || e.seq < w.seq {
		if err := s.fresh(ctx, e); err != nil {
			return err
		}
	}
	if w.full {
		if err := s.pollPermissions(ctx, e, nil); err != nil {
			return err
		}
		// A revocation missed while not listening is only found by
		// pollPermissions if the permission was known at the last poll:
		// have every connection's code checked again.
		w.list = true
	}
	if w.list {
		s.emit(Event{Kind: EventListChanged, ListRef: ref})
	}
	return nil
}
