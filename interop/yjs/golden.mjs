// Generates yaps/yjs/testdata/golden.json: updates written by real Yjs that
// the Go engine must decode to the same JSON and re-encode byte for byte.
//
//   cd interop && node yjs/golden.mjs
//
// Each case holds the full update, the incremental updates of every
// transaction, Yjs's mergeUpdates/diffUpdate/encodeStateVectorFromUpdate
// results, Y.parseUpdateMeta of the full, each incremental and the diff
// update, the toJSON view of every root, and (for single-client cases)
// the scripted local operations so Go can replay them and compare bytes.
import * as Y from 'yjs'
import fs from 'fs'
import path from 'path'
import { fileURLToPath } from 'url'

const here = path.dirname(fileURLToPath(import.meta.url))
// GOLDEN_OUT and GOLDEN_PEER_SEEDS allow wider local sweeps without
// touching the checked-in file.
const out = process.env.GOLDEN_OUT || path.join(here, '..', '..', 'yaps', 'yjs', 'testdata', 'golden.json')
const peerSeeds = Number(process.env.GOLDEN_PEER_SEEDS || 3)

const b64 = (u) => Buffer.from(u).toString('base64')

// meta is Y.parseUpdateMeta as plain JSON: {from, to}, each client -> clock.
const meta = (u) => {
  const { from, to } = Y.parseUpdateMeta(u)
  return { from: Object.fromEntries(from), to: Object.fromEntries(to) }
}

// view converts toJSON output to plain JSON: binary becomes {$bin: base64}.
const view = (v) => {
  if (v instanceof Uint8Array) return { $bin: b64(v) }
  if (Array.isArray(v)) return v.map(view)
  if (v instanceof Y.Doc) return { $doc: v.guid }
  if (v !== null && typeof v === 'object') {
    const o = {}
    for (const k of Object.keys(v)) o[k] = view(v[k])
    return o
  }
  if (v === undefined) return null
  return v
}

const getRoot = (doc, name, kind) => {
  switch (kind) {
    case 'map': return doc.getMap(name)
    case 'array': return doc.getArray(name)
    case 'text': return doc.getText(name)
    case 'xml': return doc.getXmlFragment(name)
  }
}

// buildXml turns {name, attrs, children} or a string into prelim XML nodes.
const buildXml = (spec) => {
  if (typeof spec === 'string') return new Y.XmlText(spec)
  const el = new Y.XmlElement(spec.name)
  for (const [k, v] of Object.entries(spec.attrs || {})) el.setAttribute(k, v)
  el.insert(0, (spec.children || []).map(buildXml))
  return el
}

// buildType turns {map: {...}} / {array: [...]} / {text: "..."} into prelim
// types; other values are plain JSON.
const buildType = (spec) => {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return spec
  if ('map' in spec) {
    const m = new Y.Map()
    for (const [k, v] of Object.entries(spec.map)) m.set(k, buildType(v))
    return m
  }
  if ('array' in spec) {
    const a = new Y.Array()
    a.insert(0, spec.array.map(buildType))
    return a
  }
  if ('text' in spec) return new Y.Text(spec.text)
  return spec
}

// runOps applies scripted operations, one transaction each.
const runOps = (doc, roots, ops) => {
  for (const op of ops) {
    // Yjs mutates attribute objects it is given; keep the recorded op pristine
    const [kind, name, ...args] = structuredClone(op)
    const t = getRoot(doc, name, roots[name])
    doc.transact(() => {
      switch (kind) {
        case 'text.insert': t.insert(args[0], args[1], args[2] ?? undefined); break
        case 'text.delete': t.delete(args[0], args[1]); break
        case 'text.format': t.format(args[0], args[1], args[2]); break
        case 'text.embed': t.insertEmbed(args[0], args[1], args[2] ?? undefined); break
        case 'text.applyDelta': t.applyDelta(args[0]); break
        case 'xml.insert': t.insert(args[0], args[1].map(buildXml)); break
        case 'xml.delete': t.delete(args[0], args[1]); break
        case 'map.setType': t.set(args[0], buildType(args[1])); break
        case 'array.insertType': t.insert(args[0], [buildType(args[1])]); break
        case 'map.set': t.set(args[0], args[1]); break
        case 'map.delete': t.delete(args[0]); break
        case 'array.insert': t.insert(args[0], args[1]); break
        case 'array.delete': t.delete(args[0], args[1]); break
        default: throw new Error('unknown op ' + kind)
      }
    })
  }
}

