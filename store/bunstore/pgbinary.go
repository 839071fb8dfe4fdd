package bunstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Binary parameters of the batch statement (Postgres). A batch of prepared
// writes is one statement whose forty-odd parameters are arrays
// (prepmulti.go). pgx encodes each array element through its type map (a
// plan looked up per element, a value boxed per argument), about 45 µs of
// every batch of eight in BenchmarkPreparedCreates and about 90 µs in the
// HTTP create-yap benchmark (a perf profile), spent by the batcher while
// Postgres waited for the batch. The statement's parameter types are fixed
// by its casts, so the batcher writes them itself, in Postgres's binary
// array format, into one buffer (the bytes pgx would write, checked by
// TestArrayParamsMatchPgx).

// Postgres type OIDs of the arrays the batch statement takes, and of their
// elements.
const (
	oidInt4       = 23
	oidInt8       = 20
	oidText       = 25
	oidBytea      = 17
	oidInt4Array  = 1007
	oidInt8Array  = 1016
	oidTextArray  = 1009
	oidByteaArray = 1001
)

// appendArrayParam appends v, one of the batch statement's argument types,
// to buf as a Postgres binary array of the type oid, and returns the
// extended buffer. A nil element (pointer or []byte) is a NULL.
func appendArrayParam(buf []byte, oid uint32, v any) ([]byte, error) {
	switch oid {
	case oidTextArray:
		switch x := v.(type) {
		case []string:
			buf = appendArrayHeader(buf, oidText, len(x), false)
			for _, s := range x {
				buf = appendElem(buf, s)
			}
			return buf, nil
		case []*string:
			return appendNullable(buf, oidText, x, appendElem[string]), nil
		}
	case oidByteaArray:
		if x, ok := v.([][]byte); ok {
			// A nil []byte is a NULL, as pgx has it.
			buf = appendArrayHeader(buf, oidBytea, len(x), slices.ContainsFunc(x, func(b []byte) bool { return b == nil }))
			for _, b := range x {
				if b == nil {
					buf = appendNull(buf)
				} else {
					buf = appendElem(buf, b)
				}
			}
			return buf, nil
		}
	case oidInt8Array:
		switch x := v.(type) {
		case []int64:
			buf = appendArrayHeader(buf, oidInt8, len(x), false)
			for _, n := range x {
				buf = appendInt8(buf, n)
			}
			return buf, nil
		case []*int64:
			return appendNullable(buf, oidInt8, x, appendInt8), nil
		}
	case oidInt4Array:
		if x, ok := v.([]int32); ok {
			buf = appendArrayHeader(buf, oidInt4, len(x), false)
			for _, n := range x {
				buf = binary.BigEndian.AppendUint32(buf, 4)
				buf = binary.BigEndian.AppendUint32(buf, uint32(n))
			}
			return buf, nil
		}
	}
	return buf, fmt.Errorf("bunstore: no binary encoding of %T as type %d", v, oid)
}

// appendNullable appends xs as an array of elem, each element by one, a
// nil one as a NULL.
func appendNullable[T any](buf []byte, elem uint32, xs []*T, one func([]byte, T) []byte) []byte {
	buf = appendArrayHeader(buf, elem, len(xs), slices.Contains(xs, nil))
	for _, x := range xs {
		if x == nil {
			buf = appendNull(buf)
		} else {
			buf = one(buf, *x)
		}
	}
	return buf
}

// appendInt8 appends one bigint element.
func appendInt8(buf []byte, n int64) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 8)
	return binary.BigEndian.AppendUint64(buf, uint64(n))
}

// appendArrayHeader appends the header of a one-dimensional array of n
// elements of type elem, lower bound 1 (an empty one too, as pgx writes
// it).
func appendArrayHeader(buf []byte, elem uint32, n int, nulls bool) []byte {
	flags := uint32(0)
	if nulls {
		flags = 1
	}
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, flags)
	buf = binary.BigEndian.AppendUint32(buf, elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1)
}

// appendElem appends one element: its length, then its bytes.
func appendElem[T string | []byte](buf []byte, v T) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
	return append(buf, v...)
}

// appendNull appends a NULL element (length -1).
func appendNull(buf []byte) []byte {
	return binary.BigEndian.AppendUint32(buf, math.MaxUint32)
}

// encodeArrayParams encodes args (the batch statement's arguments) as the
// parameter types oids, appended to buf. It returns each argument's value,
// a slice of the extended buffer, and the buffer.
func encodeArrayParams(buf []byte, oids []uint32, args []any) (vals [][]byte, out []byte, err error) {
	if len(oids) != len(args) {
		return nil, buf, fmt.Errorf("bunstore: %d parameters for %d arguments", len(oids), len(args))
	}
	ends := make([]int, len(args))
	start := len(buf)
	for i, a := range args {
		if buf, err = appendArrayParam(buf, oids[i], a); err != nil {
			return nil, buf, err
		}
		ends[i] = len(buf)
	}
	// Sliced once the buffer has stopped growing.
	vals = make([][]byte, len(args))
	for i, end := range ends {
		vals[i] = buf[start:end:end]
		start = end
	}
	return vals, buf, nil
}

// binaryFormat binds every parameter (or result column) in binary.
var binaryFormat = []int16{1}
