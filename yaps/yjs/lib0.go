package yjs

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Exported error values. Errors returned by decoding functions wrap one of
// these, so callers can test with errors.Is.
var (
	// ErrUnexpectedEOF reports an update or state vector that ends early.
	ErrUnexpectedEOF = errors.New("yjs: unexpected end of data")
	// ErrMalformed reports data that is structurally invalid.
	ErrMalformed = errors.New("yjs: malformed data")
	// ErrUnsupported reports a value that cannot be represented in Yjs.
	ErrUnsupported = errors.New("yjs: unsupported value")
)

// maxAnyDepth bounds the recursion of nested Any values while decoding.
const maxAnyDepth = 256

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER; lib0 rejects larger varuints.
const maxSafeInteger = 1<<53 - 1

// undefinedValue is the Go representation of JavaScript's undefined inside Any
// content. It survives a decode/encode round trip.
type undefinedValue struct{}

// Undefined represents JavaScript undefined in decoded Any values.
var Undefined = undefinedValue{}

// BigInt is a JavaScript BigInt (Any type 122) stored as a signed 64 bit value.
type BigInt int64

// encoder is an append-only byte buffer with lib0 primitives.
type encoder struct {
	buf []byte
}

func (e *encoder) writeByte(b byte) { e.buf = append(e.buf, b) }

func (e *encoder) writeVarUint(v uint64) {
	for v >= 0x80 {
		e.buf = append(e.buf, byte(v)|0x80)
		v >>= 7
	}
	e.buf = append(e.buf, byte(v))
}

// writeVarInt writes lib0's signed varint: the first byte carries a continue
// bit, a sign bit and 6 data bits.
func (e *encoder) writeVarInt(v int64, negative bool) {
	u := uint64(v)
	if v < 0 {
		u = uint64(-v)
		negative = true
	}
	b := byte(u & 0x3f)
	if u > 0x3f {
		b |= 0x80
	}
	if negative {
		b |= 0x40
	}
	e.buf = append(e.buf, b)
	u >>= 6
	for u > 0 {
		b := byte(u & 0x7f)
		if u > 0x7f {
			b |= 0x80
		}
		e.buf = append(e.buf, b)
		u >>= 7
	}
}

func (e *encoder) writeVarString(s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD") // what JavaScript's TextEncoder would write
	}
	e.writeVarUint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) writeVarBytes(b []byte) {
	e.writeVarUint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) writeFloat32(f float32) {
	e.buf = binary.BigEndian.AppendUint32(e.buf, math.Float32bits(f))
}

func (e *encoder) writeFloat64(f float64) {
	e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(f))
}

// writeNumber follows lib0 writeAny's rules for JavaScript numbers.
func (e *encoder) writeNumber(f float64) {
	if f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32 {
		e.writeByte(125)
		e.writeVarInt(int64(f), math.Signbit(f))
		return
	}
	if float64(float32(f)) == f {
		e.writeByte(124)
		e.writeFloat32(float32(f))
		return
	}
	e.writeByte(123)
	e.writeFloat64(f)
}

func (e *encoder) writeInt(v int64) {
	if v >= -math.MaxInt32 && v <= math.MaxInt32 {
		e.writeByte(125)
		e.writeVarInt(v, false)
		return
	}
	e.writeNumber(float64(v))
}

