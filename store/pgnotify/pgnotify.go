// Package pgnotify implements yaps.Notifier with Postgres LISTEN/NOTIFY, so
// several `yaps serve` processes on one Postgres database push writes and
// awareness to each other without an extra broker (RULINGS R10).
//
// # Connections
//
// A Notifier holds one dedicated connection that runs LISTEN on its
// channel and waits for notifications (WaitForNotification), pinging it
// after PingInterval of silence so a dead link is noticed. The presence
// check (every PeerCheckInterval) also drops the connection as lost once
// pg_stat_activity, which showed it before, no longer does: its backend is
// gone while the socket stays half-open, and the other processes already
// stopped publishing to it. When the
// connection fails it reconnects with exponential backoff (100 ms doubling
// up to MaxBackoff). It delivers a yaps.NoticeLost as soon as the
// connection fails (the service stops trusting its auth cache: publishers
// no longer wait for this process) and, once listening again, a
// yaps.NoticeResync so the service refreshes what it watches (notices sent
// meanwhile are lost). Publish runs `SELECT pg_notify($1, $2)` on a small
// pool (two connections) of the same DSN. The listening connection carries
// application_name "yaps-pgnotify-<id>-<tag>" (tag: the first 12 hex
// digits of the SHA-256 of the channel), which makes it easy to find in
// pg_stat_activity and tells other Notifiers which channel it hears.
//
// # Presence
//
// A process alone on its channel has nobody to tell, yet each NOTIFY costs
// Postgres a transaction with a WAL flush, and a wake-up of the process's
// own listening connection, which then drops the notice. So a Notifier
// publishes only while another Notifier may be listening:
//
//   - It looks for other Notifiers' listening connections of its channel in
//     pg_stat_activity when it opens and every PeerCheckInterval. If the
//     view does not show it its own connection (a role without the right to
//     see it, or its connection is down), or the query fails, it assumes
//     others listen.
//   - Hearing any notice from another process means a peer is there.
//   - Opening, and every reconnection of the listening connection, sends a
//     hello on the channel, so the others hear of the newcomer within
//     milliseconds instead of at their next look.
//   - Notices not sent for lack of listeners are kept for ReplayWindow
//     (awareness excepted) and sent when a peer appears: a process that
//     joined, and loaded a list just before the others heard its hello,
//     still hears of writes it might have missed. What falls outside this
//     is left to polling, as any lost notice is.
//
// # Channel
//
// NOTIFY channels are per database, not per schema. The default channel is
// "yaps_notices", or, when the DSN sets search_path (tests put each run in
// its own schema), "yaps_notices_" plus the first 12 hex digits of the
// SHA-256 of the search_path, so processes on different schemas of one
// database do not hear each other. Every process of one deployment must
// therefore use the same search_path (or the same Config.Channel).
//
// # Payload
//
// A notice travels as compact JSON: {"k":kind,"s":sender,"r":listRef,
// "q":seq,"p":permissionId,"a":base64(awareness)}, with empty members left
// out. Postgres limits a payload to 7999 bytes; an awareness update larger
// than MaxAwarenessPayload (5800 bytes before base64) goes in parts (see
// Parts). Each Notifier has a random process id (ID) stamped into what it
// publishes; its own notices are dropped when they come back.
//
// # Parts
//
// Most awareness states are a few hundred bytes, but the sync server
// accepts one of up to 64 KiB (an avatar as a data URL, say), and every
// process must see it. An awareness update over MaxAwarenessPayload is
// therefore split into parts of up to about 5.9 KB each,
// {"s":sender,"m":messageId,"i":index,"n":count,"t":kind,"r":listRef,
// "a":base64(its share of the update)}, "i" left out for the first, all
// sent by one statement (`SELECT pg_notify($1, p) FROM unnest($2)`), so
// they are committed in one transaction, whose notifications Postgres
// delivers in order and without others between them (message ids count up
// per sender from 1; the parts differ, so none is folded into another). An
// update over Config.MaxAwarenessMessageBytes (default 256 KiB) is dropped
// with a debug log and Publish returns nil: awareness is best effort, and
// a client re-sends its state every 15 s. A 64 KiB state takes 12
// notifications, each costing Postgres about as much as a small write.
//
// A listener collects the parts by sender and message id and delivers the
// update once the last one arrived. A part that is malformed, or does not
// follow the one before it of its message (index, count, kind or list ref),
// discards the message, as does one that would take it over
// MaxAwarenessMessageBytes; parts whose first part it never saw are
// ignored. It keeps at most MaxAwarenessMessageBytes of incomplete
// messages per sender (a sender's newer message pushes out its older
// incomplete ones) and four times that in all, and drops a message still
// incomplete PartTimeout (default 5 s) after its first part. A process from
// before parts ignores them (a payload without a kind, like a hello), so
// while a deployment runs mixed versions large states do not reach the old
// processes, as before.
//
// # Confirmed notices
//
// PublishConfirmed (yaps.ConfirmingPublisher, used for revocations) adds a
// nonce, {"s":sender,"c":nonce,...}, and waits for an ack,
// {"s":listener,"ack":nonce}, from each other Notifier that
// pg_stat_activity shows listening on the channel when it starts. A
// listener sends the ack once its Listen callbacks have returned, so the
// publisher knows the notice took effect everywhere.
//
// PublishBatch packs several notices into one payload,
// {"s":sender,"b":[notice,...]} (each notice without its "s"), up to the
// limit: Postgres spends about as much on one notification (queueing it,
// waking and feeding every listener, itself included) as on the write that
// caused it, so a batch of N writes costs one notification instead of N.
// Listeners read both forms; a process from before packed payloads ignores
// them (with a debug log) and catches up by polling, which only matters
// while a deployment runs mixed versions.
package pgnotify

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yaps-dev/yaps/yaps"
)

