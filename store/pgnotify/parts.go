package pgnotify

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// Awareness updates too large for one payload travel in parts (see the
// package comment, "Parts").

const (
	// DefaultMaxAwarenessMessageBytes is the default of
	// Config.MaxAwarenessMessageBytes.
	DefaultMaxAwarenessMessageBytes = 256 << 10
	// DefaultPartTimeout is the default of Config.PartTimeout.
	DefaultPartTimeout = 5 * time.Second

	// partsTotalFactor: a listener buffers at most this many times
	// MaxAwarenessMessageBytes of incomplete messages, all senders
	// together.
	partsTotalFactor = 4
	// partialOverhead is what an incomplete message counts against the
	// buffer caps beside its bytes, so many tiny ones are bounded too.
	partialOverhead = 256
	// minPartBytes: an awareness update whose parts would carry less than
	// this each (its list ref takes nearly the whole payload) is dropped.
	minPartBytes = 1024
)

// split returns the payloads of the parts of notice, an awareness update
// too large for one payload, in order; nil (with a debug log) when it is
// over MaxAwarenessMessageBytes or its list ref leaves no room for data.
func (n *Notifier) split(notice yaps.Notice) []string {
	size := len(notice.Payload)
	if size > n.cfg.MaxAwarenessMessageBytes {
		n.cfg.Logger.Debug("pgnotify: awareness update over MaxAwarenessMessageBytes; dropped",
			"list", notice.ListRef, "bytes", size, "max", n.cfg.MaxAwarenessMessageBytes)
		return nil
	}
	id := n.msgSeq.Add(1)
	// The longest header a part of this message can have: the index and
	// the count are below the size, each part carrying at least a byte.
	head, err := json.Marshal(wire{M: id, I: size, N: size, T: notice.Kind, R: notice.ListRef})
	if err != nil {
		n.cfg.Logger.Debug("pgnotify: awareness update not encodable; dropped", "list", notice.ListRef, "err", err)
		return nil
	}
	// A part is own + "," + head without its braces + `,"a":"…"}`.
	room := maxPayload - len(n.own) - len(head) - len(`,"a":""`)
	chunk := room / 4 * 3 // base64
	if chunk < minPartBytes {
		n.cfg.Logger.Debug("pgnotify: awareness update with a list ref too long to split; dropped", "list", notice.ListRef, "bytes", size)
		return nil
	}
	count := (size + chunk - 1) / chunk
	parts := make([]string, 0, count)
	for i := range count {
		data := notice.Payload[i*chunk : min((i+1)*chunk, size)]
		b, err := json.Marshal(wire{M: id, I: i, N: count, T: notice.Kind, R: notice.ListRef, A: data})
		if err != nil {
			n.cfg.Logger.Debug("pgnotify: awareness update not encodable; dropped", "list", notice.ListRef, "err", err)
			return nil
		}
		parts = append(parts, n.single(b))
	}
	return parts
}

// assembler puts the parts of split awareness updates back together, per
// sender and message id. It keeps at most MaxAwarenessMessageBytes per
// sender and partsTotalFactor times that in all, and drops what is still
// incomplete PartTimeout after its first part arrived.
type assembler struct {
	log       *slog.Logger
	channel   string
	timeout   time.Duration
	maxMsg    int // bytes of one message
	maxSender int // buffered bytes per sender (with partialOverhead)
	maxTotal  int // buffered bytes in all (with partialOverhead)

	mu      sync.Mutex
	msgs    map[partKey]*partial
	senders map[string]int // buffered bytes per sender
	total   int
	timer   *time.Timer // runs expire; nil when none is scheduled
	closed  bool
}

// partKey names a split message.
type partKey struct {
	sender string
	id     uint64
}

// partial is a split message whose parts are arriving.
type partial struct {
	kind  yaps.NoticeKind
	ref   string
	count int       // parts announced
	next  int       // index of the part expected next
	data  []byte    // the parts so far
	start time.Time // its first part arrived
}

func (p *partial) size() int { return partialOverhead + len(p.data) }

func newAssembler(cfg Config) *assembler {
	return &assembler{
		log:       cfg.Logger,
		channel:   cfg.Channel,
		timeout:   cfg.PartTimeout,
		maxMsg:    cfg.MaxAwarenessMessageBytes,
		maxSender: cfg.MaxAwarenessMessageBytes + partialOverhead,
		maxTotal:  partsTotalFactor * (cfg.MaxAwarenessMessageBytes + partialOverhead),
		msgs:      map[partKey]*partial{},
		senders:   map[string]int{},
	}
}

