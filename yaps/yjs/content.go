package yjs

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Content kinds; the values are the Yjs struct refs written in the low 5
// bits of an item's info byte.
const (
	kindGC      uint8 = 0
	kindDeleted uint8 = 1
	kindJSON    uint8 = 2
	kindBinary  uint8 = 3
	kindString  uint8 = 4
	kindEmbed   uint8 = 5
	kindFormat  uint8 = 6
	kindType    uint8 = 7
	kindAny     uint8 = 8
	kindDoc     uint8 = 9
	kindSkip    uint8 = 10
)

// content is an item's payload as a small tagged struct: strings (the hot
// path) live inline, every other kind in ext.
type content struct {
	kind uint8
	str  []byte // kindString, UTF-8
	ext  *contentExt
}

// contentExt holds what a content of a kind other than kindString
// carries. The fields of the rarer kinds are behind a pointer of their
// own: a map value (kindAny) or a shared type (kindType), most of a list
// document's contents, then takes 64 bytes instead of 144.
type contentExt struct {
	vals         []any    // kindAny, kindJSON
	raw          [][]byte // encoded form of vals as read (nil entries for local values)
	typ          *typeBase
	*contentMore // kindBinary, kindEmbed, kindFormat, kindDoc; nil for the others
}

type contentMore struct {
	key     string // kindFormat key, kindDoc guid
	val     any    // kindFormat and kindEmbed value; kindDoc opts
	rawJSON []byte // kindFormat/kindEmbed JSON text, kindDoc raw opts (Any)
	bin     []byte // kindBinary
	doc     *Doc
}

// anyExt is a contentExt and the backing array of its one value, so that
// a map entry's value takes one allocation instead of two.
type anyExt struct {
	contentExt
	one [1]any
}

// newAnyExt returns the ext of a ContentAny holding v alone (vals has
// length and capacity 1, as []any{v} would).
func newAnyExt(v any) *contentExt {
	x := &anyExt{one: [1]any{v}}
	x.vals = x.one[:]
	return &x.contentExt
}

// lenMax bounds a lib0 varuint (a length or a count) in bytes.
const lenMax = 10

// sizeHint bounds the encoded size of c (write), for sizing encoder
// buffers. It is exact or above for strings, binaries, types and values
// of the JSON-like kinds; format and embed contents may exceed it.
func (c *content) sizeHint() int {
	switch c.kind {
	case kindString:
		return lenMax + len(c.str)
	case kindAny, kindJSON:
		n := lenMax
		for i, v := range c.ext.vals {
			if c.ext.raw != nil && c.ext.raw[i] != nil {
				n += lenMax + len(c.ext.raw[i])
			} else if c.kind == kindJSON {
				n += lenMax + 2*anySizeHint(v) // JSON text, escapes included
			} else {
				n += anySizeHint(v)
			}
		}
		return n
	case kindBinary:
		return lenMax + len(c.ext.bin)
	case kindFormat, kindEmbed:
		return 2*lenMax + len(c.ext.key) + len(c.ext.rawJSON) + 16
	case kindType:
		if c.ext != nil && c.ext.typ != nil {
			return 1 + lenMax + len(c.ext.typ.nodeName)
		}
	}
	return 1 + lenMax
}

// anySizeHint bounds the lib0 encoding of an Any value (writeAny).
func anySizeHint(v any) int {
	switch x := v.(type) {
	case string:
		return 1 + lenMax + len(x)
	case []byte:
		return 1 + lenMax + len(x)
	case []any:
		n := 1 + lenMax
		for _, e := range x {
			n += anySizeHint(e)
		}
		return n
	case []string:
		n := 1 + lenMax
		for _, e := range x {
			n += 1 + lenMax + len(e)
		}
		return n
	case map[string]any:
		n := 1 + lenMax
		for k, e := range x {
			n += lenMax + len(k) + anySizeHint(e)
		}
		return n
	}
	return 1 + lenMax // numbers, booleans, null, undefined: a tag and at most 10 bytes
}

func (c *content) countable() bool { return c.kind != kindDeleted && c.kind != kindFormat }