const (
	// DefaultChannel is the channel without a search_path in the DSN.
	DefaultChannel = "yaps_notices"
	// MaxAwarenessPayload is the largest awareness update sent in one
	// payload; a larger one goes in parts (see Parts).
	MaxAwarenessPayload = 5800
	// maxPayload is Postgres's NOTIFY limit (payload shorter than 8000).
	maxPayload = 7999
)

// ErrClosed is returned by Listen and Publish after Close.
var ErrClosed = errors.New("pgnotify: notifier closed")

// Config configures a Notifier. Zero fields take the defaults named.
type Config struct {
	// DSN of the Postgres database (postgres://... or key=value). Required.
	DSN string
	// Channel to LISTEN and NOTIFY on: lowercase letters, digits and _, at
	// most 63 characters. Default: ChannelFor(DSN).
	Channel string
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// MaxBackoff caps the wait between reconnection attempts. Default: 5s.
	MaxBackoff time.Duration
	// PingInterval: the listening connection is pinged after this long
	// without a notification. Default: 30s.
	PingInterval time.Duration
	// PeerCheckInterval: how often pg_stat_activity is asked whether other
	// Notifiers listen on the channel (see Presence). Default: 2s.
	PeerCheckInterval time.Duration
	// MaxAwarenessMessageBytes caps an awareness update sent in parts (see
	// Parts): Publish drops a larger one (debug log), and a listener
	// discards a message whose parts add up to more. It must be at least
	// the largest awareness notice the sync server publishes, one client's
	// state (sync/ysync's MaxAwarenessStateBytes, 64 KiB by default) plus
	// a few dozen bytes; every process of a deployment should use the same
	// value. Default: DefaultMaxAwarenessMessageBytes (256 KiB).
	MaxAwarenessMessageBytes int
	// PartTimeout: a listener drops a message sent in parts whose parts
	// have not all arrived this long after the first. Default:
	// DefaultPartTimeout (5s).
	PartTimeout time.Duration
}

// ReplayWindow is how long notices skipped for lack of listeners are kept,
// to be sent when a peer appears (see Presence).
const ReplayWindow = time.Second

// maxSkipped bounds the notices kept for ReplayWindow; the oldest go first.
const maxSkipped = 1024