// writeAny encodes v with lib0's Any encoding. Map keys are written in
// JavaScript property order: integer-like keys ascending, then the rest
// sorted (Go maps have no insertion order).
func (e *encoder) writeAny(v any) error {
	switch x := v.(type) {
	case nil:
		e.writeByte(126)
	case undefinedValue:
		e.writeByte(127)
	case bool:
		if x {
			e.writeByte(120)
		} else {
			e.writeByte(121)
		}
	case string:
		e.writeByte(119)
		e.writeVarString(x)
	case int:
		e.writeInt(int64(x))
	case int8:
		e.writeInt(int64(x))
	case int16:
		e.writeInt(int64(x))
	case int32:
		e.writeInt(int64(x))
	case int64:
		e.writeInt(x)
	case uint:
		e.writeNumber(float64(x))
	case uint8:
		e.writeInt(int64(x))
	case uint16:
		e.writeInt(int64(x))
	case uint32:
		e.writeInt(int64(x))
	case uint64:
		e.writeNumber(float64(x))
	case float32:
		e.writeNumber(float64(x))
	case float64:
		e.writeNumber(x)
	case BigInt:
		e.writeByte(122)
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(x))
	case []byte:
		e.writeByte(116)
		e.writeVarBytes(x)
	case []any:
		e.writeByte(117)
		e.writeVarUint(uint64(len(x)))
		for _, el := range x {
			if err := e.writeAny(el); err != nil {
				return err
			}
		}
	case []string:
		e.writeByte(117)
		e.writeVarUint(uint64(len(x)))
		for _, el := range x {
			e.writeByte(119)
			e.writeVarString(el)
		}
	case map[string]any:
		e.writeByte(118)
		e.writeVarUint(uint64(len(x)))
		for _, k := range jsKeyOrder(x) {
			e.writeVarString(k)
			if err := e.writeAny(x[k]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: %T cannot be encoded as Any", ErrUnsupported, v)
	}
	return nil
}

// checkAny returns the error writeAny would return for v, without
// encoding it: validating a value before it goes into a document used to
// encode it and throw the bytes away, which was most of the allocations of
// setting a yap's fields.
func checkAny(v any) error {
	switch x := v.(type) {
	case nil, undefinedValue, bool, string, int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64, float32, float64, BigInt, []byte, []string:
	case []any:
		for _, el := range x {
			if err := checkAny(el); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, el := range x {
			if err := checkAny(el); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: %T cannot be encoded as Any", ErrUnsupported, v)
	}
	return nil
}

// jsKeyOrder returns the keys of m in the order JavaScript's Object.keys
// would list them, assuming lexical insertion order for non-index keys.
func jsKeyOrder(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, aok := arrayIndex(keys[i])
		b, bok := arrayIndex(keys[j])
		switch {
		case aok && bok:
			return a < b
		case aok != bok:
			return aok
		}
		return keys[i] < keys[j]
	})
	return keys
}

// arrayIndex reports whether k is a canonical JavaScript array index.
func arrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	if err != nil || n >= 1<<32-1 {
		return 0, false
	}
	return n, true
}

// decoder reads lib0 primitives from a byte slice. Every read checks the
// remaining length first; the first error sticks so callers can check once.
type decoder struct {
	buf []byte
	pos int
	// raw: validate Any and JSON values without building Go values; used
	// where only the encoded form matters (merge, diff, pending sets).
	raw bool
}

func (d *decoder) remaining() int { return len(d.buf) - d.pos }

func errEOF(what string) error { return fmt.Errorf("%w reading %s", ErrUnexpectedEOF, what) }

func (d *decoder) readByte() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, errEOF("byte")
	}
	b := d.buf[d.pos]
	d.pos++
	return b, nil
}

