package ysync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Message types of the y-websocket protocol (first varuint of every frame).
const (
	MsgSync           = 0
	MsgAwareness      = 1
	MsgAuth           = 2
	MsgQueryAwareness = 3
)

// Sync message subtypes (y-protocols/sync).
const (
	SyncStep1  = 0 // payload: state vector
	SyncStep2  = 1 // payload: update (the part the peer lacks, plus the delete set)
	SyncUpdate = 2 // payload: update
)

// AuthPermissionDenied is the only auth subtype y-protocols defines.
const AuthPermissionDenied = 0

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER. lib0 refuses
// larger varuints, so we do too: whatever we accept, a JS peer can read.
const maxSafeInteger = 1<<53 - 1

// Decoding errors. Every malformed frame yields one of these, wrapped with
// detail; ErrUnknownType is separate because unknown message types are
// skipped for forward compatibility rather than treated as hostile.
var (
	ErrMalformed   = errors.New("ysync: malformed message")
	ErrUnknownType = errors.New("ysync: unknown message type")
)

// Message is one decoded y-websocket frame. Payload aliases the frame.
type Message struct {
	Type     uint64 // MsgSync, MsgAwareness, MsgAuth, MsgQueryAwareness
	SyncType uint64 // for MsgSync: SyncStep1, SyncStep2, SyncUpdate
	// Payload is the state vector (step 1), the update (step 2, update) or
	// the encoded awareness update (awareness).
	Payload []byte
	// AuthType and Reason are set for MsgAuth.
	AuthType uint64
	Reason   string
}

// decoder reads lib0-encoded values. Every length is checked against the
// bytes that remain before anything is sliced or allocated, so a hostile
// length can never make us allocate more than the frame itself.
type decoder struct {
	b   []byte
	pos int
}

func (d *decoder) remaining() int { return len(d.b) - d.pos }

func (d *decoder) varUint() (uint64, error) {
	var num uint64
	for shift := uint(0); d.pos < len(d.b); shift += 7 {
		r := d.b[d.pos]
		d.pos++
		if shift >= 56 { // 8 groups of 7 bits already exceed 2^53
			return 0, fmt.Errorf("%w: integer out of range", ErrMalformed)
		}
		num |= uint64(r&0x7f) << shift
		if r < 0x80 {
			if num > maxSafeInteger {
				return 0, fmt.Errorf("%w: integer out of range", ErrMalformed)
			}
			return num, nil
		}
	}
	return 0, fmt.Errorf("%w: unexpected end of data", ErrMalformed)
}

func (d *decoder) varBytes() ([]byte, error) {
	n, err := d.varUint()
	if err != nil {
		return nil, err
	}
	if n > uint64(d.remaining()) {
		return nil, fmt.Errorf("%w: length %d exceeds the %d remaining bytes", ErrMalformed, n, d.remaining())
	}
	b := d.b[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

func (d *decoder) varString() (string, error) {
	b, err := d.varBytes()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: string is not UTF-8", ErrMalformed)
	}
	return string(b), nil
}

func (d *decoder) end() error {
	if d.remaining() != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, d.remaining())
	}
	return nil
}

// DecodeMessage decodes one frame. One frame carries exactly one message;
// trailing bytes are malformed. Unknown message types return ErrUnknownType
// (with the Type set) so the caller can skip them.
func DecodeMessage(frame []byte) (Message, error) {
	d := decoder{b: frame}
	var m Message
	var err error
	if m.Type, err = d.varUint(); err != nil {
		return m, err
	}
	switch m.Type {
	case MsgSync:
		if m.SyncType, err = d.varUint(); err != nil {
			return m, err
		}
		if m.SyncType > SyncUpdate {
			return m, fmt.Errorf("%w: unknown sync message type %d", ErrMalformed, m.SyncType)
		}
		if m.Payload, err = d.varBytes(); err != nil {
			return m, err
		}
	case MsgAwareness:
		if m.Payload, err = d.varBytes(); err != nil {
			return m, err
		}
	case MsgAuth:
		if m.AuthType, err = d.varUint(); err != nil {
			return m, err
		}
		if m.AuthType != AuthPermissionDenied {
			return m, fmt.Errorf("%w: unknown auth message type %d", ErrMalformed, m.AuthType)
		}
		if m.Reason, err = d.varString(); err != nil {
			return m, err
		}
	case MsgQueryAwareness:
	default:
		return m, fmt.Errorf("%w %d", ErrUnknownType, m.Type)
	}
	return m, d.end()
}

// AwarenessEntry is one client's state in an awareness update. State is
// the JSON text of the state; "null" means the client is gone.
type AwarenessEntry struct {
	ClientID uint64
	Clock    uint64
	State    string
}

// Removed reports whether the entry announces that the client left.
func (e AwarenessEntry) Removed() bool { return e.State == "null" }

// AwarenessLimits bound what DecodeAwareness accepts.
type AwarenessLimits struct {
	MaxEntries    int // entries per update
	MaxStateBytes int // JSON bytes per state
}

// minAwarenessEntry is the smallest encoded entry: a one-byte client ID, a
// one-byte clock and a varString of length 0 (the smallest JSON, e.g. "0",
// needs one more byte, but we count conservatively).
const minAwarenessEntry = 3