// Notifier is a yaps.Notifier on Postgres LISTEN/NOTIFY. It is safe for
// concurrent use.
type Notifier struct {
	cfg     Config
	id      string
	own     string // the prefix of this Notifier's payloads, see wire
	connCfg *pgx.ConnConfig
	pool    *pgxpool.Pool

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	done   chan struct{} // the listen loop ended
	once   sync.Once

	// The listening connection's generation (bumped per connection) and
	// the cancel of its wait, for checkPeers: a connection the server no
	// longer lists (its backend is gone, the socket half-open) is dropped
	// and replaced instead of waiting out PingInterval.
	lmu     sync.Mutex
	lgen    uint64
	lcancel context.CancelCauseFunc
	ownSeen atomic.Bool // pg_stat_activity has shown the listening connection

	mu   sync.Mutex
	subs map[int]func(yaps.Notice)
	next int

	// Presence (see the package comment).
	appName string      // of the listening connection
	peers   atomic.Bool // another Notifier may listen: publish
	pmu     sync.Mutex  // guards the fields below and changes of peers
	heardN  uint64      // bumped whenever a peer is heard
	skipped []skippedNotice
	loops   sync.WaitGroup // the presence loop
	unsent  atomic.Int64   // notices skipped, for tests

	// PublishConfirmed's waiters, by nonce: the peers yet to ack.
	amu     sync.Mutex
	waiters map[string]*ackWaiter

	// Parts (see the package comment).
	msgSeq atomic.Uint64 // the id of the last message sent in parts
	parts  *assembler    // puts the other processes' parts back together
}

// ackWaiter is one PublishConfirmed call waiting for its acks.
type ackWaiter struct {
	pending map[string]bool // peer ids
	done    chan struct{}   // closed once pending is empty
}

// skippedNotice is a notice not sent for lack of listeners.
type skippedNotice struct {
	at     time.Time
	notice yaps.Notice
}

var channelRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ChannelFor returns the default channel for dsn: DefaultChannel, with a
// short hash of the search_path appended when the DSN sets one.
func ChannelFor(dsn string) string {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return DefaultChannel
	}
	sp := cc.RuntimeParams["search_path"]
	if sp == "" {
		return DefaultChannel
	}
	return DefaultChannel + "_" + shortHash(sp)
}

// New connects a Notifier to dsn with the default configuration.
func New(ctx context.Context, dsn string) (*Notifier, error) {
	return Open(ctx, Config{DSN: dsn})
}

// Open connects a Notifier: the publishing pool and the listening
// connection are established (and LISTEN issued) before it returns, so
// notices published after Open returns are not missed.
func Open(ctx context.Context, cfg Config) (*Notifier, error) {
	if cfg.DSN == "" {
		return nil, errors.New("pgnotify: a DSN is required")
	}
	if cfg.Channel == "" {
		cfg.Channel = ChannelFor(cfg.DSN)
	}
	if !channelRE.MatchString(cfg.Channel) {
		return nil, fmt.Errorf("pgnotify: invalid channel name %q", cfg.Channel)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.PeerCheckInterval <= 0 {
		cfg.PeerCheckInterval = 2 * time.Second
	}
	if cfg.MaxAwarenessMessageBytes <= 0 {
		cfg.MaxAwarenessMessageBytes = DefaultMaxAwarenessMessageBytes
	}
	if cfg.PartTimeout <= 0 {
		cfg.PartTimeout = DefaultPartTimeout
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	n := &Notifier{cfg: cfg, id: hex.EncodeToString(raw[:]), done: make(chan struct{}), subs: map[int]func(yaps.Notice){},
		waiters: map[string]*ackWaiter{}, parts: newAssembler(cfg)}
	n.own = `{"s":"` + n.id + `"`

	cc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: %w", err)
	}
	n.appName = "yaps-pgnotify-" + n.id + "-" + shortHash(cfg.Channel)
	cc.RuntimeParams["application_name"] = n.appName
	n.connCfg = cc
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: %w", err)
	}
	pc.MaxConns = 2
	pc.MinConns = 0
	pc.MaxConnIdleTime = time.Minute
	n.pool, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: %w", err)
	}
	conn, err := n.connect(ctx)
	if err != nil {
		n.pool.Close()
		return nil, err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.checkPeers(ctx)
	n.hello(ctx)
	go n.run(conn)
	n.loops.Add(1)
	go n.presenceLoop()
	return n, nil
}