const cases = []

const record = (name, doc, roots, updates, extra = {}) => {
  const full = Y.encodeStateAsUpdate(doc)
  const json = {}
  for (const [n, kind] of Object.entries(roots)) {
    const t = getRoot(doc, n, kind)
    json[n] = view(t.toJSON())
  }
  const c = {
    name,
    roots,
    full: b64(full),
    updates: updates.map(b64),
    json,
    stateVectorFromUpdate: b64(Y.encodeStateVectorFromUpdate(full)),
    meta: [full, ...updates].map(meta),
    ...extra
  }
  if (updates.length > 1) {
    c.merged = b64(Y.mergeUpdates(updates))
    const half = Y.mergeUpdates(updates.slice(0, Math.floor(updates.length / 2)))
    const sv = Y.encodeStateVectorFromUpdate(half)
    c.diffStateVector = b64(sv)
    const diff = Y.diffUpdate(full, sv)
    c.diff = b64(diff)
    c.meta.push(meta(diff))
    c.mergedDiff = b64(Y.diffUpdate(Y.mergeUpdates(updates), sv))
  }
  cases.push(c)
}

const scripted = (name, roots, ops, opts = {}) => {
  const doc = new Y.Doc({ gc: opts.gc ?? true })
  doc.clientID = opts.clientID ?? 42
  const updates = []
  doc.on('update', (u) => updates.push(u))
  for (const [n, kind] of Object.entries(roots)) getRoot(doc, n, kind)
  runOps(doc, roots, ops)
  record(name, doc, roots, updates, { ops, clientID: doc.clientID, gc: opts.gc ?? true })
}

scripted('map-values', { m: 'map' }, [
  ['map.set', 'm', 'null', null],
  ['map.set', 'm', 'true', true],
  ['map.set', 'm', 'false', false],
  ['map.set', 'm', 'int', 42],
  ['map.set', 'm', 'neg', -7],
  ['map.set', 'm', 'big', 2 ** 40],
  ['map.set', 'm', 'float', 1.5],
  ['map.set', 'm', 'double', 0.1],
  ['map.set', 'm', 'str', 'héllo 🌍'],
  ['map.set', 'm', 'arr', [1, 'two', [3], { four: 4 }]],
  ['map.set', 'm', 'obj', { a: 1, b: [true, null], c: { d: 'e' } }],
  ['map.set', 'm', 'int', 43],
  ['map.delete', 'm', 'false'],
  ['map.set', 'm', '', 'empty key']
])

scripted('array-ops', { a: 'array' }, [
  ['array.insert', 'a', 0, [1, 2, 3]],
  ['array.insert', 'a', 1, ['x', 'y']],
  ['array.insert', 'a', 5, [{ k: 'v' }]],
  ['array.delete', 'a', 2, 2],
  ['array.insert', 'a', 0, [null, false]],
  ['array.delete', 'a', 0, 1],
  ['array.insert', 'a', 3, [[1, 2], 3.25]]
])

scripted('text-typing', { t: 'text' }, [
  ['text.insert', 't', 0, 'Hello'],
  ['text.insert', 't', 5, ' World'],
  ['text.insert', 't', 5, ','],
  ['text.delete', 't', 0, 1],
  ['text.insert', 't', 0, 'h'],
  ['text.delete', 't', 3, 4],
  ['text.insert', 't', 11, '!!'],
  ['text.delete', 't', 11, 1]
])

scripted('text-format', { t: 'text' }, [
  ['text.insert', 't', 0, 'Hello World'],
  ['text.format', 't', 0, 5, { bold: true }],
  ['text.format', 't', 3, 5, { italic: true }],
  ['text.insert', 't', 2, 'XX', { bold: true, color: 'red' }],
  ['text.insert', 't', 6, 'plain', {}],
  ['text.insert', 't', 1, 'inh'],
  ['text.embed', 't', 4, { image: 'a.png' }, { alt: 'x' }],
  ['text.format', 't', 0, 3, { bold: null }],
  ['text.delete', 't', 5, 4],
  ['text.format', 't', 0, 30, { italic: null }],
  ['text.insert', 't', 0, 'A', { link: { href: 'x' } }],
  ['text.format', 't', 0, 1, { link: { href: 'y' } }]
])

