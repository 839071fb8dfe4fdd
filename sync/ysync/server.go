package ysync

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/olahol/melody"

	"github.com/yaps-dev/yaps/internal/rawnet"
	"github.com/yaps-dev/yaps/yaps"
)

// backend is the part of *yaps.Service the endpoint uses. It exists so the
// relay logic can be tested against a fake as well as the real service.
type backend interface {
	Authenticate(ctx context.Context, ref, code string) (*yaps.Actor, error)
	// AuthenticateFresh is Authenticate without the service's cache (see
	// conn.confirm).
	AuthenticateFresh(ctx context.Context, ref, code string) (*yaps.Actor, error)
	CanWrite(a *yaps.Actor) bool
	StateVector(ctx context.Context, ref string) ([]byte, error)
	Holds(ctx context.Context, ref string, update []byte) (bool, error)
	// ClaimClientIDs claims the Yjs client IDs a connection that may write
	// announces in awareness for its code (see applyAwareness).
	ClaimClientIDs(ctx context.Context, a *yaps.Actor, ids []uint64) error
	EncodeState(ctx context.Context, ref string, stateVector []byte) ([]byte, error)
	ApplyUpdates(ctx context.Context, ref string, ups []yaps.ClientUpdate) []error
	Subscribe(fn func(yaps.Event)) (unsubscribe func())
	// Pin keeps a list's document loaded (and, with several processes,
	// polled for their writes) while its room exists.
	Pin(ref string) (unpin func())
	PublishAwareness(ctx context.Context, ref string, payload []byte) error
	Limit(ctx context.Context, group yaps.LimitGroup, ip string, acct *yaps.Account, a *yaps.Actor) (yaps.LimitResult, error)
	RequestAccount(ctx context.Context, authorization, xAccountKey string) (*yaps.Account, error)
}

// Broadcaster carries awareness between server processes sharing a
// database. Nothing else needs it: document updates, revocations and list
// changes of other processes reach this one as service events (the
// service's Notifier, or its poller). The default sends awareness through
// the service too (Service.PublishAwareness / yaps.EventAwareness), which
// crosses processes when the service has a Notifier (store/pgnotify) and
// stays in this process otherwise.
type Broadcaster interface {
	// PublishAwareness hands accepted awareness entries of list ref to
	// the other processes, as bytes only the other processes' Servers
	// read: the entries (an awareness update, at most 4 KiB of them unless
	// one state is larger) with the code of the connection that sent them,
	// so no process lets another code take the clients' IDs. The single
	// byte 0 asks the processes that have the room to publish their
	// connections' states (sent when a process opens a room, so its first
	// clients see everyone at once). It must not block; delivery is best
	// effort (clients renew their state every 15 s).
	PublishAwareness(ref string, update []byte)
	// SubscribeAwareness registers fn for what other processes published,
	// as they published it (never for this process's own).
	SubscribeAwareness(fn func(ref string, update []byte)) (unsubscribe func())
}

// serviceBroadcaster is the default Broadcaster: the service's notices.
type serviceBroadcaster struct {
	svc backend
	log *slog.Logger
}

func (b serviceBroadcaster) PublishAwareness(ref string, update []byte) {
	if err := b.svc.PublishAwareness(context.Background(), ref, update); err != nil {
		b.log.Debug("sync: awareness not published to other processes", "list", ref, "err", err)
	}
}

func (b serviceBroadcaster) SubscribeAwareness(fn func(ref string, update []byte)) func() {
	return b.svc.Subscribe(func(ev yaps.Event) {
		if ev.Kind == yaps.EventAwareness {
			fn(ev.ListRef, ev.Update)
		}
	})
}