// shortHash is the first 12 hex digits of the SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// ID returns the process id stamped into this Notifier's notices.
func (n *Notifier) ID() string { return n.id }

// Channel returns the channel this Notifier listens and notifies on.
func (n *Notifier) Channel() string { return n.cfg.Channel }

// Close stops listening and closes the connections. Listen calls return
// ErrClosed.
//
// Close waits at most closeWait for the pool: with the network path to
// Postgres stalled, pgxpool waits 15 s for a cancelled query's cancel
// request, and a shutdown must not. The pool then finishes closing in the
// background.
func (n *Notifier) Close() error {
	n.once.Do(func() {
		n.cancel()
		<-n.done
		n.loops.Wait()
		n.parts.close()
		closed := make(chan struct{})
		go func() {
			n.pool.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(closeWait):
			n.cfg.Logger.Warn("pgnotify: the connection pool did not close in time; leaving it to finish", "channel", n.cfg.Channel)
		}
	})
	return nil
}

// closeWait bounds how long Close waits for the connection pool.
const closeWait = time.Second

// errNotListed ends the wait of a listening connection pg_stat_activity no
// longer shows.
var errNotListed = errors.New("pgnotify: the listening connection is gone from pg_stat_activity")

// wire is the JSON form of a notice. The sender comes first, so a process
// recognizes its own notices (every listener hears them) by their prefix
// without decoding them.
type wire struct {
	S   string          `json:"s,omitempty"`
	K   yaps.NoticeKind `json:"k,omitempty"`
	R   string          `json:"r,omitempty"`
	Q   int64           `json:"q,omitempty"`
	P   string          `json:"p,omitempty"`
	A   []byte          `json:"a,omitempty"`
	B   []wire          `json:"b,omitempty"`   // a packed payload's notices, without S
	H   int             `json:"h,omitempty"`   // 1: a hello (see Presence), nothing else set but S
	C   string          `json:"c,omitempty"`   // PublishConfirmed: answer with an ack carrying C
	Ack string          `json:"ack,omitempty"` // an ack of the notice with C = Ack, nothing else set but S
	// A part of a split notice (see Parts), with S, R and A (its share of
	// the payload) set, never K: a process that does not know parts
	// ignores a payload without K or B.
	M uint64          `json:"m,omitempty"` // the message's id, per sender, from 1
	I int             `json:"i,omitempty"` // the part's index, from 0
	N int             `json:"n,omitempty"` // the message's part count
	T yaps.NoticeKind `json:"t,omitempty"` // the message's kind
}

// Publish sends notice to the other processes on the channel (see the
// package comment for the payload limit and Parts). While no other
// Notifier listens it sends nothing and returns nil (see Presence).
func (n *Notifier) Publish(ctx context.Context, notice yaps.Notice) error {
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	if n.skip(notice) {
		return nil
	}
	item, split, err := n.encodeItem(notice)
	if split {
		return n.notifyAll(ctx, n.split(notice))
	}
	if err != nil || item == nil {
		return err
	}
	if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, $2)", n.cfg.Channel, n.single(item)); err != nil {
		return fmt.Errorf("pgnotify: notify: %w", err)
	}
	return nil
}

// notifyAll sends payloads in one statement, so in one transaction, whose
// notifications Postgres delivers together and in order.
func (n *Notifier) notifyAll(ctx context.Context, payloads []string) error {
	if len(payloads) == 0 {
		return nil
	}
	if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", n.cfg.Channel, payloads); err != nil {
		return fmt.Errorf("pgnotify: notify: %w", err)
	}
	return nil
}

var _ yaps.BatchPublisher = (*Notifier)(nil)