scripted('text-apply-delta', { t: 'text' }, [
  ['text.applyDelta', 't', [{ insert: 'Hello ' }, { insert: 'World', attributes: { bold: true } }, { insert: { image: 'x' } }]],
  ['text.applyDelta', 't', [{ retain: 2 }, { delete: 2 }, { retain: 4, attributes: { italic: true, bold: null } }, { insert: '!', attributes: { color: 'red' } }]],
  ['text.applyDelta', 't', [{ retain: 1, attributes: { link: 'x' } }, { retain: 20, attributes: { bold: true } }]]
])

scripted('xml-edits', { x: 'xml' }, [
  ['xml.insert', 'x', 0, [{ name: 'p', attrs: { class: 'a', id: 'p1' }, children: ['hello ', { name: 'b', children: ['bold'] }] }]],
  ['xml.insert', 'x', 1, ['tail', { name: 'ul', children: [{ name: 'li', attrs: { n: '1' } }, { name: 'li', attrs: { n: '2' }, children: ['two'] }] }]],
  ['xml.delete', 'x', 1, 1],
  ['xml.insert', 'x', 0, [{ name: 'h1', children: ['title'] }]]
])

scripted('nested-prelim', { m: 'map', a: 'array' }, [
  ['map.setType', 'm', 'doc', { map: { a: 1, list: { array: [1, { text: 'in array' }, { map: { deep: { text: 'deep' } } }] }, title: { text: 'Title' } } }],
  ['array.insertType', 'a', 0, { map: { b: 2, c: { array: ['x'] } } }],
  ['array.insertType', 'a', 0, { text: 'first' }],
  ['map.setType', 'm', 'doc', { array: [{ map: {} }, { text: '' }] }]
])

scripted('text-unicode', { t: 'text' }, [
  ['text.insert', 't', 0, 'a😀b🎉c'],
  ['text.insert', 't', 3, 'ü'],
  ['text.delete', 't', 2, 1],
  ['text.insert', 't', 0, '日本語'],
  ['text.delete', 't', 4, 3]
])

scripted('nogc', { t: 'text', m: 'map' }, [
  ['text.insert', 't', 0, 'abcdef'],
  ['text.delete', 't', 1, 3],
  ['map.set', 'm', 'k', 1],
  ['map.set', 'm', 'k', 2],
  ['map.delete', 'm', 'k']
], { gc: false })

// random scripted edits (deterministic PRNG): Go must produce the same
// bytes for every single update, formatting included
const prng = (seed) => () => {
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
}
const randomOps = (seed, n) => {
  const rnd = prng(seed)
  const pick = (a) => a[Math.floor(rnd() * a.length)]
  const ops = []
  let textLen = 0
  let arrLen = 0
  const attrs = () => {
    const keys = ['bold', 'color', 'italic', 'link'].filter(() => rnd() < 0.4)
    const o = {}
    for (const k of keys) o[k] = pick([true, null, 'red', 'blue', 3, { href: 'x' }])
    return o
  }
  for (let i = 0; i < n; i++) {
    const r = rnd()
    if (r < 0.35 || textLen === 0) {
      const s = pick(['a', 'bc', 'héllo', 'x y z', '日本', '\n'])
      ops.push(['text.insert', 't', Math.floor(rnd() * (textLen + 1)), s, rnd() < 0.4 ? attrs() : null])
      textLen += s.length
    } else if (r < 0.5) {
      const i0 = Math.floor(rnd() * textLen)
      const len = 1 + Math.floor(rnd() * Math.min(4, textLen - i0))
      ops.push(['text.delete', 't', i0, len])
      textLen -= len
    } else if (r < 0.65) {
      const i0 = Math.floor(rnd() * textLen)
      const len = 1 + Math.floor(rnd() * (textLen - i0))
      ops.push(['text.format', 't', i0, len, attrs()])
    } else if (r < 0.7) {
      ops.push(['text.embed', 't', Math.floor(rnd() * (textLen + 1)), { image: pick(['a.png', 'b.png']) }, rnd() < 0.5 ? attrs() : null])
      textLen += 1
    } else if (r < 0.82) {
      const vals = [pick([1, -2, 2.5, 'v', null, true, [1, 'x'], { k: 'v', n: 1 }])]
      if (rnd() < 0.5) vals.push(pick([7, 'w', false]))
      ops.push(['array.insert', 'a', Math.floor(rnd() * (arrLen + 1)), vals])
      arrLen += vals.length
    } else if (r < 0.88 && arrLen > 0) {
      const i0 = Math.floor(rnd() * arrLen)
      const len = 1 + Math.floor(rnd() * Math.min(3, arrLen - i0))
      ops.push(['array.delete', 'a', i0, len])
      arrLen -= len
    } else if (r < 0.96) {
      ops.push(['map.set', 'm', pick(['a', 'b', 'c', 'd']), pick([1, 'two', 3.5, null, [1], { x: 1 }])])
    } else {
      ops.push(['map.delete', 'm', pick(['a', 'b', 'c', 'd'])])
    }
  }
  return ops
}
for (let seed = 1; seed <= Number(process.env.GOLDEN_RANDOM_SEEDS || 8); seed++) {
  scripted('random-' + seed, { t: 'text', a: 'array', m: 'map' }, randomOps(seed, 300), { clientID: 1000 + seed, gc: seed % 4 !== 0 })
}