// Server is the sync endpoint. Create it with New, serve it with Handler or
// Mount, stop it with Close.
type Server struct {
	svc    backend
	cfg    Config
	log    *slog.Logger
	m      *melody.Melody
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	unsubs []func()

	mu     sync.RWMutex
	rooms  map[string]*room
	byPerm map[string]map[*conn]struct{} // permission id -> its connections
	nconns int                           // admitted, including not yet upgraded
	perIP  map[string]int                // admitted per address key (MaxConnsPerIPTotal)
	// unfinished counts the bytes of unfinished messages per address key
	// (MaxUnfinishedBytesPerIP).
	unfinished *unfinishedBudget
	closed     bool
	wg         sync.WaitGroup // admitted connections until their handler is done
	bg         sync.WaitGroup // apply workers and re-checks, which call the service

	// step2Slots holds a token per connection whose read limit is raised
	// for a large sync step 2 (step2.go); nil when SyncStep2Slots is
	// negative.
	step2Slots  chan struct{}
	maxSyncTime time.Duration // maxSyncTime; tests shorten it

	// gathers counts the waits of busy rooms for their writers (for tests).
	gathers atomic.Int64
	// directWrites counts relays written at once (conn.relay), restsKept
	// those the socket took only part of (conn.queued); for tests.
	directWrites, restsKept atomic.Int64

	// awFramesBuilt counts the full awareness frames built (for tests).
	awFramesBuilt atomic.Int64
}

const connKey = "ysync.conn"

// New returns a sync endpoint backed by svc.
func New(svc *yaps.Service, cfg Config) (*Server, error) {
	if svc == nil {
		return nil, errors.New("ysync: nil service")
	}
	return newServer(svc, cfg)
}