// PublishBatch implements yaps.BatchPublisher: the notices go in one
// statement, so one round trip and one transaction, in order, packed into
// as few payloads as the limit allows (see the package comment); identical
// notices go once. An awareness update too large for one payload goes in
// parts (see Parts) at its place in the order. A notice that cannot be
// sent (over the payload limit) is left out and reported in the error; the
// others are still sent. While no other Notifier listens it sends nothing
// and returns nil (see Presence).
func (n *Notifier) PublishBatch(ctx context.Context, notices []yaps.Notice) error {
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	if n.skip(notices...) {
		return nil
	}
	var payloads []string
	items := make([][]byte, 0, len(notices)) // not yet packed into payloads
	seen := make(map[string]bool, len(notices))
	var errs []error
	for _, notice := range notices {
		item, split, err := n.encodeItem(notice)
		if err != nil {
			errs = append(errs, err)
		}
		if split {
			// Keyed apart from items, which start with '{'.
			key := "\x00" + notice.ListRef + "\x00" + string(notice.Payload)
			if seen[key] {
				continue
			}
			seen[key] = true
			if parts := n.split(notice); len(parts) > 0 {
				payloads = append(payloads, n.pack(items)...)
				payloads = append(payloads, parts...)
				items = items[:0]
			}
			continue
		}
		if item == nil || seen[string(item)] {
			continue
		}
		seen[string(item)] = true
		items = append(items, item)
	}
	payloads = append(payloads, n.pack(items)...)
	if err := n.notifyAll(ctx, payloads); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

var _ yaps.ConfirmingPublisher = (*Notifier)(nil)

// ErrUnconfirmed is returned by PublishConfirmed when it cannot tell
// whether every other process handled the notice: some did not ack it in
// time, or the peers could not be listed.
var ErrUnconfirmed = errors.New("pgnotify: not every process confirmed the notice")

// PublishConfirmed implements yaps.ConfirmingPublisher. It lists the other
// Notifiers listening on the channel (their connections in
// pg_stat_activity, see Presence), publishes notice with a fresh nonce,
// and returns nil once each of them has acked it: a listener acks a notice
// that carries a nonce after its Listen callbacks returned, with a
// notification of its own. With no other listener it sends nothing and
// returns nil. It returns ErrUnconfirmed (wrapping ctx's error) when ctx
// ends first, and ErrUnconfirmed at once when the peers cannot be listed
// or one of them is a Notifier from before presence, which cannot ack (the
// notice is then still published): a process that does not ack (one from
// before acks, or one that hangs) makes the caller wait for ctx.
func (n *Notifier) PublishConfirmed(ctx context.Context, notice yaps.Notice) error {
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	peers, legacy, own, err := n.listeners(ctx)
	listed := err == nil && own && legacy == 0 // a Notifier from before acks never acks
	if listed && len(peers) == 0 {
		return nil
	}
	item, split, err := n.encodeItem(notice)
	if split {
		return errors.New("pgnotify: an awareness update too large for one payload cannot be confirmed")
	}
	if err != nil || item == nil {
		return err
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	nonce := hex.EncodeToString(raw[:])
	w := &ackWaiter{pending: map[string]bool{}, done: make(chan struct{})}
	for _, id := range peers {
		w.pending[id] = true
	}
	n.amu.Lock()
	n.waiters[nonce] = w
	n.amu.Unlock()
	defer func() {
		n.amu.Lock()
		delete(n.waiters, nonce)
		n.amu.Unlock()
	}()
	payload := n.own + `,"c":"` + nonce + `",` + string(item[1:])
	if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, $2)", n.cfg.Channel, payload); err != nil {
		return fmt.Errorf("pgnotify: notify: %w", err)
	}
	if !listed {
		return ErrUnconfirmed
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnconfirmed, ctx.Err())
	case <-n.ctx.Done():
		return ErrClosed
	}
}

// listeners reads the channel's listening connections from
// pg_stat_activity: the other Notifiers' ids (from their application_name),
// how many Notifiers from before presence listen (their names carry no
// channel tag, so they may be on this channel), and whether the view shows
// this Notifier its own connection (it does not to a role without the
// right to see others' sessions, which then learns nothing from it).
func (n *Notifier) listeners(ctx context.Context) (ids []string, legacy int, own bool, err error) {
	rows, err := n.pool.Query(ctx, `SELECT application_name FROM pg_stat_activity
		WHERE datname = current_database() AND (application_name LIKE $1
			OR application_name ~ '^yaps-pgnotify-[0-9a-f]{16}$')`,
		"yaps-pgnotify-%-"+shortHash(n.cfg.Channel))
	if err != nil {
		return nil, 0, false, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, 0, false, err
	}
	for _, name := range names {
		id := strings.TrimPrefix(name, "yaps-pgnotify-")
		switch {
		case name == n.appName:
			own = true
		case len(id) > 16 && id[16] == '-':
			ids = append(ids, id[:16])
		default: // from before presence
			legacy++
		}
	}
	return ids, legacy, own, nil
}