// several peers editing and syncing: every update each peer emits (its own
// edits, integrations of remote updates and Yjs's formatting cleanups) must
// come out byte for byte the same in Go
const multiPeer = (seed, peers, steps) => {
  const rnd = prng(seed)
  const pick = (a) => a[Math.floor(rnd() * a.length)]
  const docs = []
  const updates = []
  for (let i = 0; i < peers; i++) {
    const d = new Y.Doc()
    d.clientID = 500 + i
    d.getText('t'); d.getArray('a'); d.getMap('m')
    const list = []
    d.on('update', (u) => list.push(b64(u)))
    updates.push(list)
    docs.push(d)
  }
  const steps_ = []
  const attrs = () => {
    const o = {}
    for (const k of ['b', 'i']) if (rnd() < 0.5) o[k] = pick([true, null, 'x'])
    return o
  }
  for (let s = 0; s < steps; s++) {
    if (rnd() < 0.15) {
      const a = Math.floor(rnd() * peers)
      const b = Math.floor(rnd() * peers)
      if (a !== b) {
        steps_.push(['sync', a, b])
        Y.applyUpdate(docs[b], Y.encodeStateAsUpdate(docs[a], Y.encodeStateVector(docs[b])))
      }
      continue
    }
    const p = Math.floor(rnd() * peers)
    const d = docs[p]
    const t = d.getText('t'); const arr = d.getArray('a'); const m = d.getMap('m')
    const r = rnd()
    let op
    if (r < 0.35 || t.length === 0) op = ['text.insert', 't', Math.floor(rnd() * (t.length + 1)), pick(['a', 'bc', 'ü', 'xyz']), rnd() < 0.3 ? attrs() : null]
    else if (r < 0.5) { const i = Math.floor(rnd() * t.length); op = ['text.delete', 't', i, 1 + Math.floor(rnd() * Math.min(3, t.length - i))] }
    else if (r < 0.65) { const i = Math.floor(rnd() * t.length); op = ['text.format', 't', i, 1 + Math.floor(rnd() * (t.length - i)), attrs()] }
    else if (r < 0.8) op = ['array.insert', 'a', Math.floor(rnd() * (arr.length + 1)), [pick([1, 'x', null, { k: 1 }])]]
    else if (r < 0.87 && arr.length > 0) op = ['array.delete', 'a', Math.floor(rnd() * arr.length), 1]
    else op = ['map.set', 'm', pick(['a', 'b']), pick([1, 'v', [1]])]
    steps_.push(['op', p, op])
    runOps(d, { t: 'text', a: 'array', m: 'map' }, [op])
  }
  for (let a = 0; a < peers; a++) for (let b = 0; b < peers; b++) if (a !== b) {
    steps_.push(['sync', a, b])
    Y.applyUpdate(docs[b], Y.encodeStateAsUpdate(docs[a], Y.encodeStateVector(docs[b])))
  }
  const json = {}
  for (const [n, kind] of Object.entries({ t: 'text', a: 'array', m: 'map' })) json[n] = view(getRoot(docs[0], n, kind).toJSON())
  const full = Y.encodeStateAsUpdate(docs[0])
  cases.push({
    name: 'multi-peer-' + seed,
    roots: { t: 'text', a: 'array', m: 'map' },
    full: b64(full),
    updates: updates[0].map((u) => Buffer.from(u, 'base64').toString('base64')),
    json,
    stateVectorFromUpdate: b64(Y.encodeStateVectorFromUpdate(full)),
    meta: [full, ...updates[0].map((u) => Buffer.from(u, 'base64'))].map(meta),
    peers: { clients: docs.map((d) => d.clientID), steps: steps_, updates }
  })
}
for (let seed = 11; seed < 11 + peerSeeds; seed++) multiPeer(seed, Number(process.env.GOLDEN_PEERS || 3), Number(process.env.GOLDEN_PEER_STEPS || 250))

