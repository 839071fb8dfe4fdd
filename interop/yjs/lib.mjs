// Shared helpers for the Yaps <-> Yjs interop scripts.
//
// JSON normalisation (the contract with the Go tests, see yaps/yjs/interop_test.go):
//   - Uint8Array            -> {"$bin": "<standard base64>"}
//   - BigInt                -> {"$bigint": "<decimal digits>"} (exact; JSON.stringify
//                              cannot print BigInts, and a bare literal would be
//                              mistaken for a double above 2^53)
//   - other numbers         -> JSON numbers (doubles); consumers compare them
//                              numerically (an integral float equals the same integer)
//   - Y types               -> their toJSON() (Y.Text -> string, Y.Xml* -> XML string)
//   - subdocuments (Y.Doc)  -> {"$doc": "<guid>"}
//   - object keys           -> sorted, so the output is byte-stable
// Text deltas use the same rules for inserts, embeds and attribute values.
import * as Y from 'yjs'
import fs from 'node:fs'
import path from 'node:path'

// ---------- seeded PRNG (mulberry32 over a 32-bit state, mixed from the seed) ----------

export function makeRng (seed) {
  let s = (Number(seed) >>> 0) ^ 0x9e3779b9
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const rng = {
    next,
    int: (n) => Math.floor(next() * n), // [0, n)
    range: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), // [lo, hi]
    bool: (p = 0.5) => next() < p,
    pick: (xs) => xs[Math.floor(next() * xs.length)],
    shuffle: (xs) => {
      for (let i = xs.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [xs[i], xs[j]] = [xs[j], xs[i]]
      }
      return xs
    }
  }
  return rng
}

// ---------- normalisation ----------

export function normalize (v) {
  if (v === undefined) return null
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v
  if (typeof v === 'number') return v
  if (typeof v === 'bigint') return { $bigint: v.toString() }
  if (v instanceof Uint8Array) return { $bin: Buffer.from(v).toString('base64') }
  if (v instanceof Y.AbstractType) return normalize(v.toJSON())
  if (v instanceof Y.Doc) return { $doc: v.guid } // a subdocument (its content is not loaded)
  if (Array.isArray(v)) return v.map(normalize)
  if (typeof v === 'object') {
    const out = {}
    for (const k of Object.keys(v).sort()) {
      if (v[k] === undefined) continue
      out[k] = normalize(v[k])
    }
    return out
  }
  throw new Error('cannot normalize ' + typeof v)
}

// stringify writes normalised JSON.
export function stringify (v) {
  return JSON.stringify(normalize(v))
}

export function normDelta (delta) {
  return delta.map((op) => {
    const o = { insert: op.insert instanceof Y.AbstractType ? { $type: op.insert.toJSON() } : op.insert }
    if (op.attributes && Object.keys(op.attributes).length > 0) o.attributes = op.attributes
    return o
  })
}

// ---------- roots ----------

export const ROOT_TYPES = ['map', 'array', 'text', 'xmlfragment']

export function getRoot (doc, name, type) {
  switch (type) {
    case 'map': return doc.getMap(name)
    case 'array': return doc.getArray(name)
    case 'text': return doc.getText(name)
    case 'xmlfragment': return doc.getXmlFragment(name)
    default: throw new Error('unknown root type ' + type)
  }
}

// inferRoots guesses the type of every root a doc has seen but nobody asked for
// with a typed getter (as after applying a foreign update).
export function inferRoots (doc) {
  const roots = {}
  doc.share.forEach((t, name) => {
    if (t instanceof Y.Map) roots[name] = 'map'
    else if (t instanceof Y.Array) roots[name] = 'array'
    else if (t instanceof Y.Text) roots[name] = 'text'
    else if (t instanceof Y.XmlFragment) roots[name] = 'xmlfragment'
    else if (t._map.size > 0 && t._start === null) roots[name] = 'map'
    else {
      // text if any text content; xmlfragment if only XML children; else array
      let text = false
      let xml = 0
      let other = 0
      for (let it = t._start; it !== null; it = it.right) {
        const c = it.content
        if (c instanceof Y.ContentString || c instanceof Y.ContentFormat || c instanceof Y.ContentEmbed) text = true
        else if (c instanceof Y.ContentType && (c.type instanceof Y.XmlElement || c.type instanceof Y.XmlText)) xml++
        else if (!(c instanceof Y.ContentDeleted)) other++
      }
      const type = text ? 'text' : (xml > 0 && other === 0) ? 'xmlfragment' : (t._map.size > 0 && t._start === null) ? 'map' : 'array'
      roots[name] = type
    }
  })
  return roots
}

export function parseRootsArg (s) {
  const roots = {}
  if (!s) return roots
  for (const part of s.split(',')) {
    if (!part) continue
    const i = part.lastIndexOf(':')
    if (i < 0) throw new Error('bad --roots entry ' + part + ' (want name:type)')
    roots[part.slice(0, i)] = part.slice(i + 1)
  }
  return roots
}