// DecodeAwareness decodes the payload of an awareness message. Each state
// must be valid JSON (it is relayed verbatim to JavaScript clients, which
// JSON.parse it and would throw otherwise).
func DecodeAwareness(payload []byte, lim AwarenessLimits) ([]AwarenessEntry, error) {
	d := decoder{b: payload}
	n, err := d.varUint()
	if err != nil {
		return nil, err
	}
	if n > uint64(d.remaining()/minAwarenessEntry) {
		return nil, fmt.Errorf("%w: %d awareness entries cannot fit in %d bytes", ErrMalformed, n, d.remaining())
	}
	if lim.MaxEntries > 0 && n > uint64(lim.MaxEntries) {
		return nil, fmt.Errorf("%w: %d awareness entries, at most %d allowed", ErrMalformed, n, lim.MaxEntries)
	}
	entries := make([]AwarenessEntry, 0, n)
	for i := uint64(0); i < n; i++ {
		var e AwarenessEntry
		if e.ClientID, err = d.varUint(); err != nil {
			return nil, err
		}
		if e.Clock, err = d.varUint(); err != nil {
			return nil, err
		}
		// The clock is bumped by one when a client is removed; keep that
		// representable in JavaScript.
		if e.Clock >= maxSafeInteger {
			return nil, fmt.Errorf("%w: awareness clock out of range", ErrMalformed)
		}
		s, err := d.varBytes()
		if err != nil {
			return nil, err
		}
		if lim.MaxStateBytes > 0 && len(s) > lim.MaxStateBytes {
			return nil, fmt.Errorf("%w: awareness state of %d bytes, at most %d allowed", ErrMalformed, len(s), lim.MaxStateBytes)
		}
		if !json.Valid(s) {
			return nil, fmt.Errorf("%w: awareness state is not JSON", ErrMalformed)
		}
		e.State = string(s)
		if string(bytes.TrimSpace(s)) == "null" {
			// JSON's null with white space is still a removal to every
			// client; kept as it came, the room would count a live state.
			e.State = "null"
		}
		entries = append(entries, e)
	}
	return entries, d.end()
}

// Encoding. Every function appends to dst and returns the extended slice.

// AppendVarUint appends n in lib0's varuint encoding.
func AppendVarUint(dst []byte, n uint64) []byte {
	for n >= 0x80 {
		dst = append(dst, byte(n)|0x80)
		n >>= 7
	}
	return append(dst, byte(n))
}

// AppendVarBytes appends a length-prefixed byte array.
func AppendVarBytes(dst, b []byte) []byte {
	return append(AppendVarUint(dst, uint64(len(b))), b...)
}

func appendVarString(dst []byte, s string) []byte {
	return append(AppendVarUint(dst, uint64(len(s))), s...)
}

func appendSync(dst []byte, typ uint64, payload []byte) []byte {
	dst = AppendVarUint(dst, MsgSync)
	dst = AppendVarUint(dst, typ)
	return AppendVarBytes(dst, payload)
}

// AppendSyncStep1 appends a sync step 1 message carrying a state vector.
func AppendSyncStep1(dst, stateVector []byte) []byte { return appendSync(dst, SyncStep1, stateVector) }

// AppendSyncStep2 appends a sync step 2 message carrying an update.
func AppendSyncStep2(dst, update []byte) []byte { return appendSync(dst, SyncStep2, update) }

// AppendUpdate appends a sync update message.
func AppendUpdate(dst, update []byte) []byte { return appendSync(dst, SyncUpdate, update) }

// AppendPermissionDenied appends an auth message "permission denied".
func AppendPermissionDenied(dst []byte, reason string) []byte {
	dst = AppendVarUint(dst, MsgAuth)
	dst = AppendVarUint(dst, AuthPermissionDenied)
	return appendVarString(dst, reason)
}

// AppendQueryAwareness appends a query-awareness message.
func AppendQueryAwareness(dst []byte) []byte { return AppendVarUint(dst, MsgQueryAwareness) }

// EncodeAwareness returns the payload of an awareness message.
func EncodeAwareness(entries []AwarenessEntry) []byte {
	size := 1
	for _, e := range entries {
		size += 20 + len(e.State)
	}
	b := make([]byte, 0, size)
	b = AppendVarUint(b, uint64(len(entries)))
	for _, e := range entries {
		b = AppendVarUint(b, e.ClientID)
		b = AppendVarUint(b, e.Clock)
		b = appendVarString(b, e.State)
	}
	return b
}

// AppendAwareness appends an awareness message wrapping an encoded
// awareness update (see EncodeAwareness).
func AppendAwareness(dst, update []byte) []byte {
	dst = AppendVarUint(dst, MsgAwareness)
	return AppendVarBytes(dst, update)
}

// emptyUpdate is Y.encodeStateAsUpdate of an empty document (update v1): no
// structs, empty delete set. Clients send it as step 2 when they have
// nothing the server lacks.
var emptyUpdate = []byte{0, 0}

// isEmptyUpdate reports whether u changes nothing by construction.
func isEmptyUpdate(u []byte) bool { return len(u) == 2 && u[0] == 0 && u[1] == 0 }