func (d *decoder) readVarUint() (uint64, error) {
	var v uint64
	var shift uint
	for d.pos < len(d.buf) {
		b := d.buf[d.pos]
		d.pos++
		if shift >= 63 && b > 1 {
			return 0, fmt.Errorf("%w: varuint overflows 64 bits", ErrMalformed)
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
		shift += 7
	}
	return 0, errEOF("varuint")
}

// readInt reads a varuint that must fit a JavaScript safe integer; it is used
// for clocks, lengths and counts.
func (d *decoder) readInt() (int, error) {
	v, err := d.readVarUint()
	if err != nil {
		return 0, err
	}
	if v > maxSafeInteger {
		return 0, fmt.Errorf("%w: integer %d out of range", ErrMalformed, v)
	}
	return int(v), nil
}

// readCount reads a count of elements that each take at least minBytes
// bytes, and rejects counts the remaining input cannot possibly hold.
func (d *decoder) readCount(minBytes int) (int, error) {
	n, err := d.readInt()
	if err != nil {
		return 0, err
	}
	if minBytes > 0 && n > d.remaining()/minBytes {
		return 0, fmt.Errorf("%w: count %d exceeds remaining %d bytes", ErrUnexpectedEOF, n, d.remaining())
	}
	return n, nil
}

func (d *decoder) readVarInt() (int64, bool, error) {
	b, err := d.readByte()
	if err != nil {
		return 0, false, err
	}
	neg := b&0x40 != 0
	v := uint64(b & 0x3f)
	shift := uint(6)
	for b&0x80 != 0 {
		if b, err = d.readByte(); err != nil {
			return 0, false, err
		}
		if shift > 56 {
			return 0, false, fmt.Errorf("%w: varint overflows", ErrMalformed)
		}
		v |= uint64(b&0x7f) << shift
		shift += 7
	}
	if v > maxSafeInteger {
		return 0, false, fmt.Errorf("%w: varint out of range", ErrMalformed)
	}
	if neg {
		return -int64(v), true, nil
	}
	return int64(v), false, nil
}

func (d *decoder) readBytes(n int) ([]byte, error) {
	if n < 0 || n > d.remaining() {
		return nil, errEOF("bytes")
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) readVarBytes() ([]byte, error) {
	n, err := d.readInt()
	if err != nil {
		return nil, err
	}
	return d.readBytes(n)
}

// readVarString reads a UTF-8 string. Yjs decodes strings with a fatal
// TextDecoder, so invalid UTF-8 is rejected rather than passed on to
// clients that cannot read it.
func (d *decoder) readVarString() (string, error) {
	b, err := d.readVarBytes()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: invalid UTF-8 in string", ErrMalformed)
	}
	return string(b), nil
}

// readClient reads a client id; like lib0 it must be a safe JavaScript integer.
func (d *decoder) readClient() (uint64, error) {
	v, err := d.readInt()
	return uint64(v), err
}

func (d *decoder) readAny() (any, error) { return d.readAnyDepth(0) }

// skipAny validates one Any value and moves past it.
func (d *decoder) skipAny(depth int) error {
	if depth > maxAnyDepth {
		return fmt.Errorf("%w: Any nested deeper than %d", ErrMalformed, maxAnyDepth)
	}
	tag, err := d.readByte()
	if err != nil {
		return err
	}
	switch tag {
	case 127, 126, 121, 120:
		return nil
	case 125:
		_, _, err = d.readVarInt()
	case 124:
		_, err = d.readBytes(4)
	case 123, 122:
		_, err = d.readBytes(8)
	case 119:
		_, err = d.readVarString()
	case 118:
		n, err := d.readCount(2)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if _, err := d.readVarString(); err != nil {
				return err
			}
			if err := d.skipAny(depth + 1); err != nil {
				return err
			}
		}
	case 117:
		n, err := d.readCount(1)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := d.skipAny(depth + 1); err != nil {
				return err
			}
		}
	case 116:
		_, err = d.readVarBytes()
	default:
		return fmt.Errorf("%w: unknown Any tag %d", ErrMalformed, tag)
	}
	return err
}

// own returns b for keeping: a copy, or in raw mode (where decoded structs
// never outlive the input) b itself, capped so appends cannot touch the input.
func (d *decoder) own(b []byte) []byte {
	if d.raw {
		return b[:len(b):len(b)]
	}
	return append([]byte{}, b...)
}

// anyValue reads an Any value, or only validates it in raw mode.
func (d *decoder) anyValue() (any, error) {
	if d.raw {
		return nil, d.skipAny(0)
	}
	return d.readAny()
}