// snapshot returns the normalised view of doc used by every comparison.
export function snapshot (doc, roots) {
  const all = { ...inferRoots(doc), ...roots }
  const json = {}
  const deltas = {}
  for (const name of Object.keys(all).sort()) {
    const t = getRoot(doc, name, all[name])
    json[name] = t.toJSON()
    if (all[name] === 'text') deltas[name] = normDelta(t.toDelta())
  }
  const sv = {}
  for (const [client, clock] of Y.decodeStateVector(Y.encodeStateVector(doc))) sv[String(client)] = clock
  const pending = doc.store.pendingStructs !== null || doc.store.pendingDs !== null
  return { roots: all, json, deltas, sv, pending }
}

export const b64 = (u8) => Buffer.from(u8).toString('base64')
export const unb64 = (s) => new Uint8Array(Buffer.from(s, 'base64'))

export function writeFile (file, data) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, data)
}

// ---------- random values and edits ----------

const WORDS = ['a', 'hello', ' ', 'wörld', '日本語', '😀', 'x\ny', '', 'ab😀cd', 'Ω', '\t', 'zz']
const KEYS = ['k', 'key', 'name', 'ü', '😀', 'a.b', 'x', 'y', 'z', '0']
const FLOATS = [0.5, -2.5, 0.1, 1e21, -1e-7, 3.141592653589793, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 - 1, 1.7976931348623157e308, 5e-324]
const INTS = [0, 1, -1, 127, 128, -64, 2 ** 31 - 1, -(2 ** 31) + 1, 1000000]
const BIGINTS = [0n, 1n, -1n, 9007199254740993n, -9223372036854775808n, 9223372036854775807n, 1234567890123n]

export function randString (rng) {
  let s = ''
  const n = rng.range(1, 3)
  for (let i = 0; i < n; i++) s += rng.pick(WORDS)
  return s || 'q'
}

export function randPrimitive (rng, depth = 0) {
  switch (rng.int(depth > 1 ? 8 : 10)) {
    case 0: return rng.pick(INTS)
    case 1: return rng.pick(FLOATS)
    case 2: return rng.pick(BIGINTS)
    case 3: return rng.bool()
    case 4: return null
    case 5: return randString(rng)
    case 6: return rng.int(1000) - 500
    case 7: return rng.next() * 1000 - 500
    case 8: {
      const o = {}
      const n = rng.int(3)
      for (let i = 0; i < n; i++) o[rng.pick(KEYS)] = randPrimitive(rng, depth + 1)
      return o
    }
    default: {
      const a = []
      const n = rng.int(3)
      for (let i = 0; i < n; i++) a.push(randPrimitive(rng, depth + 1))
      return a
    }
  }
}

function randBinary (rng) {
  const b = new Uint8Array(rng.int(6))
  for (let i = 0; i < b.length; i++) b[i] = rng.int(256)
  return b
}

function randAttrs (rng) {
  if (rng.bool(0.5)) return undefined
  const attrs = {}
  switch (rng.int(4)) {
    case 0: attrs.bold = true; break
    case 1: attrs.italic = true; break
    case 2: attrs.color = rng.pick(['red', 'blue']); break
    default: attrs.bold = null; attrs.size = rng.pick([10, 12.5])
  }
  return attrs
}

function randXmlTextAttrs (rng) {
  if (rng.bool(0.6)) return undefined
  // Only `true` values: Y.XmlText.toString renders attribute objects with for-in,
  // and object-valued formats are compared by identity in Yjs's cleanup.
  return rng.pick([{ b: true }, { i: true }, { u: true }])
}

// randContent is any value a Y.Map / Y.Array can hold, sometimes a fresh Y type.
function randSubdoc (rng) {
  const opts = { guid: 'sub-' + rng.int(1e6) }
  switch (rng.int(4)) {
    case 0: opts.gc = false; break
    case 1: opts.autoLoad = true; break
    case 2: opts.meta = { k: randString(rng) }; break
  }
  return new Y.Doc(opts)
}

function randContent (rng, depth) {
  const r = rng.int(10)
  if (r === 0) return rng.bool(0.2) ? randSubdoc(rng) : randBinary(rng)
  if (r <= 2 && depth < 4) {
    switch (rng.int(4)) {
      case 0: { const m = new Y.Map(); m.set(rng.pick(KEYS), randPrimitive(rng)); return m }
      case 1: { const a = new Y.Array(); const v = randPrimitive(rng); a.push([typeof v === 'bigint' ? [v] : v]); return a }
      case 2: { const t = new Y.Text(); t.insert(0, randString(rng)); return t }
      default: { const x = new Y.XmlElement(rng.pick(['p', 'div'])); x.setAttribute('id', randString(rng)); return x }
    }
  }
  return randPrimitive(rng)
}