func newServer(svc backend, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.AllowedOrigins, _ = yaps.CanonicalOrigins(cfg.AllowedOrigins) // validated above
	if cfg.Broadcaster == nil {
		cfg.Broadcaster = serviceBroadcaster{svc: svc, log: cfg.Logger}
	}
	s := &Server{
		svc:    svc,
		cfg:    cfg,
		log:    cfg.Logger.With("component", "sync"),
		rooms:  map[string]*room{},
		byPerm: map[string]map[*conn]struct{}{},
		perIP:  map[string]int{},

		unfinished: &unfinishedBudget{limit: cfg.MaxUnfinishedBytesPerIP, held: map[string]int64{}},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if cfg.SyncStep2Slots > 0 {
		s.step2Slots = make(chan struct{}, cfg.SyncStep2Slots)
	}
	s.maxSyncTime = maxSyncTime

	m := melody.New()
	m.Config.MaxMessageSize = cfg.MaxMessageSize
	m.Config.PingPeriod = cfg.PingPeriod
	m.Config.PongWait = cfg.PongWait
	m.Config.WriteWait = cfg.WriteWait
	// Room for the close frame on top of a full queue: conn.send refuses
	// data frames past SendQueueMessages, so Melody's buffer can never
	// overflow and drop a frame silently.
	m.Config.MessageBufferSize = cfg.SendQueueMessages + 4
	m.Upgrader = &websocket.Upgrader{
		// Frames larger than the buffer are read through it in pieces; a
		// small buffer keeps idle connections cheap.
		ReadBufferSize: 1024,
		// Write buffers come from a pool and are held only while a frame is
		// written, so idle connections cost no write buffer.
		WriteBufferSize:  4096,
		WriteBufferPool:  &sync.Pool{},
		HandshakeTimeout: cfg.WriteWait,
		// ServeHTTP has already checked the origin and answered refusals in
		// the documented error format.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	m.HandleConnect(s.onConnect)
	m.HandleDisconnect(s.onDisconnect)
	m.HandleMessageBinary(func(ms *melody.Session, msg []byte) {
		if c := connOf(ms); c != nil {
			c.handle(msg)
		}
	})
	m.HandleMessage(func(ms *melody.Session, _ []byte) {
		if c := connOf(ms); c != nil {
			c.endSync()
			c.closeWith(websocket.CloseUnsupportedData, "binary frames only")
		}
	})
	m.HandlePong(func(ms *melody.Session) {
		if c := connOf(ms); c != nil {
			if !c.allowOrClose() { // unsolicited pongs count as messages
				return
			}
			c.syncPong()
		}
	})
	m.HandleSentMessageBinary(func(ms *melody.Session, msg []byte) {
		if c := connOf(ms); c != nil {
			c.sent(len(msg))
			c.awarenessSent(msg)
		}
	})
	m.HandleError(func(ms *melody.Session, err error) {
		c := connOf(ms)
		if c == nil {
			return
		}
		if errors.Is(err, websocket.ErrReadLimit) {
			// Gorilla sent 1009 and the read loop ends; the socket is
			// drained before it is closed (onDisconnect).
			c.readLimitHit.Store(true)
		}
		if errors.Is(err, websocket.ErrCloseSent) && !c.closing.Load() {
			// From the write pump, which closes the session next: gorilla
			// sent a close frame itself (conn.keepOpenOnClose).
			c.gorillaClosed.Store(true)
		}
		if errors.Is(err, melody.ErrMessageBufferFull) {
			// Cannot happen while conn.send keeps its bound; if it ever
			// does, a frame was lost, so the connection must not go on.
			s.log.Error("sync: send buffer overflow", "list", c.room.ref)
			c.kill()
		}
	})
	s.m = m

	s.unsubs = append(s.unsubs,
		svc.Subscribe(s.onEvent),
		s.cfg.Broadcaster.SubscribeAwareness(s.onRemoteAwareness),
	)
	return s, nil
}

func connOf(ms *melody.Session) *conn {
	v, ok := ms.Get(connKey)
	if !ok {
		return nil
	}
	c, _ := v.(*conn)
	return c
}

// Handler returns the endpoint as an http.Handler. The list ref is taken
// from the {ref} path value when the mux sets one, else from a path that
// ends in /lists/{ref}/sync.
func (s *Server) Handler() http.Handler { return s }

// Mount registers GET {prefix}/lists/{ref}/sync on mux (an *http.ServeMux
// or anything with the same Handle method). An empty prefix is the
// service's (yaps.Config.Prefix); a prefix is read like that one
// (yaps.NormalizePrefix: "api/v1/" is "/api/v1"). Like httpapi.Mount, it
// panics on a prefix yaps.CheckPrefix refuses.
func (s *Server) Mount(mux interface {
	Handle(pattern string, h http.Handler)
}, prefix string) {
	if prefix == "" {
		if svc, ok := s.svc.(interface{ Prefix() string }); ok {
			prefix = svc.Prefix()
		}
	}
	prefix = yaps.NormalizePrefix(prefix)
	if err := yaps.CheckPrefix(prefix); err != nil {
		panic("ysync: " + err.Error())
	}
	mux.Handle("GET "+prefix+"/lists/{ref}/sync", s)
}

// ServeHTTP authenticates, admits and upgrades one connection. Every
// refusal happens before the upgrade, as a problem+json response.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeProblem(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "only GET upgrades to the sync protocol")
		return
	}
	if !s.originAllowed(r) {
		writeProblem(w, r, http.StatusForbidden, "forbidden", "origin not allowed")
		return
	}
	ref := r.PathValue("ref")
	if ref == "" {
		ref = refFromPath(r.URL.Path)
	}
	if ref == "" {
		writeProblem(w, r, http.StatusNotFound, "not_found", "list not found")
		return
	}
	if s.ctx.Err() != nil {
		// Closed (the host shuts down): the service calls below would
		// fail with the server's cancelled context and read as a fault.
		w.Header().Set("Retry-After", "5")
		writeServiceError(w, r, yaps.Errorf(yaps.EUNAVAILABLE, "server shutting down"))
		return
	}
	code := yaps.RequestCode(r.Header.Get("Authorization"), r.URL.Query().Get("k")) // R4: either carries it
	// Service calls use the server's context, not the request's: deriving
	// from the request context would leave allocations on it for the
	// lifetime of the socket.
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.OpTimeout)
	defer cancel()
	actor, err := s.svc.Authenticate(ctx, ref, code)
	// An account credential makes the connection authenticated (RULINGS
	// R8), as over HTTP; a bad one is refused, after the code (R3).
	var acct *yaps.Account
	var acctErr error
	if err == nil {
		acct, acctErr = s.account(r)
	}
	// Every attempt counts as a read (RULINGS R8), failed ones too, so
	// guessing refs or codes here is throttled as it is over HTTP.
	ip := s.cfg.ClientIP(r)
	lres, lerr := s.svc.Limit(ctx, yaps.LimitRead, ip, acct, actor)
	lres.SetHeaders(time.Now(), w.Header().Set) // on refusals and on the 101 alike
	if yaps.IsCode(lerr, yaps.ERATELIMITED) {
		writeServiceError(w, r, lerr)
		return
	}
	if err != nil {
		writeServiceError(w, r, err)
		return
	}
	if acctErr != nil {
		writeServiceError(w, r, acctErr)
		return
	}
	if msg := handshakeProblem(r); msg != "" {
		writeProblem(w, r, http.StatusBadRequest, "bad_request", msg)
		return
	}
	key := yaps.AddressKey(ip)
	rm, err := s.admit(ref, key)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writeServiceError(w, r, err)
		return
	}
	c := newConn(s, rm, actor, code, ip, acct)
	// Our step 1 is computed here, on the short-lived request goroutine
	// (loading a document can grow a stack a lot). Computing it before the
	// connection joins the room loses nothing: the client's own step 1 is
	// answered after it joined, with everything it lacks.
	sv, err := s.svc.StateVector(ctx, ref)
	if err != nil {
		s.release(c)
		writeServiceError(w, r, err)
		return
	}
	c.hello = AppendSyncStep1(make([]byte, 0, len(sv)+4), sv)

	// Take the socket from net/http and let this handler return, so the
	// server's per-connection read and write buffers (8 KiB), response
	// state and goroutine are freed; the socket lives on in Melody with a
	// small read buffer. This is what keeps idle connections cheap.
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.release(c)
		writeProblem(w, r, http.StatusInternalServerError, "internal_error", "cannot take over the connection")
		return
	}
	if brw.Reader.Buffered() > 0 {
		// A client may not send frames before the handshake completes.
		s.release(c)
		_ = nc.Close()
		return
	}
	c.netConn = nc
	// Frames leave through coalescingConn: those queued back to back share
	// one write. While frame k is written it still counts in queuedMsgs.
	c.reads = &readWatch{Conn: nc, timeout: s.cfg.MessageReadTimeout, budget: s.unfinished, key: key}
	out := &coalescingConn{Conn: c.reads, more: func() bool { return c.queuedMsgs.Load() > 1 }, keepOpen: c.keepOpenOnClose,
		restWait: s.cfg.WriteWait, restQueued: c.queued, restSent: c.sent}
	// Only a plain socket: a wrapper (TLS, a proxy protocol, accounting)
	// must see every byte through its Write. A socket internal/rawnet
	// wrapped (yaps serve's) is plain: it only reads and writes raw too.
	switch plain := rawnet.Plain(nc).(type) {
	case *net.TCPConn, *net.UnixConn:
		if !rawnet.Supported {
			break
		}
		if raw, err := plain.(syscall.Conn).SyscallConn(); err == nil {
			out.raw, c.reads.raw = raw, rawnet.NewReader(raw)
		}
	}
	c.out = out
	up := &upgraded{nc: out, header: w.Header().Clone()}
	req := trimRequest(r)
	go func() {
		if err := s.m.HandleRequestWithKeys(up, req, map[string]any{connKey: c}); err != nil {
			// Melody is closed or the handshake write failed: connect and
			// disconnect never ran.
			s.release(c)
			_ = nc.Close()
		}
	}()
}