// splitUTF16 splits s at a UTF-16 offset. A split inside a surrogate pair
// replaces both halves with U+FFFD, exactly like Yjs ContentString.splice.
func splitUTF16(s []byte, off int) (left, right []byte) {
	units := 0
	for i := 0; i < len(s); {
		if units == off {
			return s[:i:i], s[i:]
		}
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			units++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r >= 0x10000 {
			if units+1 == off {
				l := append(append(make([]byte, 0, i+3), s[:i]...), "\uFFFD"...)
				rt := append(append(make([]byte, 0, len(s)-i-size+3), "\uFFFD"...), s[i+size:]...)
				return l, rt
			}
			units += 2
		} else {
			units++
		}
		i += size
	}
	return s, nil
}

// splice cuts c at offset (in content units) and returns the right part;
// total is c's length before the cut.
func (c *content) splice(offset, total int) content {
	switch c.kind {
	case kindString:
		var l, r []byte
		if len(c.str) == total { // ASCII: bytes are code units
			l, r = c.str[:offset:offset], c.str[offset:]
		} else {
			l, r = splitUTF16(c.str, offset)
		}
		c.str = l
		return content{kind: kindString, str: r}
	case kindDeleted:
		return content{kind: kindDeleted}
	case kindAny, kindJSON:
		x := c.ext
		right := &contentExt{vals: append([]any(nil), x.vals[offset:]...)}
		x.vals = x.vals[:offset:offset]
		if x.raw != nil {
			right.raw = append([][]byte(nil), x.raw[offset:]...)
			x.raw = x.raw[:offset:offset]
		}
		return content{kind: c.kind, ext: right}
	}
	panic("yjs: splice of unsplittable content")
}

// mergeWith appends right to c when both are of a mergeable kind.
func (c *content) mergeWith(r *content) bool {
	if c.kind != r.kind {
		return false
	}
	switch c.kind {
	case kindString:
		c.str = append(c.str, r.str...)
		return true
	case kindDeleted:
		return true
	case kindAny, kindJSON:
		x, y := c.ext, r.ext
		if x.raw != nil || y.raw != nil {
			if x.raw == nil {
				x.raw = make([][]byte, len(x.vals))
			}
			if y.raw == nil {
				x.raw = append(x.raw, make([][]byte, len(y.vals))...)
			} else {
				x.raw = append(x.raw, y.raw...)
			}
		}
		x.vals = append(x.vals, y.vals...)
		return true
	}
	return false
}

// write encodes c from offset on; length is the item's length.
func (c *content) write(e *encoder, offset, length int) {
	switch c.kind {
	case kindDeleted:
		e.writeVarUint(uint64(length - offset))
	case kindString:
		s := c.str
		if offset > 0 {
			if len(s) == length {
				s = s[offset:]
			} else {
				_, s = splitUTF16(s, offset)
			}
		}
		e.writeVarBytes(s)
	case kindJSON:
		x := c.ext
		e.writeVarUint(uint64(len(x.vals) - offset))
		for i := offset; i < len(x.vals); i++ {
			if x.raw != nil && x.raw[i] != nil {
				e.writeVarBytes(x.raw[i])
			} else {
				e.writeVarString(jsonString(x.vals[i]))
			}
		}
	case kindBinary:
		e.writeVarBytes(c.ext.bin)
	case kindEmbed:
		e.writeVarBytes(c.ext.jsonBytes())
	case kindFormat:
		e.writeVarString(c.ext.key)
		e.writeVarBytes(c.ext.jsonBytes())
	case kindType:
		t := c.ext.typ
		e.writeVarUint(uint64(t.kind))
		if t.kind == typeXmlElement || t.kind == typeXmlHook {
			e.writeVarString(t.nodeName)
		}
	case kindAny:
		x := c.ext
		e.writeVarUint(uint64(len(x.vals) - offset))
		for i := offset; i < len(x.vals); i++ {
			if x.raw != nil && x.raw[i] != nil {
				e.buf = append(e.buf, x.raw[i]...)
			} else {
				_ = e.writeAny(x.vals[i]) // validated when the content was created
			}
		}
	case kindDoc:
		e.writeVarString(c.ext.key)
		if c.ext.rawJSON != nil {
			e.buf = append(e.buf, c.ext.rawJSON...)
		} else {
			_ = e.writeAny(c.ext.val)
		}
	}
}

