package ysync

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// Config tunes the sync endpoint. The zero value of every field means its
// default; WithDefaults fills them in and New validates the result.
//
// Melody's own defaults (512-byte messages, silent drops on a full send
// buffer, origin check disabled) are unsafe for y-websocket; every one of
// them is set from here.
type Config struct {
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may open a socket. A request without an Origin header (non-browser
	// clients) is always allowed, and so is an Origin whose host equals the
	// request's Host (same host). "*" allows every origin. Entries are
	// compared in their canonical form (yaps.CanonicalOrigin); one that is
	// not an origin is a configuration error.
	// Default: none beyond same host.
	AllowedOrigins []string

	// MaxMessageSize is the largest frame a client may send, in bytes;
	// larger frames close the connection with 1009. Default: 1 MiB.
	MaxMessageSize int64
	// MessageReadTimeout is how long a client may take to send one
	// message, from its first byte to its last. A message is held in
	// memory until it is complete, so one left unfinished (while the
	// client answers pings) would hold its buffer for good; past the
	// timeout the connection is cut (see unfinished.go). Default: 60s
	// (1 MiB at 17 KB/s).
	MessageReadTimeout time.Duration
	// MaxUnfinishedBytesPerIP caps the bytes of messages that one client
	// address (the key of MaxConnsPerIP) has begun but not finished
	// sending, across all its connections, counted in steps of 64 KiB; a
	// connection whose message would take its address past it is cut.
	// Without it, an address could hold MaxConnsPerIPTotal buffers of
	// MaxMessageSize. At least MaxSyncStep2Size and MaxMessageSize.
	// Default: 32 MiB.
	MaxUnfinishedBytesPerIP int64
	// MaxSyncStep2Size is the largest sync step 2 a client that may write
	// can send while it syncs after connecting (see step2.go): a client
	// that edited offline sends all of those edits in that one frame, and
	// closing it with 1009 would make it retry the same frame forever.
	// Only a connection holding one of SyncStep2Slots gets it. At most
	// half of SendQueueBytes (the frame is relayed to every peer). Default:
	// half of SendQueueBytes (8 MiB), or yaps.DefaultMaxDocBytes if less;
	// at most MaxMessageSize turns it off.
	MaxSyncStep2Size int64
	// SyncStep2Slots caps the step 2s over MaxMessageSize this process
	// reads or holds at once: a connection takes a slot at its step 1 and
	// gives it back when its sync ends without a large frame, or once its
	// large frame was applied. Each may take about twice MaxSyncStep2Size
	// of memory while it is read, so this bounds that memory. A connection
	// that finds every slot taken has MaxMessageSize for its step 2 too (a
	// larger one is closed with 1009 and its client retries). Default: 4;
	// negative: none.
	SyncStep2Slots int

	// MaxRooms caps the rooms (lists with a live or idle room) held by this
	// process. Idle rooms are evicted first; past the cap a new list's
	// connection is refused with 503. Default: 10,000.
	MaxRooms int
	// MaxConnsPerProcess caps open sync connections in this process; past
	// it connections are refused with 503. Default: 20,000.
	MaxConnsPerProcess int
	// MaxConnsPerRoom caps connections to one list. Default: 1,000.
	MaxConnsPerRoom int
	// MaxConnsPerIP caps the connections to one list from one client
	// address, so that one client cannot take every slot of
	// MaxConnsPerRoom and lock the list's other users out. It is counted
	// per room (and per process) under yaps.AddressKey of the address
	// ClientIP returns, the key the rate limits count addresses by (an
	// IPv6 address by its /64, an IPv4 one in full, an IPv4 client behind
	// NAT64 or Teredo as itself). It is not a cap per code: one code is
	// legitimately shared by many people (a public viewer link). Past it
	// the connection is refused with 429 rate_limited and Retry-After: 5
	// (a limit on this client, not a lack of server capacity). Behind a
	// reverse proxy, ClientIP must name the real client, or every client
	// counts as the proxy's address. Default: 64.
	MaxConnsPerIP int
	// MaxConnsPerIPTotal caps the connections from one client address
	// (the same key as MaxConnsPerIP) across all lists of the process, so
	// that one client spreading over many lists cannot take every slot of
	// MaxConnsPerProcess. Past it the connection is refused with 429
	// rate_limited and Retry-After: 5. Default: 1,000.
	MaxConnsPerIPTotal int

	// IdleUnload is how long a room with no connections stays in memory
	// (so a quick reconnect finds its awareness states). Default: 30s.
	IdleUnload time.Duration

	// PingPeriod is how often the server pings each client. Default: 25s.
	PingPeriod time.Duration
	// PongWait is how long the server waits for any pong before it
	// closes a dead peer; must exceed PingPeriod. Default: 60s.
	PongWait time.Duration
	// WriteWait bounds each socket write; a peer that does not take a frame
	// within it is disconnected. It also bounds how long a connection that
	// is being closed may keep draining. Default: 10s.
	WriteWait time.Duration

	// SendQueueMessages is the number of frames that may wait to be written
	// to one connection. A connection whose queue is full is disconnected
	// (close 4508) instead of having frames dropped: a y-websocket client
	// that missed an update would silently diverge, one that reconnects
	// resyncs. Default: 256.
	SendQueueMessages int
	// SendQueueBytes bounds the bytes waiting for one connection the same
	// way (frames are shared between connections, so this is a bound, not
	// an allocation). A single frame larger than this still goes out when
	// nothing else waits. Default: 16 MiB.
	SendQueueBytes int64
	// SendQueueWait is how long a room's next batch of client updates
	// waits for every connection of the room to have room in its send
	// queue for the batch's frames. A burst then slows the room's writers
	// (their read loops block, and TCP pushes back on their clients)
	// instead of closing healthy clients whose frames the server has not
	// had the time to write. A connection still full after the wait is
	// closed as slow (4508) and the batch goes on. Frames that do not come
	// from this process's clients (HTTP writes, other processes) never
	// wait. Default: 2s.
	SendQueueWait time.Duration
	// BatchWait is how long the worker of a busy room may hold its next
	// batch of client updates for the room's other recent writers, so that
	// clients writing at once are stored and relayed in one batch (one
	// store write, one socket write per connection) instead of one each
	// (see writers in conn.go). Only a busy room waits, one whose previous
	// batch was applied within 4 BatchWaits (at least 10 ms), and only for
	// connections that wrote in its last two batches: a lone writer, or
	// people typing, never wait. It adds at most this much latency to an
	// update. Default: 5ms (1ms left a third of the batches of the sync
	// benchmark's 50×4 rooms split in two, see docs/benchmarks.md);
	// negative: never wait; at most 1s.
	BatchWait time.Duration

	// MessagesPerSecond and MessageBurst rate-limit the frames one
	// connection may send (token bucket); a flood closes it with 4529.
	// Defaults: 500 per second, burst 2,000. A negative MessagesPerSecond
	// switches the limit off (benchmarks).
	MessagesPerSecond float64
	MessageBurst      int

	// RefusedWritesPerMinute caps the writes of one connection the service
	// may refuse (EFORBIDDEN: an agent deleting outside its scope, a write
	// under another code's client ID) per minute, with as many at once;
	// past it the connection is closed with 4529. A refusal found after
	// the update was applied costs the server a reload of the document, so
	// a client sending refused writes in a loop would otherwise cost far
	// more CPU than its messages. A y-websocket client sends a change once
	// (and again in the step 2 of a reconnect), so an honest one stays far
	// below. Default: 10; negative switches the limit off.
	RefusedWritesPerMinute int

	// MaxAwarenessEntries caps the entries in one awareness message; a
	// message with more is malformed (4400). It must be at least
	// MaxAwarenessStates: a y-websocket client sends back every state it
	// applies, so a joiner's first awareness message holds all of the
	// room's states, and a lower cap would close every joiner of a busy
	// room for good. Default: MaxAwarenessStates + MaxAwarenessIDsPerConn.
	MaxAwarenessEntries int
	// MaxAwarenessStateBytes caps one client's awareness state JSON.
	// Default: 64 KiB.
	MaxAwarenessStateBytes int
	// MaxAwarenessStates caps the awareness states one room keeps; states
	// past it are dropped. Default: 4,096.
	MaxAwarenessStates int
	// MaxAwarenessRoomBytes caps the total size of the awareness states
	// (their JSON) one room keeps. Every joiner is sent the whole table in
	// one frame, so this also bounds that frame. A client's awareness
	// message that would take the room past it is refused like an
	// oversized state (close 4400 "bad awareness update"); states relayed
	// from other processes past it are dropped. The same holds for a room
	// whose states, sent back by a client as one awareness message, would
	// not fit in MaxMessageSize (25 bytes per state beside its JSON). Must
	// be at least MaxAwarenessStateBytes. Default: 1 MiB.
	MaxAwarenessRoomBytes int
	// MaxAwarenessIDsPerConn caps the awareness client IDs one connection
	// may control (one per Y.Doc it syncs, normally one). Default: 32.
	MaxAwarenessIDsPerConn int
	// AwarenessTimeout is how long a state relayed from another process
	// stays without renewal. Clients renew theirs every 15 s; one that is
	// not renewed belongs to a process that died without removing it, and
	// is then no longer given to joiners (clients drop it on their own
	// after the same time, y-protocols' outdatedTimeout). It is also how
	// long an awareness ID stays with its code after its connection left,
	// so only that code's reconnect takes it back. Default: 30s.
	AwarenessTimeout time.Duration

	// CloseTimeout is how long, after the server sent its close frame, it
	// keeps reading (and discarding) the client's frames while it waits
	// for the client's close frame, before it closes the socket. Closing
	// with the client's frames unread would make the kernel reset the
	// connection, and the client would see 1006 instead of the close code
	// (and reconnect after a final 44xx). Default: 1s.
	CloseTimeout time.Duration

	// OpTimeout bounds each service call made for a message (apply,
	// encode). A room's batch of updates gets between half of it and all
	// of it: its worker reuses one context until half is spent. Default:
	// 15s.
	OpTimeout time.Duration

	// Broadcaster carries awareness to the other server processes on the
	// same database. Default: the service (Service.PublishAwareness and
	// yaps.EventAwareness), which crosses processes when it has a
	// Notifier such as store/pgnotify. Document updates, revocations and
	// list changes never need it: the service reports those of other
	// processes as events.
	Broadcaster Broadcaster

	// ClientIP returns the client address a connection attempt is rate
	// limited by (each attempt counts against the service's read limit).
	// Behind a reverse proxy, pass the HTTP API's notion of the client IP.
	// Default: the socket peer's IP.
	ClientIP func(r *http.Request) string

	// Accounts resolves the account credential of a connection attempt,
	// like httpapi.Config.Accounts (pass the same function): (nil, nil)
	// for none, an error (preferably a *yaps.Error of kind EUNAUTHORIZED)
	// for one that is not valid, which refuses the upgrade with 401. An
	// account makes the connection authenticated for the rate limits
	// (RULINGS R8). Default: the service's built-in accounts
	// (Service.RequestAccount), the key taken from the X-Account-Key header
	// or from "Authorization: Bearer yak_...". Browsers cannot set headers
	// on a WebSocket: their connections count as the list's class.
	Accounts func(r *http.Request) (*yaps.Account, error)

	// Logger receives connection-level diagnostics; codes are never
	// logged. Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 1 << 20
	}
	def(&c.MaxRooms, 10_000)
	def(&c.MaxConnsPerProcess, 20_000)
	def(&c.MaxConnsPerRoom, 1_000)
	def(&c.MaxConnsPerIP, 64)
	def(&c.MaxConnsPerIPTotal, 1_000)
	defDur(&c.IdleUnload, 30*time.Second)
	defDur(&c.PingPeriod, 25*time.Second)
	defDur(&c.PongWait, 60*time.Second)
	defDur(&c.WriteWait, 10*time.Second)
	def(&c.SendQueueMessages, 256)
	if c.SendQueueBytes == 0 {
		c.SendQueueBytes = 16 << 20
	}
	if c.MaxSyncStep2Size == 0 {
		c.MaxSyncStep2Size = max(min(yaps.DefaultMaxDocBytes, c.SendQueueBytes/2), c.MaxMessageSize)
	}
	def(&c.SyncStep2Slots, 4)
	defDur(&c.MessageReadTimeout, 60*time.Second)
	if c.MaxUnfinishedBytesPerIP == 0 {
		c.MaxUnfinishedBytesPerIP = 32 << 20
	}
	defDur(&c.SendQueueWait, 2*time.Second)
	defDur(&c.BatchWait, 5*time.Millisecond)
	if c.MessagesPerSecond == 0 {
		c.MessagesPerSecond = 500
	}
	def(&c.MessageBurst, 2_000)
	def(&c.RefusedWritesPerMinute, 10)
	def(&c.MaxAwarenessStateBytes, 64<<10)
	def(&c.MaxAwarenessStates, 4_096)
	def(&c.MaxAwarenessRoomBytes, 1<<20)
	def(&c.MaxAwarenessIDsPerConn, 32)
	def(&c.MaxAwarenessEntries, c.MaxAwarenessStates+c.MaxAwarenessIDsPerConn)
	defDur(&c.AwarenessTimeout, 30*time.Second)
	defDur(&c.CloseTimeout, time.Second)
	defDur(&c.OpTimeout, 15*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ClientIP == nil {
		c.ClientIP = peerIP
	}
	return c
}

// maxBatchWait caps Config.BatchWait: it is latency every update of a busy
// room may pay.
const maxBatchWait = time.Second

func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (c Config) validate() error {
	switch {
	case c.MaxMessageSize < 64:
		return fmt.Errorf("ysync: MaxMessageSize %d is below 64 bytes", c.MaxMessageSize)
	case c.MaxRooms < 1, c.MaxConnsPerProcess < 1, c.MaxConnsPerRoom < 1, c.MaxConnsPerIP < 1, c.MaxConnsPerIPTotal < 1:
		return fmt.Errorf("ysync: MaxRooms, MaxConnsPerProcess, MaxConnsPerRoom, MaxConnsPerIP and MaxConnsPerIPTotal must be positive")
	case c.IdleUnload < 0:
		return fmt.Errorf("ysync: IdleUnload must not be negative")
	case c.PingPeriod <= 0 || c.PongWait <= c.PingPeriod:
		return fmt.Errorf("ysync: PongWait (%v) must exceed PingPeriod (%v)", c.PongWait, c.PingPeriod)
	case c.WriteWait <= 0 || c.OpTimeout <= 0 || c.SendQueueWait <= 0 || c.AwarenessTimeout <= 0 || c.CloseTimeout <= 0:
		return fmt.Errorf("ysync: WriteWait, OpTimeout, SendQueueWait, AwarenessTimeout and CloseTimeout must be positive")
	case c.SendQueueMessages < 8:
		return fmt.Errorf("ysync: SendQueueMessages %d is below 8 (a connect alone queues several frames)", c.SendQueueMessages)
	case c.SendQueueBytes < c.MaxMessageSize:
		return fmt.Errorf("ysync: SendQueueBytes must be at least MaxMessageSize")
	case c.MaxSyncStep2Size > c.MaxMessageSize && c.MaxSyncStep2Size > c.SendQueueBytes/2:
		return fmt.Errorf("ysync: MaxSyncStep2Size (%d) must be at most half of SendQueueBytes (%d): a relayed step 2 must fit in a send queue beside a backlog", c.MaxSyncStep2Size, c.SendQueueBytes)
	case c.BatchWait > maxBatchWait:
		return fmt.Errorf("ysync: BatchWait (%v) is over %v", c.BatchWait, maxBatchWait)
	case c.MessageReadTimeout <= 0:
		return fmt.Errorf("ysync: MessageReadTimeout must be positive")
	case c.MaxUnfinishedBytesPerIP < max(c.MaxMessageSize, c.MaxSyncStep2Size):
		return fmt.Errorf("ysync: MaxUnfinishedBytesPerIP (%d) must be at least MaxMessageSize and MaxSyncStep2Size", c.MaxUnfinishedBytesPerIP)
	case c.MessageBurst < 1:
		return fmt.Errorf("ysync: MessageBurst must be positive")
	case c.MaxAwarenessEntries < 1, c.MaxAwarenessStateBytes < 16, c.MaxAwarenessStates < 1, c.MaxAwarenessIDsPerConn < 1:
		return fmt.Errorf("ysync: awareness limits must be positive")
	case c.MaxAwarenessEntries < c.MaxAwarenessStates:
		return fmt.Errorf("ysync: MaxAwarenessEntries (%d) is below MaxAwarenessStates (%d): a client's first awareness message sends back every state of the room", c.MaxAwarenessEntries, c.MaxAwarenessStates)
	case c.MaxAwarenessRoomBytes < c.MaxAwarenessStateBytes:
		return fmt.Errorf("ysync: MaxAwarenessRoomBytes (%d) is below MaxAwarenessStateBytes (%d)", c.MaxAwarenessRoomBytes, c.MaxAwarenessStateBytes)
	}
	if _, err := yaps.CanonicalOrigins(c.AllowedOrigins); err != nil {
		return fmt.Errorf("ysync: AllowedOrigins: %w", err)
	}
	return nil
}