// account resolves the account credential of r with Config.Accounts (by
// default the service's built-in keys), as httpapi does (see
// yaps.CheckAccount).
func (s *Server) account(r *http.Request) (*yaps.Account, error) {
	if s.cfg.Accounts != nil {
		return yaps.CheckAccount(s.cfg.Accounts(r))
	}
	return yaps.CheckAccount(s.svc.RequestAccount(r.Context(), r.Header.Get("Authorization"), r.Header.Get("X-Account-Key")))
}

// handshakeProblem checks the WebSocket handshake the way gorilla's
// upgrader will, so that nothing can fail after the socket is taken over.
func handshakeProblem(r *http.Request) string {
	if !websocket.IsWebSocketUpgrade(r) {
		return "this endpoint speaks the y-websocket protocol: send a WebSocket upgrade request"
	}
	if !headerHasToken(r.Header, "Sec-Websocket-Version", "13") {
		return "unsupported WebSocket version: 13 is required"
	}
	if r.Header.Get("Sec-Websocket-Key") == "" {
		return "the Sec-WebSocket-Key header is missing"
	}
	return ""
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// trimRequest keeps only what the upgrade reads, so the session does not
// pin the whole request (cookies, context, URL) for its lifetime.
func trimRequest(r *http.Request) *http.Request {
	h := http.Header{}
	for _, k := range []string{"Connection", "Upgrade", "Sec-Websocket-Version", "Sec-Websocket-Key"} {
		h[k] = r.Header[k]
	}
	return &http.Request{Method: r.Method, Header: h, Host: r.Host, RemoteAddr: r.RemoteAddr, URL: &url.URL{Path: r.URL.Path}}
}

// upgraded is the ResponseWriter handed to Melody for a socket already
// taken from net/http: its Hijack returns that socket with a minimal
// buffer (gorilla then allocates its own read buffer of
// Upgrader.ReadBufferSize). Write and WriteHeader are only reached by
// upgrader refusals, which handshakeProblem rules out beforehand.
type upgraded struct {
	nc     net.Conn
	header http.Header
}

func (u *upgraded) Header() http.Header         { return u.header }
func (u *upgraded) Write(p []byte) (int, error) { return len(p), nil }
func (u *upgraded) WriteHeader(int)             {}
func (u *upgraded) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return u.nc, bufio.NewReadWriter(bufio.NewReaderSize(u.nc, 16), bufio.NewWriterSize(u.nc, 16)), nil
}