// add takes one part (w: a payload with M or N set) and returns the notice
// once its last part arrived. A part that does not follow the one before
// it of its message, or does not fit the caps, discards the message.
func (a *assembler) add(w *wire) (yaps.Notice, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := partKey{w.S, w.M}
	p := a.msgs[key]
	var reason string
	switch {
	case w.S == "" || w.M == 0 || w.N < 1 || w.N > a.maxMsg || w.I < 0 || w.I >= w.N || len(w.A) == 0 ||
		w.T != yaps.NoticeAwareness || w.K != 0 || len(w.B) > 0 || w.C != "":
		reason = "malformed part"
	case p == nil && w.I != 0:
		reason = "part of a message not buffered (its first part was lost, or the message discarded)"
	case p != nil && (w.I != p.next || w.N != p.count || w.T != p.kind || w.R != p.ref):
		reason = "part out of order"
	}
	if reason == "" {
		reason = a.makeRoomLocked(key, p, len(w.A))
	}
	if reason != "" {
		if p != nil {
			a.dropLocked(key, p)
		}
		a.log.Debug("pgnotify: awareness part ignored", "channel", a.channel, "reason", reason,
			"sender", w.S, "message", w.M, "part", w.I, "parts", w.N, "list", w.R)
		return yaps.Notice{}, false
	}
	grow := len(w.A)
	if p == nil {
		p = &partial{kind: w.T, ref: w.R, count: w.N, start: time.Now()}
		a.msgs[key] = p
		grow += partialOverhead
		a.scheduleLocked()
	}
	p.data = append(p.data, w.A...)
	p.next++
	a.senders[key.sender] += grow
	a.total += grow
	if p.next < p.count {
		return yaps.Notice{}, false
	}
	a.dropLocked(key, p)
	return yaps.Notice{Kind: p.kind, Sender: key.sender, ListRef: p.ref, Payload: p.data}, true
}

// makeRoomLocked checks that grow more bytes of message key (p, nil for
// its first part) fit the caps, dropping the sender's older incomplete
// messages if its own cap needs it; it returns why they do not fit, or "".
func (a *assembler) makeRoomLocked(key partKey, p *partial, grow int) string {
	have := 0
	if p != nil {
		have = len(p.data)
	}
	if have+grow > a.maxMsg {
		return fmt.Sprintf("message over MaxAwarenessMessageBytes (%d)", a.maxMsg)
	}
	if p == nil {
		grow += partialOverhead
	}
	for a.senders[key.sender]+grow > a.maxSender {
		var oldKey partKey
		var old *partial
		for k, q := range a.msgs {
			if k.sender == key.sender && k != key && (old == nil || q.start.Before(old.start)) {
				oldKey, old = k, q
			}
		}
		if old == nil {
			break
		}
		a.log.Debug("pgnotify: incomplete awareness message dropped for a newer one of its sender", "channel", a.channel,
			"sender", oldKey.sender, "message", oldKey.id, "parts", old.next, "of", old.count)
		a.dropLocked(oldKey, old)
	}
	switch {
	case a.senders[key.sender]+grow > a.maxSender:
		return "the sender's buffered parts are over their cap"
	case a.total+grow > a.maxTotal:
		return "the buffered parts of all senders are over their cap"
	}
	return ""
}

// dropLocked forgets message key.
func (a *assembler) dropLocked(key partKey, p *partial) {
	delete(a.msgs, key)
	a.total -= p.size()
	if left := a.senders[key.sender] - p.size(); left > 0 {
		a.senders[key.sender] = left
	} else {
		delete(a.senders, key.sender)
	}
}

// scheduleLocked arranges for expire to run when the oldest incomplete
// message times out, unless it is arranged already.
func (a *assembler) scheduleLocked() {
	if a.timer != nil || a.closed || len(a.msgs) == 0 {
		return
	}
	var first time.Time
	for _, p := range a.msgs {
		if first.IsZero() || p.start.Before(first) {
			first = p.start
		}
	}
	a.timer = time.AfterFunc(time.Until(first.Add(a.timeout)), a.expire)
}

// expire drops the messages still incomplete PartTimeout after their first
// part arrived.
func (a *assembler) expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timer = nil
	now := time.Now()
	for key, p := range a.msgs {
		if now.Sub(p.start) >= a.timeout {
			a.log.Debug("pgnotify: incomplete awareness message dropped after PartTimeout", "channel", a.channel,
				"sender", key.sender, "message", key.id, "parts", p.next, "of", p.count, "list", p.ref)
			a.dropLocked(key, p)
		}
	}
	a.scheduleLocked()
}

// close stops the timer and forgets every incomplete message.
func (a *assembler) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	clear(a.msgs)
	clear(a.senders)
	a.total = 0
}

// buffered returns how many incomplete messages are kept and the bytes
// they count against the caps.
func (a *assembler) buffered() (msgs, bytes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.msgs), a.total
}