// collectTypes lists every live shared type of a doc (roots and nested).
export function collectTypes (doc, roots) {
  const out = []
  const visit = (t, depth) => {
    out.push({ t, depth })
    if (t instanceof Y.Map || t instanceof Y.XmlElement) {
      t._map.forEach((item) => {
        if (!item.deleted && item.content instanceof Y.ContentType) visit(item.content.type, depth + 1)
      })
    }
    for (let it = t._start; it !== null; it = it.right) {
      if (!it.deleted && it.content instanceof Y.ContentType) visit(it.content.type, depth + 1)
    }
  }
  for (const [name, type] of Object.entries(roots)) visit(getRoot(doc, name, type), 0)
  return out
}

// boundaries lists the UTF-16 offsets of a text that do not split a surrogate pair.
export function boundaries (t) {
  const out = [0]
  let pos = 0
  for (const op of t.toDelta()) {
    if (typeof op.insert === 'string') {
      for (const ch of op.insert) {
        pos += ch.length
        out.push(pos)
      }
    } else {
      pos += 1
      out.push(pos)
    }
  }
  return out
}

// randomEdit performs one random operation on one random live type of doc.
// It must be called inside a transaction.
export function randomEdit (rng, doc, roots) {
  const types = collectTypes(doc, roots)
  const { t, depth } = rng.pick(types)
  if (t instanceof Y.Map) {
    const keys = Array.from(t.keys())
    if (keys.length > 0 && rng.bool(0.25)) t.delete(rng.pick(keys))
    else t.set(rng.pick(KEYS), randContent(rng, depth))
  } else if (t instanceof Y.Array) {
    const len = t.length
    if (len > 0 && rng.bool(0.3)) {
      const i = rng.int(len)
      t.delete(i, Math.min(len - i, rng.range(1, 3)))
    } else {
      const n = rng.range(1, 3)
      const vals = []
      for (let i = 0; i < n; i++) {
        const v = randContent(rng, depth)
        vals.push(typeof v === 'bigint' ? [v] : v) // Y.Array only takes bigints inside JSON values
      }
      t.insert(rng.int(len + 1), vals)
    }
  } else if (t instanceof Y.Text) { // also Y.XmlText
    // Only cut at code point boundaries: Yjs itself replaces half surrogate
    // pairs with U+FFFD, which makes split histories diverge.
    const b = boundaries(t)
    const len = t.length
    const at = () => rng.pick(b)
    const span = (i) => {
      const ends = b.filter((x) => x > i && x <= i + 5)
      return ends.length > 0 ? rng.pick(ends) - i : 0
    }
    const xml = t instanceof Y.XmlText
    const r = rng.int(6)
    if (len > 0 && r <= 1) {
      const i = at()
      const n = span(i)
      if (n > 0) t.delete(i, n)
    } else if (len > 0 && r === 2) {
      const i = at()
      const n = span(i)
      if (n > 0) t.format(i, n, xml ? rng.pick([{ b: true }, { b: null }, { i: true }]) : (randAttrs(rng) || { italic: true }))
    } else if (r === 3 && !xml) {
      t.insertEmbed(at(), rng.pick([{ image: 'a.png' }, { formula: 'e=mc^2', n: 2 }]), randAttrs(rng))
    } else {
      t.insert(at(), randString(rng), xml ? randXmlTextAttrs(rng) : randAttrs(rng))
    }
  } else if (t instanceof Y.XmlElement || t instanceof Y.XmlFragment) {
    const len = t.length
    const r = rng.int(5)
    if (len > 0 && r === 0) {
      const i = rng.int(len)
      t.delete(i, Math.min(len - i, rng.range(1, 2)))
    } else if (t instanceof Y.XmlElement && r === 1) {
      if (rng.bool(0.3) && Object.keys(t.getAttributes()).length > 0) t.removeAttribute(rng.pick(Object.keys(t.getAttributes())))
      else t.setAttribute(rng.pick(['id', 'class', 'data-x']), randString(rng))
    } else if (r === 2 && depth < 4) {
      const el = new Y.XmlElement(rng.pick(['p', 'div', 'span']))
      if (rng.bool()) el.setAttribute('k', randString(rng))
      t.insert(rng.int(len + 1), [el])
    } else {
      const xt = new Y.XmlText()
      xt.insert(0, randString(rng), randXmlTextAttrs(rng))
      t.insert(rng.int(len + 1), [xt])
    }
  } else {
    throw new Error('unexpected type ' + t.constructor.name)
  }
}

// randomTransaction runs 1..maxOps random edits in one transaction.
export function randomTransaction (rng, doc, roots, maxOps = 3) {
  doc.transact(() => {
    const n = rng.range(1, maxOps)
    for (let i = 0; i < n; i++) randomEdit(rng, doc, roots)
  }, 'local')
}

// randomClientID mostly returns 32-bit ids (as Yjs does) and sometimes wider ones
// (up to 2^53-1) so varint encoding of large ids is exercised.
export function randomClientID (rng) {
  if (rng.bool(0.2)) return Math.floor(rng.next() * 2 ** 21) * 2 ** 32 + Math.floor(rng.next() * 2 ** 32)
  return Math.floor(rng.next() * 2 ** 32)
}