// refFromPath extracts {ref} from a path ending in /lists/{ref}/sync.
func refFromPath(p string) string {
	p, ok := strings.CutSuffix(p, "/sync")
	if !ok {
		return ""
	}
	i := strings.LastIndex(p, "/lists/")
	if i < 0 {
		return ""
	}
	ref := p[i+len("/lists/"):]
	if ref == "" || strings.Contains(ref, "/") {
		return ""
	}
	return ref
}

func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser; codes, not origins, protect the API
	}
	for _, a := range s.cfg.AllowedOrigins {
		if a == "*" || strings.EqualFold(a, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// admit reserves a connection slot in ref's room for a client counted
// under ipKey (yaps.AddressKey of its address), creating the room if
// needed, or refuses with EUNAVAILABLE past a capacity cap (503), or with
// ERATELIMITED past MaxConnsPerIP.
//
// The per-address cap answers 429, not the 503 of the capacity caps: the
// server has room, it is this client that holds too many of the list's
// sockets. 429 rate_limited is the status the API already gives a client
// over its own limits (RULINGS R3); everybody else still connects, and a
// 5xx would tell clients, proxies and monitoring that the server is
// failing when it is refusing one abusive client. It carries the same
// Retry-After: 5 as the capacity caps (a slot frees when one of the
// client's sockets closes). The X-RateLimit-* headers of the answer still
// describe the read limit the attempt counted against.
func (s *Server) admit(ref, ipKey string) (*room, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, yaps.Errorf(yaps.EUNAVAILABLE, "server shutting down")
	}
	if s.nconns >= s.cfg.MaxConnsPerProcess {
		return nil, yaps.Errorf(yaps.EUNAVAILABLE, "too many sync connections on this server; retry later")
	}
	if s.perIP[ipKey] >= s.cfg.MaxConnsPerIPTotal {
		return nil, yaps.Errorf(yaps.ERATELIMITED, "too many sync connections from your address; retry later")
	}
	rm := s.rooms[ref]
	if rm == nil {
		if len(s.rooms) >= s.cfg.MaxRooms && !s.evictIdleLocked() {
			return nil, yaps.Errorf(yaps.EUNAVAILABLE, "too many open lists on this server; retry later")
		}
		rm = newRoom(s, ref)
		rm.unpin = s.svc.Pin(ref)
		s.rooms[ref] = rm
		s.askWhoIsThere(ref)
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.perIP[ipKey] >= s.cfg.MaxConnsPerIP {
		return nil, yaps.Errorf(yaps.ERATELIMITED, "too many connections to this list from your address; retry later")
	}
	if len(rm.conns)+rm.pending >= s.cfg.MaxConnsPerRoom {
		return nil, yaps.Errorf(yaps.EUNAVAILABLE, "too many connections to this list; retry later")
	}
	rm.pending++
	rm.perIP[ipKey]++
	rm.stopIdleLocked()
	s.nconns++
	s.perIP[ipKey]++
	s.wg.Add(1)
	return rm, nil
}

// evictIdleLocked unloads one room without connections. s.mu is held.
func (s *Server) evictIdleLocked() bool {
	for ref, rm := range s.rooms {
		rm.mu.Lock()
		idle := len(rm.conns) == 0 && rm.pending == 0
		if idle {
			rm.goneLocked()
			delete(s.rooms, ref)
		}
		rm.mu.Unlock()
		if idle {
			return true
		}
	}
	return false
}

// release undoes admit for a connection that never got upgraded.
func (s *Server) release(c *conn) {
	s.mu.Lock()
	s.nconns--
	releaseSlot(s.perIP, c.ipKey)
	s.mu.Unlock()
	c.room.mu.Lock()
	c.room.pending--
	releaseSlot(c.room.perIP, c.ipKey)
	c.room.maybeIdleLocked()
	c.room.mu.Unlock()
	c.cancel()
	s.wg.Done()
}

func (s *Server) onConnect(ms *melody.Session) {
	c := connOf(ms)
	if c == nil {
		return
	}
	c.sess = ms
	if c.out != nil {
		c.out.handshakeDone() // gorilla wrote its 101 response before Melody calls us
	}
	c.ws = gorillaConn(ms)
	if c.ws != nil {
		// Pings count against the message rate like any frame: each one
		// costs a pong write (set before Melody's read loop starts).
		c.ws.SetPingHandler(c.onPing)
	}
	s.mu.Lock()
	set := s.byPerm[c.permID]
	if set == nil {
		set = map[*conn]struct{}{}
		s.byPerm[c.permID] = set
	}
	set[c] = struct{}{}
	closing := s.closed
	s.mu.Unlock()
	if closing {
		// Admitted just before Close collected the connections.
		c.room.join(c)
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
		return
	}
	// Our step 1 first, so the client sends what we lack; then who is here.
	// Sent before the connection joins the room: once in it, a relayed
	// awareness update could reach the socket first.
	c.send(c.hello)
	c.hello = nil
	aw := c.room.join(c)
	if aw != nil {
		c.send(aw)
	}
	s.bg.Go(c.confirm)
}

func (s *Server) onDisconnect(ms *melody.Session) {
	c := connOf(ms)
	if c == nil {
		return
	}
	c.cancel()
	c.stopKill()
	c.endSync() // the read loop has ended: give a step 2 slot back
	// Melody's read loop has ended: the closing handshake, if any, is over
	// (conn.keepOpenOnClose left the socket open for it). After a frame
	// over the limit the rest of the client's bytes are drained first.
	if c.readLimitHit.Load() {
		c.drain()
	}
	c.kill()
	c.reads.done()
	// Updates still waiting to be applied are stored by the worker: the
	// client sent them before it went away.
	s.mu.Lock()
	if set := s.byPerm[c.permID]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(s.byPerm, c.permID)
		}
	}
	s.nconns--
	releaseSlot(s.perIP, c.ipKey)
	s.mu.Unlock()
	c.room.leave(c)
	s.wg.Done()
}