// ack tells the publisher of the notice with nonce that it was handled.
func (n *Notifier) ack(nonce string) {
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, $2)", n.cfg.Channel, n.own+`,"ack":"`+nonce+`"}`); err != nil {
		n.cfg.Logger.Debug("pgnotify: ack failed", "channel", n.cfg.Channel, "err", err)
	}
}

// acked records that peer handled the notice with nonce.
func (n *Notifier) acked(nonce, peer string) {
	n.amu.Lock()
	defer n.amu.Unlock()
	w := n.waiters[nonce]
	if w == nil || !w.pending[peer] {
		return
	}
	delete(w.pending, peer)
	if len(w.pending) == 0 {
		close(w.done)
	}
}

// pack returns the payloads that carry items (encodeItem's output), in
// order: consecutive items share a packed payload while it stays within
// the limit; an item alone goes in the single-notice form.
func (n *Notifier) pack(items [][]byte) []string {
	head := n.own + `,"b":[`
	var payloads []string
	for len(items) > 0 {
		size, k := len(head)+len(items[0])+2, 1 // 2: "]}"
		for k < len(items) && size+1+len(items[k]) <= maxPayload {
			size += 1 + len(items[k])
			k++
		}
		if k == 1 {
			payloads = append(payloads, n.single(items[0]))
		} else {
			var b strings.Builder
			b.Grow(size)
			b.WriteString(head)
			for i, item := range items[:k] {
				if i > 0 {
					b.WriteByte(',')
				}
				b.Write(item)
			}
			b.WriteString("]}")
			payloads = append(payloads, b.String())
		}
		items = items[k:]
	}
	return payloads
}

// single returns the single-notice payload of item (encodeItem's output):
// the item with this Notifier's sender first.
func (n *Notifier) single(item []byte) string { return n.own + "," + string(item[1:]) }

// localOnly reports whether notices of kind k are a Notifier's own, never
// sent or received.
func localOnly(k yaps.NoticeKind) bool { return k == yaps.NoticeResync || k == yaps.NoticeLost }

// encodeItem returns notice as a JSON object without its sender; nil for a
// notice that is not sent (local only); split for an awareness update too
// large for one payload, which goes in parts (see split); or an error for
// any other notice that could not travel alone.
func (n *Notifier) encodeItem(notice yaps.Notice) (item []byte, split bool, err error) {
	if localOnly(notice.Kind) {
		return nil, false, nil
	}
	if notice.Kind == yaps.NoticeAwareness && len(notice.Payload) > MaxAwarenessPayload {
		return nil, true, nil
	}
	b, err := json.Marshal(wire{K: notice.Kind, R: notice.ListRef, Q: notice.Seq, P: notice.PermissionID, A: notice.Payload})
	if err != nil {
		return nil, false, fmt.Errorf("pgnotify: %w", err)
	}
	if size := len(n.own) + len(b); size > maxPayload {
		if notice.Kind == yaps.NoticeAwareness {
			return nil, true, nil // a long list ref
		}
		return nil, false, fmt.Errorf("pgnotify: notice of %d bytes exceeds the NOTIFY limit", size)
	}
	return b, false, nil
}

// Listen calls fn for every notice of another process until ctx is done
// (it then returns ctx.Err()) or the Notifier is closed (ErrClosed). Every
// Listen call receives every notice; fn runs on the Notifier's listening
// goroutine, so it must not block for long. Notices that arrive while no
// Listen call is registered are dropped.
func (n *Notifier) Listen(ctx context.Context, fn func(yaps.Notice)) error {
	n.mu.Lock()
	id := n.next
	n.next++
	n.subs[id] = fn
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.subs, id)
		n.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-n.ctx.Done():
		return ErrClosed
	}
}

