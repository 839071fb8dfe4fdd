// crdt.mjs replays an editing trace (josephg/editing-traces format, gzipped
// JSON: {startContent, endContent, txns: [{patches: [[pos, del, ins], ...]}]})
// into one text type, one transaction per txn, then encodes the state as one
// update and decodes it into a fresh doc. Concurrent traces ("kind":
// "concurrent", txns with parents and agent) are replayed like yaps bench
// crdt does: one doc per agent (client id base+agent), each txn first pulls
// the updates of its missing ancestors, and agent 0's doc finally catches up
// with everything. Prints one JSON line per engine:
//   {"engine":..,"ops":..,"apply_ms":..,"encode_ms":..,"decode_ms":..,"bytes":..,"heap_mb":..,"live_mb":..}
// Memory is JS heap used + external memory (wasm linear memory for ywasm)
// above the baseline before the replay: heap_mb is the peak, sampled every
// 256 transactions and at the end; live_mb is what is still held after the
// replay, measured after a forced GC (run with --expose-gc).
//
//   node --expose-gc bench/crdt.mjs --trace FILE [--engine yjs|ywasm|all] [--out PREFIX] [--client-id N]
//
// --out PREFIX writes PREFIX.<engine>.bin with the encoded update.
// --client-id N fixes the replaying doc's client id (default random), so the
// updates of different engines can be compared byte for byte.
// --check FILE instead decodes a Yjs update (e.g. written by Go) with real Yjs
// and verifies the text "text" equals the trace's endContent.
import * as Y from 'yjs'
import fs from 'node:fs'
import zlib from 'node:zlib'
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'

const require = createRequire(import.meta.url)

const { values } = parseArgs({
  options: {
    trace: { type: 'string' },
    engine: { type: 'string', default: 'all' },
    out: { type: 'string' },
    check: { type: 'string' },
    'client-id': { type: 'string' }

  }
})
if (!values.trace) {
  console.error('usage: node --expose-gc bench/crdt.mjs --trace FILE [--engine yjs|ywasm|all] [--out PREFIX] [--check UPDATE]')
  process.exit(2)
}

const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(values.trace)).toString('utf8'))
const concurrent = trace.kind === 'concurrent'
if (trace.startContent) throw new Error('traces with startContent are not supported')

// Trace positions count Unicode code points. Y.Text counts UTF-16 units, so
// they only agree while no astral character was inserted; otherwise every
// position is converted against a mirror string (slow, but exact).
const hasAstral = (s) => /[\u{10000}-\u{10FFFF}]/u.test(s)
const astral = hasAstral(trace.endContent) || trace.txns.some((t) => t.patches.some((p) => hasAstral(p[2])))
if (astral && concurrent) throw new Error('concurrent traces with characters outside the BMP are not supported')
let ops = 0
for (const t of trace.txns) ops += t.patches.length

// unitTxns returns [pos, del, ins] in UTF-16 units, one array per txn.
function unitTxns () {
  if (!astral) return trace.txns.map((t) => t.patches)
  let mirror = ''
  const cpToUnit = (s, cp) => {
    let u = 0
    for (let i = 0; i < cp; i++) u += s.codePointAt(u) > 0xffff ? 2 : 1
    return u
  }
  return trace.txns.map((t) => t.patches.map(([pos, del, ins]) => {
    const a = cpToUnit(mirror, pos)
    const b = a + cpToUnit(mirror.slice(a), del)
    mirror = mirror.slice(0, a) + ins + mirror.slice(b)
    return [a, b - a, ins]
  }))
}

const clientID = values['client-id'] ? Number(values['client-id']) : 0
const gc = globalThis.gc || (() => {})
const mem = () => { gc(); gc(); return used() }
const used = () => { const m = process.memoryUsage(); return m.heapUsed + m.external }
const ms = (t0) => Math.round((performance.now() - t0) * 100) / 100
const mb = (b) => Math.round((b / (1 << 20)) * 10) / 10