// jsonValue parses JSON content, or only validates it in raw mode.
// readJSON reads one length-prefixed JSON text (JSON, Embed and Format
// content) and returns the owned bytes, kept to re-encode them unchanged,
// and the parsed value.
func (d *decoder) readJSON() ([]byte, any, error) {
	b, err := d.readVarBytes()
	if err != nil {
		return nil, nil, err
	}
	if !utf8.Valid(b) {
		return nil, nil, fmt.Errorf("%w: invalid UTF-8 in JSON", ErrMalformed)
	}
	raw := d.own(b)
	v, err := d.jsonValue(raw)
	if err != nil {
		return nil, nil, err
	}
	return raw, v, nil
}

func (d *decoder) jsonValue(b []byte) (any, error) {
	if d.raw {
		if string(b) != "undefined" && !json.Valid(b) {
			return nil, fmt.Errorf("%w: invalid JSON content", ErrMalformed)
		}
		return nil, nil
	}
	return parseJSON(b)
}

func (d *decoder) readAnyDepth(depth int) (any, error) {
	if depth > maxAnyDepth {
		return nil, fmt.Errorf("%w: Any nested deeper than %d", ErrMalformed, maxAnyDepth)
	}
	tag, err := d.readByte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case 127:
		return Undefined, nil
	case 126:
		return nil, nil
	case 125:
		v, neg, err := d.readVarInt()
		if err != nil {
			return nil, err
		}
		if v == 0 && neg {
			return math.Copysign(0, -1), nil
		}
		return v, nil
	case 124:
		b, err := d.readBytes(4)
		if err != nil {
			return nil, err
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case 123:
		b, err := d.readBytes(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case 122:
		b, err := d.readBytes(8)
		if err != nil {
			return nil, err
		}
		return BigInt(binary.BigEndian.Uint64(b)), nil
	case 121:
		return false, nil
	case 120:
		return true, nil
	case 119:
		return d.readVarString()
	case 118:
		n, err := d.readCount(2)
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, n)
		for i := 0; i < n; i++ {
			k, err := d.readVarString()
			if err != nil {
				return nil, err
			}
			v, err := d.readAnyDepth(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case 117:
		n, err := d.readCount(1)
		if err != nil {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = d.readAnyDepth(depth + 1); err != nil {
				return nil, err
			}
		}
		return a, nil
	case 116:
		b, err := d.readVarBytes()
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	}
	return nil, fmt.Errorf("%w: unknown Any tag %d", ErrMalformed, tag)
}

// utf16Len counts UTF-16 code units of a UTF-8 string, as JavaScript's
// String.length does. Invalid bytes count as one unit each (U+FFFD).
func utf16Len(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			n++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

func utf16LenString(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return i + utf16Len([]byte(s[i:]))
		}
		n++
	}
	return n
}

// normalizeAny returns v in the form a decoder would produce after
// encoding it: integers that lib0 writes as varints become int64, other
// numbers float64, []string becomes []any; slices and maps are copied.
func normalizeAny(v any) any {
	switch x := v.(type) {
	case string:
		if utf8.ValidString(x) {
			return v // as it is: converting x back to any would allocate
		}
		return validString(x)
	case int:
		return normalizeInt(int64(x))
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return normalizeInt(x)
	case uint:
		return normalizeFloat(float64(x))
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return normalizeInt(int64(x))
	case uint64:
		return normalizeFloat(float64(x))
	case float32:
		return normalizeFloat(float64(x))
	case float64:
		return normalizeFloat(x)
	case []byte:
		return append([]byte{}, x...)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = validString(s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = normalizeAny(el)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, el := range x {
			out[validString(k)] = normalizeAny(el)
		}
		return out
	}
	return v
}

// validString replaces invalid UTF-8 with U+FFFD: Yjs peers reject
// updates with invalid UTF-8, so it must never be written.
func validString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func normalizeInt(v int64) any {
	if v >= -math.MaxInt32 && v <= math.MaxInt32 {
		return v
	}
	return float64(v)
}

func normalizeFloat(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32 && !(f == 0 && math.Signbit(f)) {
		return int64(f)
	}
	return f
}