// nested types, XML and subdocuments (not scripted: they use prelim types)
{
  const doc = new Y.Doc()
  doc.clientID = 7
  const updates = []
  doc.on('update', (u) => updates.push(u))
  const m = doc.getMap('m')
  doc.transact(() => {
    const inner = new Y.Map()
    inner.set('x', 1)
    inner.set('bin', new Uint8Array([1, 2, 3]))
    m.set('inner', inner)
    const arr = new Y.Array()
    arr.insert(0, ['a', new Uint8Array([9])])
    m.set('arr', arr)
    m.set('text', new Y.Text('nested text'))
  })
  doc.transact(() => {
    m.get('arr').push([new Y.Map()])
    m.get('arr').get(2).set('deep', 'value')
    m.get('text').format(0, 6, { b: true })
  })
  doc.transact(() => { m.set('gone', new Y.Array()); m.get('gone').insert(0, [1, 2, 3]) })
  doc.transact(() => { m.delete('gone') })
  doc.transact(() => { m.set('sub', new Y.Doc({ guid: 'sub-guid' })) })
  doc.transact(() => { m.set('bytes', new Uint8Array([0, 255])) })
  const x = doc.getXmlFragment('x')
  doc.transact(() => {
    const el = new Y.XmlElement('P')
    el.setAttribute('class', 'c1')
    el.setAttribute('id', 'p1')
    const t = new Y.XmlText('some text')
    el.insert(0, [t])
    x.insert(0, [el, new Y.XmlText('tail')])
  })
  doc.transact(() => {
    x.get(0).get(0).format(0, 4, { strong: {} })
    x.get(0).insert(1, [new Y.XmlElement('br')])
  })
  record('nested-xml', doc, { m: 'map', x: 'xml' }, updates)
}

// three clients editing concurrently at the same positions, then syncing
{
  const docs = [1, 2, 3].map((id) => { const d = new Y.Doc(); d.clientID = id; return d })
  const updates = []
  const sync = () => {
    for (const a of docs) for (const b of docs) if (a !== b) Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)))
  }
  docs.forEach((d) => d.on('update', (u) => updates.push(u)))
  docs[0].getText('t').insert(0, 'base')
  docs[0].getArray('a').insert(0, ['base'])
  sync()
  const n = updates.length
  docs.forEach((d, i) => {
    d.getText('t').insert(2, 'c' + (i + 1))
    d.getText('t').insert(0, '<' + (i + 1))
    d.getArray('a').insert(1, [i + 1])
    d.getArray('a').insert(0, [-(i + 1)])
    d.getMap('m').set('k', i + 1)
  })
  docs[1].getText('t').delete(0, 3)
  docs[2].getText('t').format(0, 4, { em: true })
  const own = updates.slice(n)
  sync()
  sync()
  record('concurrent', docs[0], { t: 'text', a: 'array', m: 'map' }, updates.filter((u, i) => i < n || own.includes(u)))
}

fs.mkdirSync(path.dirname(out), { recursive: true })
fs.writeFileSync(out, JSON.stringify({ yjs: JSON.parse(fs.readFileSync(path.join(here, '..', 'node_modules', 'yjs', 'package.json'))).version, cases }) + '\n')
console.log('wrote', out, cases.length, 'cases')