// Engine adapters: the replay code below is shared.
const adapters = {
  yjs: () => ({
    newDoc: (id) => { const d = new Y.Doc(); if (id) d.clientID = id; return d },
    onUpdate: (d, f) => d.on('update', (u) => f(u)),
    edit: (d, patches) => {
      const text = d.getText('text')
      d.transact(() => {
        for (const [pos, del, ins] of patches) {
          if (del > 0) text.delete(pos, del)
          if (ins) text.insert(pos, ins)
        }
      })
    },
    apply: (d, u) => Y.applyUpdate(d, u, 'remote'),
    encode: (d) => Y.encodeStateAsUpdate(d),
    text: (d) => d.getText('text').toString()
  }),
  ywasm: () => {
    const yw = require('ywasm')
    return {
      newDoc: (id) => new yw.YDoc(id ? { clientID: id } : {}),
      onUpdate: (d, f) => d.onUpdate((u) => f(u)),
      edit: (d, patches) => {
        const text = d.getText('text')
        const tx = d.beginTransaction(undefined)
        try {
          for (const [pos, del, ins] of patches) {
            if (del > 0) text.delete(pos, del, tx)
            if (ins) text.insert(pos, ins, undefined, tx)
          }
        } finally {
          tx.free()
        }
      },
      apply: (d, u) => yw.applyUpdate(d, u, undefined),
      encode: (d) => yw.encodeStateAsUpdate(d),
      text: (d) => d.getText('text').toString(undefined)
    }
  }
}

function replaySequential (eng, txns) {
  const doc = eng.newDoc(clientID)
  let peak = 0
  let i = 0
  for (const patches of txns) {
    if ((i++ & 255) === 0) peak = Math.max(peak, used())
    eng.edit(doc, patches)
  }
  return { doc, peak: Math.max(peak, used()) }
}

function replayConcurrent (eng, txns) {
  const base = clientID || 1
  const n = txns.length
  const docs = []
  const have = []
  const updates = new Array(n).fill(null)
  let last = null
  const agentDoc = (a) => {
    if (!docs[a]) {
      docs[a] = eng.newDoc(base + a)
      eng.onUpdate(docs[a], (u) => { last = u })
      have[a] = new Uint8Array(n)
    }
    return docs[a]
  }
  const catchUp = (a, roots) => {
    const seen = have[a]
    const missing = []
    const stack = [...roots]
    while (stack.length > 0) {
      const x = stack.pop()
      if (seen[x]) continue
      seen[x] = 1
      missing.push(x)
      for (const p of trace.txns[x].parents) stack.push(p)
    }
    missing.sort((x, y) => x - y)
    for (const x of missing) if (updates[x]) eng.apply(docs[a], updates[x])
  }
  let peak = 0
  txns.forEach((patches, i) => {
    if ((i & 255) === 0) peak = Math.max(peak, used())
    const a = trace.txns[i].agent
    const d = agentDoc(a)
    catchUp(a, trace.txns[i].parents)
    last = null
    eng.edit(d, patches)
    updates[i] = last
    have[a][i] = 1
  })
  const d = agentDoc(0)
  catchUp(0, txns.map((_, i) => i))
  return { doc: d, peak: Math.max(peak, used()) }
}

function bench (name, txns) {
  const eng = adapters[name]()
  const base = mem()
  let t0 = performance.now()
  const { doc, peak } = (concurrent ? replayConcurrent : replaySequential)(eng, txns)
  const applyMs = ms(t0)
  const heap = mem() - base
  t0 = performance.now()
  const update = eng.encode(doc)
  const encodeMs = ms(t0)
  t0 = performance.now()
  const doc2 = eng.newDoc(0)
  eng.apply(doc2, update)
  const got = eng.text(doc2)
  const decodeMs = ms(t0)
  if (eng.text(doc) !== trace.endContent) throw new Error(name + ': replayed text differs from endContent')
  if (got !== trace.endContent) throw new Error(name + ': decoded text differs from endContent')
  return { update, res: { engine: name, ops, apply_ms: applyMs, encode_ms: encodeMs, decode_ms: decodeMs, bytes: update.length, heap_mb: mb(peak - base), live_mb: mb(heap) } }
}

if (values.check) {
  const update = new Uint8Array(fs.readFileSync(values.check))
  const t0 = performance.now()
  const doc = new Y.Doc()
  Y.applyUpdate(doc, update)
  const got = doc.getText('text').toString()
  const ok = got === trace.endContent
  console.log(JSON.stringify({ engine: 'yjs-check', file: values.check, bytes: update.length, decode_ms: ms(t0), ok }))
  process.exit(ok ? 0 : 1)
}

const txns = unitTxns()
const engines = values.engine === 'all' ? ['yjs', 'ywasm'] : values.engine.split(',')
for (const e of engines) {
  if (!adapters[e]) throw new Error('unknown engine ' + e)
  const { update, res } = bench(e, txns)
  if (values.out) fs.writeFileSync(`${values.out}.${e}.bin`, update)
  console.log(JSON.stringify(res))
}