// deliver passes notices, in order, to every Listen call.
func (n *Notifier) deliver(notices ...yaps.Notice) {
	n.mu.Lock()
	fns := make([]func(yaps.Notice), 0, len(n.subs))
	for _, fn := range n.subs {
		fns = append(fns, fn)
	}
	n.mu.Unlock()
	for _, notice := range notices {
		for _, fn := range fns {
			fn(notice)
		}
	}
}

// handle decodes a notification payload and delivers it unless it is this
// Notifier's own.
func (n *Notifier) handle(payload string) {
	if strings.HasPrefix(payload, n.own) {
		return // our own
	}
	var w wire
	err := json.Unmarshal([]byte(payload), &w)
	if err == nil && w.S != "" && w.S != n.id {
		n.heard()
	}
	if err == nil && w.Ack != "" {
		n.acked(w.Ack, w.S)
		return
	}
	if err == nil && w.H != 0 {
		return
	}
	if err == nil && (w.M != 0 || w.N != 0) {
		if w.S == n.id {
			return
		}
		if notice, ok := n.parts.add(&w); ok {
			n.deliver(notice)
		}
		return
	}
	if err != nil || (w.K == 0) == (len(w.B) == 0) {
		n.cfg.Logger.Debug("pgnotify: undecodable notification ignored", "channel", n.cfg.Channel, "err", err)
		return
	}
	if w.S == n.id {
		return
	}
	if len(w.B) == 0 {
		w.B = []wire{w}
	}
	notices := make([]yaps.Notice, 0, len(w.B))
	for _, x := range w.B {
		if x.K != 0 && !localOnly(x.K) {
			notices = append(notices, yaps.Notice{Kind: x.K, Sender: w.S, ListRef: x.R, Seq: x.Q, PermissionID: x.P, Payload: x.A})
		}
	}
	n.deliver(notices...)
	if w.C != "" {
		// Handled (deliver returned): say so, off the listening goroutine.
		go n.ack(w.C)
	}
}

// connect opens the listening connection and issues LISTEN.
func (n *Notifier) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, n.connCfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("pgnotify: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.cfg.Channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("pgnotify: listen: %w", err)
	}
	return conn, nil
}

// run waits for notifications on conn, reconnecting when it fails, until
// Close.
func (n *Notifier) run(conn *pgx.Conn) {
	defer close(n.done)
	backoff := 100 * time.Millisecond
	for {
		lctx, lcancel := context.WithCancelCause(n.ctx)
		n.lmu.Lock()
		n.lgen++
		n.lcancel = lcancel
		n.lmu.Unlock()
		err := n.wait(lctx, conn)
		lcancel(nil)
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
		if n.ctx.Err() != nil {
			return
		}
		// Publishers stop waiting for this process's acks now (it is no
		// longer listed as listening): the Service must stop trusting what
		// it cached until the NoticeResync below.
		n.deliver(yaps.Notice{Kind: yaps.NoticeLost})
		n.cfg.Logger.Warn("pgnotify: listening connection lost; reconnecting", "channel", n.cfg.Channel, "err", err)
		for {
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(backoff):
			}
			conn, err = n.connect(n.ctx)
			if err == nil {
				break
			}
			if n.ctx.Err() != nil {
				return
			}
			backoff = min(backoff*2, n.cfg.MaxBackoff)
			n.cfg.Logger.Warn("pgnotify: reconnecting failed", "channel", n.cfg.Channel, "err", err, "retry_in", backoff)
		}
		backoff = 100 * time.Millisecond
		n.cfg.Logger.Info("pgnotify: listening again", "channel", n.cfg.Channel)
		n.hello(n.ctx) // the others may have stopped publishing meanwhile
		n.deliver(yaps.Notice{Kind: yaps.NoticeResync})
	}
}

// wait delivers notifications from conn until it fails, lctx is cancelled
// (checkPeers found the connection gone) or Close.
func (n *Notifier) wait(lctx context.Context, conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(lctx, n.cfg.PingInterval)
		note, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			if n.ctx.Err() != nil {
				return n.ctx.Err()
			}
			if lctx.Err() != nil {
				return context.Cause(lctx)
			}
			if !pgconn.Timeout(err) {
				return err
			}
			pctx, cancel := context.WithTimeout(lctx, 5*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
			continue
		}
		n.handle(note.Payload)
	}
}