func (s *Server) room(ref string) *room {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rooms[ref]
}

// onEvent receives every service event of this process. It must not block:
// it only enqueues frames and starts background checks.
func (s *Server) onEvent(ev yaps.Event) {
	switch ev.Kind {
	case yaps.EventDocUpdate:
		rm := s.room(ev.ListRef)
		if rm == nil || len(ev.Update) == 0 {
			return
		}
		// One frame shared by every connection of the room; the updates
		// of one write leave together.
		rm.held = append(rm.held, AppendUpdate(make([]byte, 0, len(ev.Update)+8), ev.Update))
		if ev.More {
			return
		}
		frames := rm.held
		rm.held = nil
		rm.broadcastAll(frames)
	case yaps.EventCodeRevoked:
		// Also for revocations made by other processes: the service
		// reports them as events of this process.
		s.closePermission(ev.PermissionID)
	case yaps.EventListChanged:
		if rm := s.room(ev.ListRef); rm != nil {
			rm.recheck()
		}
	case yaps.EventResync:
		// The other processes' awareness may have been missed meanwhile:
		// ask again, as when the room opened, rather than wait up to 15 s
		// for their clients to renew their states.
		if s.room(ev.ListRef) != nil {
			s.askWhoIsThere(ev.ListRef)
		}
	}
}

// askWhoIsThere asks the other processes that have room ref open to
// publish their connections' states (an awareness update without
// entries, see Broadcaster).
func (s *Server) askWhoIsThere(ref string) {
	s.cfg.Broadcaster.PublishAwareness(ref, EncodeAwareness(nil))
}

