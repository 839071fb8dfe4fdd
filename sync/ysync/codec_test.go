package ysync

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// Vectors produced by y-protocols 1.0.7 / lib0 0.2.120 (see interop/sync),
// so the codec is checked byte for byte against the JavaScript reference.
const (
	jsStep1     = "00000401b96002"
	jsStep2     = "00010e0101b96000040101740368c3a900"
	jsAuth      = "0200117065726d697373696f6e2064656e696564"
	jsAwareness = "012501b96001207b2275736572223a7b226e616d65223a225a6fc3ab227d2c226e223a3330307d"
	jsAwNull    = "01b96001046e756c6c"
)

func TestDecodeJSVectors(t *testing.T) {
	t.Parallel()
	m, err := DecodeMessage(unhex(t, jsStep1))
	require.NoError(t, err)
	require.Equal(t, uint64(MsgSync), m.Type)
	require.Equal(t, uint64(SyncStep1), m.SyncType)
	require.Equal(t, unhex(t, "01b96002"), m.Payload)
	require.Equal(t, unhex(t, jsStep1), AppendSyncStep1(nil, m.Payload))

	m, err = DecodeMessage(unhex(t, jsStep2))
	require.NoError(t, err)
	require.Equal(t, uint64(SyncStep2), m.SyncType)
	require.Equal(t, unhex(t, jsStep2), AppendSyncStep2(nil, m.Payload))

	m, err = DecodeMessage(unhex(t, "0001020000"))
	require.NoError(t, err)
	require.True(t, isEmptyUpdate(m.Payload))

	m, err = DecodeMessage(unhex(t, jsAuth))
	require.NoError(t, err)
	require.Equal(t, uint64(MsgAuth), m.Type)
	require.Equal(t, "permission denied", m.Reason)
	require.Equal(t, unhex(t, jsAuth), AppendPermissionDenied(nil, "permission denied"))

	m, err = DecodeMessage(unhex(t, jsAwareness))
	require.NoError(t, err)
	require.Equal(t, uint64(MsgAwareness), m.Type)
	entries, err := DecodeAwareness(m.Payload, AwarenessLimits{MaxEntries: 10, MaxStateBytes: 100})
	require.NoError(t, err)
	require.Equal(t, []AwarenessEntry{{ClientID: 12345, Clock: 1, State: `{"user":{"name":"Zoë"},"n":300}`}}, entries)
	require.Equal(t, unhex(t, jsAwareness), AppendAwareness(nil, EncodeAwareness(entries)))

	entries, err = DecodeAwareness(unhex(t, jsAwNull), AwarenessLimits{})
	require.NoError(t, err)
	require.True(t, entries[0].Removed())
	require.Equal(t, unhex(t, jsAwNull), EncodeAwareness(entries))

	m, err = DecodeMessage([]byte{MsgQueryAwareness})
	require.NoError(t, err)
	require.Equal(t, uint64(MsgQueryAwareness), m.Type)
	require.Equal(t, []byte{3}, AppendQueryAwareness(nil))
}

func TestVarUintRoundTrip(t *testing.T) {
	t.Parallel()
	for _, n := range []uint64{0, 1, 127, 128, 255, 16383, 16384, 1<<32 - 1, 1 << 40, maxSafeInteger} {
		b := AppendVarUint(nil, n)
		d := decoder{b: b}
		got, err := d.varUint()
		require.NoError(t, err, n)
		require.Equal(t, n, got)
		require.NoError(t, d.end())
	}
	d := decoder{b: AppendVarUint(nil, maxSafeInteger+1)}
	_, err := d.varUint()
	require.ErrorIs(t, err, ErrMalformed)
}