// subdoc returns the embedded document, creating an unloaded one for
// decoded content. Its guid and options come from the update.
func (x *contentExt) subdoc() *Doc {
	if x.doc == nil {
		gc := true
		if opts, ok := x.val.(map[string]any); ok {
			if v, ok := opts["gc"].(bool); ok {
				gc = v
			}
		}
		x.doc = NewDoc(WithGUID(x.key), WithGC(gc))
	}
	return x.doc
}

func (x *contentExt) jsonBytes() []byte {
	if x.rawJSON == nil {
		x.rawJSON = []byte(jsonString(x.val))
	}
	return x.rawJSON
}

// jsonString mirrors JSON.stringify for the values Go callers pass.
func jsonString(v any) string {
	if _, ok := v.(undefinedValue); ok {
		return "undefined"
	}
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return "null"
	}
	return string(b)
}

// jsonable converts values that encoding/json would render differently from
// JSON.stringify.
func jsonable(v any) any {
	switch x := v.(type) {
	case undefinedValue:
		return nil
	case []byte:
		m := make(map[string]any, len(x))
		for i, b := range x {
			m[fmt.Sprint(i)] = b
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = jsonable(el)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, el := range x {
			if _, ok := el.(undefinedValue); ok {
				continue
			}
			out[k] = jsonable(el)
		}
		return out
	}
	return v
}

// The lib0 Any tags of null and undefined.
const (
	anyTagNull      = 126
	anyTagUndefined = 127
)

// notUndefined refuses the JSON text "undefined" where Yjs JSON.parses the
// content (an embed, a format value), which throws on it; only ContentJSON
// reads it as undefined.
func notUndefined(raw []byte) error {
	if string(raw) == "undefined" {
		return fmt.Errorf("%w: undefined is not JSON", ErrMalformed)
	}
	return nil
}

func parseJSON(b []byte) (any, error) {
	if string(b) == "undefined" {
		return Undefined, nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%w: invalid JSON content: %v", ErrMalformed, err)
	}
	return v, nil
}

// readContent decodes the content of an item with the given kind and returns
// it with its length.
func readContent(d *decoder, kind uint8) (content, int, error) {
	switch kind {
	case kindDeleted:
		n, err := d.readInt()
		if err != nil {
			return content{}, 0, err
		}
		if n == 0 {
			return content{}, 0, fmt.Errorf("%w: empty deleted content", ErrMalformed)
		}
		return content{kind: kindDeleted}, n, nil
	case kindJSON:
		n, err := d.readCount(1)
		if err != nil {
			return content{}, 0, err
		}
		x := &contentExt{vals: make([]any, n), raw: make([][]byte, n)}
		for i := 0; i < n; i++ {
			raw, v, err := d.readJSON()
			if err != nil {
				return content{}, 0, err
			}
			x.vals[i], x.raw[i] = v, raw
		}
		return checkNonEmpty(content{kind: kindJSON, ext: x}, n)
	case kindBinary:
		b, err := d.readVarBytes()
		if err != nil {
			return content{}, 0, err
		}
		return content{kind: kindBinary, ext: &contentExt{contentMore: &contentMore{bin: d.own(b)}}}, 1, nil
	case kindString:
		b, err := d.readVarBytes()
		if err != nil {
			return content{}, 0, err
		}
		if !utf8.Valid(b) {
			return content{}, 0, fmt.Errorf("%w: invalid UTF-8 in string", ErrMalformed)
		}
		s := d.own(b)
		return checkNonEmpty(content{kind: kindString, str: s}, utf16Len(s))
	case kindEmbed:
		raw, v, err := d.readJSON()
		if err != nil {
			return content{}, 0, err
		}
		if err := notUndefined(raw); err != nil {
			return content{}, 0, err
		}
		return content{kind: kindEmbed, ext: &contentExt{contentMore: &contentMore{val: v, rawJSON: raw}}}, 1, nil
	case kindFormat:
		key, err := d.readVarString()
		if err != nil {
			return content{}, 0, err
		}
		raw, v, err := d.readJSON()
		if err != nil {
			return content{}, 0, err
		}
		if err := notUndefined(raw); err != nil {
			return content{}, 0, err
		}
		return content{kind: kindFormat, ext: &contentExt{contentMore: &contentMore{key: key, val: v, rawJSON: raw}}}, 1, nil
	case kindType:
		ref, err := d.readVarUint()
		if err != nil {
			return content{}, 0, err
		}
		if ref > uint64(typeXmlText) {
			return content{}, 0, fmt.Errorf("%w: unknown type ref %d", ErrMalformed, ref)
		}
		t := newTypeBase(typeKind(ref))
		if t.kind == typeXmlElement || t.kind == typeXmlHook {
			if t.nodeName, err = d.readVarString(); err != nil {
				return content{}, 0, err
			}
		}
		return content{kind: kindType, ext: &contentExt{typ: t}}, 1, nil
	case kindAny:
		n, err := d.readCount(1)
		if err != nil {
			return content{}, 0, err
		}
		x := &contentExt{vals: make([]any, n), raw: make([][]byte, n)}
		for i := 0; i < n; i++ {
			start := d.pos
			if x.vals[i], err = d.anyValue(); err != nil {
				return content{}, 0, err
			}
			x.raw[i] = d.own(d.buf[start:d.pos])
		}
		return checkNonEmpty(content{kind: kindAny, ext: x}, n)
	case kindDoc:
		guid, err := d.readVarString()
		if err != nil {
			return content{}, 0, err
		}
		start := d.pos
		opts, err := d.anyValue()
		if err != nil {
			return content{}, 0, err
		}
		raw := d.own(d.buf[start:d.pos])
		if raw[0] == anyTagNull || raw[0] == anyTagUndefined {
			// Yjs reads opts.shouldLoad and throws.
			return content{}, 0, fmt.Errorf("%w: subdocument options are null or undefined", ErrMalformed)
		}
		return content{kind: kindDoc, ext: &contentExt{contentMore: &contentMore{key: guid, val: opts, rawJSON: raw}}}, 1, nil
	}
	return content{}, 0, fmt.Errorf("%w: unknown content ref %d", ErrMalformed, kind)
}

func checkNonEmpty(c content, n int) (content, int, error) {
	if n == 0 {
		return content{}, 0, fmt.Errorf("%w: empty content", ErrMalformed)
	}
	return c, n, nil
}

// values returns the user-visible values of c (Yjs getContent).
func (c *content) values() []any {
	switch c.kind {
	case kindAny, kindJSON:
		return c.ext.vals
	case kindBinary:
		return []any{c.ext.bin}
	case kindEmbed:
		return []any{c.ext.val}
	case kindType:
		return []any{c.ext.typ.public()}
	case kindDoc:
		return []any{c.ext.subdoc()}
	case kindString:
		return []any{string(c.str)}
	}
	return nil
}

// lastValue returns the value a map entry shows (Yjs content[length-1]).
func (c *content) lastValue() any {
	switch c.kind {
	case kindAny, kindJSON:
		return c.ext.vals[len(c.ext.vals)-1]
	case kindString:
		// A map value stored as a string item shows its last UTF-16 code
		// unit: of a character outside the BMP, a lone low surrogate,
		// which Go strings hold as U+FFFD (as the list path does).
		r, _ := utf8.DecodeLastRune(c.str)
		if r > 0xFFFF {
			r = utf8.RuneError
		}
		return string(r)
	case kindType: // the usual nested Y.Map or Y.Text: no slice for one value
		return c.ext.typ.public()
	}
	v := c.values()
	if len(v) == 0 {
		return Undefined // e.g. a format or deleted content under a map key
	}
	return v[len(v)-1]
}