// skip reports whether notices go unsent because no other Notifier
// listens; it then keeps them for ReplayWindow (see Presence).
func (n *Notifier) skip(notices ...yaps.Notice) bool {
	if n.peers.Load() {
		return false
	}
	n.pmu.Lock()
	defer n.pmu.Unlock()
	if n.peers.Load() { // a peer appeared meanwhile
		return false
	}
	now := time.Now()
	n.pruneLocked(now)
	for _, x := range notices {
		if x.Kind != yaps.NoticeAwareness && !localOnly(x.Kind) {
			n.skipped = append(n.skipped, skippedNotice{at: now, notice: x})
		}
	}
	if extra := len(n.skipped) - maxSkipped; extra > 0 {
		n.skipped = slices.Delete(n.skipped, 0, extra)
	}
	n.unsent.Add(int64(len(notices)))
	return true
}

// pruneLocked drops the kept notices older than ReplayWindow.
func (n *Notifier) pruneLocked(now time.Time) {
	i := 0
	for i < len(n.skipped) && now.Sub(n.skipped[i].at) > ReplayWindow {
		i++
	}
	n.skipped = slices.Delete(n.skipped, 0, i)
}

// heard records that another Notifier listens on the channel.
func (n *Notifier) heard() {
	n.pmu.Lock()
	n.heardN++
	replay := n.setPeersLocked(true)
	n.pmu.Unlock()
	n.replay(replay)
}

// setPeersLocked records whether another Notifier may listen. When one
// appears it returns the notices kept for ReplayWindow, to be sent.
func (n *Notifier) setPeersLocked(present bool) []yaps.Notice {
	if present == n.peers.Load() {
		return nil
	}
	n.peers.Store(present)
	if !present {
		return nil
	}
	n.pruneLocked(time.Now())
	replay := make([]yaps.Notice, len(n.skipped))
	for i, s := range n.skipped {
		replay[i] = s.notice
	}
	n.skipped = nil
	return replay
}

// replay sends the notices skipped before a peer appeared.
func (n *Notifier) replay(notices []yaps.Notice) {
	if len(notices) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	if err := n.PublishBatch(ctx, notices); err != nil {
		n.cfg.Logger.Debug("pgnotify: replaying skipped notices failed", "channel", n.cfg.Channel, "err", err)
	}
}

// checkPeers asks pg_stat_activity whether another Notifier listens on the
// channel and records the answer; a "no" does not count if a peer was
// heard while it asked.
func (n *Notifier) checkPeers(ctx context.Context) {
	n.pmu.Lock()
	before := n.heardN
	n.pmu.Unlock()
	n.lmu.Lock()
	gen := n.lgen
	n.lmu.Unlock()
	ids, legacy, own, err := n.listeners(ctx)
	switch {
	case err != nil:
	case own:
		n.ownSeen.Store(true)
	case n.ownSeen.Load():
		// The view showed the listening connection before (the role may
		// see it) and does not now, though it was open before the query:
		// its backend is gone and the socket half-open. Publishers no
		// longer wait for this process's acks, so it must stop trusting
		// its caches now (NoticeLost), not after PingInterval.
		n.lmu.Lock()
		if n.lgen == gen && n.lcancel != nil {
			n.lcancel(errNotListed)
		}
		n.lmu.Unlock()
	}
	present := err != nil || !own || len(ids)+legacy > 0
	n.pmu.Lock()
	var replay []yaps.Notice
	if present || n.heardN == before {
		replay = n.setPeersLocked(present)
	}
	n.pmu.Unlock()
	n.replay(replay)
}

// hello announces this Notifier on the channel (see Presence).
func (n *Notifier) hello(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, $2)", n.cfg.Channel, n.own+`,"h":1}`); err != nil {
		n.cfg.Logger.Debug("pgnotify: hello failed", "channel", n.cfg.Channel, "err", err)
	}
}

// presenceLoop runs checkPeers every PeerCheckInterval until Close.
func (n *Notifier) presenceLoop() {
	defer n.loops.Done()
	t := time.NewTicker(n.cfg.PeerCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
			n.checkPeers(ctx)
			cancel()
		}
	}
}