func TestDecodeMalformed(t *testing.T) {
	t.Parallel()
	for name, frame := range map[string]string{
		"empty":                "",
		"truncated varuint":    "80",
		"overlong varuint":     "ffffffffffffffffffff01",
		"sync without subtype": "00",
		"sync bad subtype":     "000300",
		"sync no payload":      "0000",
		"sync huge length":     "0002ffffffff0f00",
		"sync short payload":   "00020500",
		"sync trailing":        "0002000000",
		"awareness no payload": "01",
		"awareness huge":       "01ffffff7f",
		"auth bad subtype":     "020100",
		"auth bad utf8":        "020001ff",
		"query trailing":       "0300",
	} {
		_, err := DecodeMessage(unhex(t, frame))
		require.ErrorIs(t, err, ErrMalformed, name)
	}
	_, err := DecodeMessage([]byte{9, 1, 2})
	require.ErrorIs(t, err, ErrUnknownType)
	require.False(t, errors.Is(err, ErrMalformed))
}

func TestDecodeAwarenessMalformed(t *testing.T) {
	t.Parallel()
	lim := AwarenessLimits{MaxEntries: 4, MaxStateBytes: 16}
	ok := EncodeAwareness([]AwarenessEntry{{ClientID: 1, Clock: 2, State: `{"a":1}`}})
	_, err := DecodeAwareness(ok, lim)
	require.NoError(t, err)
	for name, payload := range map[string][]byte{
		"empty":         {},
		"count too big": {0xff, 0xff, 0x03, 1, 1, 0},
		"too many":      EncodeAwareness(make([]AwarenessEntry, 5)),
		"not json":      EncodeAwareness([]AwarenessEntry{{State: "{"}}),
		"empty state":   EncodeAwareness([]AwarenessEntry{{State: ""}}),
		"state too big": EncodeAwareness([]AwarenessEntry{{State: `"0123456789abcdef"`}}),
		"clock max":     EncodeAwareness([]AwarenessEntry{{Clock: maxSafeInteger, State: "1"}}),
		"trailing":      append(append([]byte{}, ok...), 0),
		"truncated":     ok[:len(ok)-1],
	} {
		_, err := DecodeAwareness(payload, lim)
		require.ErrorIs(t, err, ErrMalformed, name)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{jsStep1, jsStep2, jsAuth, jsAwareness, "03", "0001020000", "0002ffffffff0f00", "01ffffff7f"} {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := DecodeMessage(frame)
		if err != nil {
			return
		}
		// Whatever decodes must fit in the frame and re-encode to it.
		require.LessOrEqual(t, len(m.Payload), len(frame))
		var re []byte
		switch m.Type {
		case MsgSync:
			re = appendSync(nil, m.SyncType, m.Payload)
		case MsgAwareness:
			re = AppendAwareness(nil, m.Payload)
			if entries, err := DecodeAwareness(m.Payload, AwarenessLimits{MaxEntries: 1000, MaxStateBytes: 1 << 20}); err == nil {
				require.LessOrEqual(t, len(entries), len(m.Payload)/minAwarenessEntry)
				// Re-encoding may shorten non-minimal varuints, never lengthen.
				require.LessOrEqual(t, len(EncodeAwareness(entries)), len(m.Payload))
			}
		case MsgAuth:
			re = AppendPermissionDenied(nil, m.Reason)
		case MsgQueryAwareness:
			re = AppendQueryAwareness(nil)
		}
		// Non-minimal varuints decode fine but re-encode shorter.
		require.LessOrEqual(t, len(re), len(frame))
	})
}

// JSON's null with white space around it is a removal, as every client
// reads it (awareness review: the room counted it as a live state).
func TestDecodeAwarenessPaddedNull(t *testing.T) {
	t.Parallel()
	for _, state := range []string{" null", "null\n", "\tnull "} {
		b := AppendVarUint(nil, 1)
		b = AppendVarUint(AppendVarUint(b, 7), 3)
		b = appendVarString(b, state)
		entries, err := DecodeAwareness(b, AwarenessLimits{})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.True(t, entries[0].Removed(), "%q", state)
	}
}