// onRemoteAwareness applies what another process's connections announced.
// An update without entries asks for this process's states.
func (s *Server) onRemoteAwareness(ref string, update []byte) {
	rm := s.room(ref)
	if rm == nil {
		return
	}
	if len(update) == 1 && update[0] == 0 {
		for _, mine := range rm.localAwareness() {
			s.cfg.Broadcaster.PublishAwareness(ref, mine)
		}
		return
	}
	perm, upd, ok := decodeAwarenessNotice(update)
	if !ok {
		upd = update // from a process of an earlier version
	}
	_ = rm.applyAwareness(nil, perm, upd)
}

// closePermission closes every connection authenticated with permID.
func (s *Server) closePermission(permID string) {
	if permID == "" {
		return
	}
	s.mu.RLock()
	var victims []*conn
	for c := range s.byPerm[permID] {
		victims = append(victims, c)
	}
	s.mu.RUnlock()
	for _, c := range victims {
		c.closeWith(CloseRevoked, "permission revoked")
	}
}

// Stats is a point-in-time view of the endpoint, for metrics and tests.
type Stats struct {
	Rooms int // rooms in memory, idle ones included
	Conns int // open or opening connections
}

// Stats reports current counts.
func (s *Server) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Stats{Rooms: len(s.rooms), Conns: s.nconns}
}

// Close closes every connection with 1001 "going away", refuses new ones
// and waits (up to WriteWait plus a second) for the connections to end. The
// service is not closed.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var all []*conn
	for _, set := range s.byPerm {
		for c := range set {
			all = append(all, c)
		}
	}
	s.mu.Unlock()
	for _, u := range s.unsubs {
		u()
	}
	for _, c := range all {
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
		// Only now: Melody's hub must outlive every handler, or a late
		// unregister would block forever.
		_ = s.m.Close()
	case <-time.After(s.cfg.WriteWait + time.Second):
		s.mu.RLock()
		for _, set := range s.byPerm {
			for c := range set {
				c.kill()
			}
		}
		s.mu.RUnlock()
		err = errors.New("ysync: connections still open after shutdown timeout")
	}
	s.cancel()
	s.bg.Wait() // nothing may call the service after Close returns
	s.mu.Lock()
	for ref, rm := range s.rooms {
		rm.mu.Lock()
		rm.goneLocked()
		rm.mu.Unlock()
		delete(s.rooms, ref)
	}
	s.mu.Unlock()
	return err
}

// Errors before the upgrade: one object that is both an RFC 9457 problem
// and the variant-B error body (RULINGS R2).

type problem struct {
	Type     string      `json:"type"`
	Title    string      `json:"title"`
	Status   int         `json:"status"`
	Detail   string      `json:"detail"`
	Instance string      `json:"instance"`
	Error    problemCode `json:"error"`
}

type problemCode struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	RetryAfter *int   `json:"retryAfter,omitempty"`
}

func writeProblem(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	p := problem{
		Type:     "about:blank",
		Title:    http.StatusText(status),
		Status:   status,
		Detail:   msg,
		Instance: r.URL.EscapedPath(), // a URI reference; never the query: it carries the code
		Error:    problemCode{Code: code, Message: msg},
	}
	if ra := w.Header().Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err == nil {
			p.Error.RetryAfter = &n
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeServiceError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := http.StatusInternalServerError, "internal_error"
	switch yaps.ErrorCode(err) {
	case yaps.ENOTFOUND:
		status, code = http.StatusNotFound, "not_found"
	case yaps.EUNAUTHORIZED:
		status, code = http.StatusUnauthorized, "unauthorized"
		w.Header().Set("WWW-Authenticate", `Bearer realm="yaps"`) // RFC 9110: every 401, as the HTTP API sends
	case yaps.EFORBIDDEN:
		status, code = http.StatusForbidden, "forbidden"
	case yaps.EINVALID:
		status, code = http.StatusBadRequest, "bad_request"
	case yaps.ERATELIMITED:
		status, code = http.StatusTooManyRequests, "rate_limited"
		var e *yaps.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
		}
	case yaps.EUNAVAILABLE:
		status, code = http.StatusServiceUnavailable, "unavailable"
	}
	writeProblem(w, r, status, code, yaps.ErrorMessage(err))
}
