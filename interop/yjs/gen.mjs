// gen.mjs writes seeded random Yjs interop cases.
//
//   node yjs/gen.mjs --out DIR [--seed 1] [--cases 10] [--steps 60]
//
// Each case is DIR/case-NNN/ holding
//   updates/NNNN.bin  every update emitted by a local transaction, in the order produced
//   merged.bin        Y.mergeUpdates(updates)
//   full.bin          Y.encodeStateAsUpdate of the fully synced document
//   peer-K.bin        Y.encodeStateAsUpdate of peer K before the final sync (partial state)
//   expected.json     {seed, roots: {name: type}, json, deltas, sv, peers: [{sv, json, deltas}]}
// json/deltas follow the normalisation rules in lib.mjs.
import * as Y from 'yjs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { makeRng, randomClientID, randomTransaction, snapshot, stringify, writeFile, ROOT_TYPES } from './lib.mjs'

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    seed: { type: 'string', default: '1' },
    cases: { type: 'string', default: '10' },
    steps: { type: 'string', default: '60' }
  }
})
if (!values.out) {
  console.error('usage: node yjs/gen.mjs --out DIR [--seed N] [--cases N] [--steps N]')
  process.exit(2)
}

const ROOT_NAMES = { map: ['m', 'meta'], array: ['a', 'list'], text: ['t', 'body'], xmlfragment: ['x', 'prose'] }

function genCase (seed, steps) {
  const rng = makeRng(seed)
  // roots: one of each type, sometimes two of a kind, names vary with the seed
  const roots = {}
  for (const type of ROOT_TYPES) {
    roots[rng.pick(ROOT_NAMES[type])] = type
    if (rng.bool(0.2)) roots[type + '2 ü'] = type
  }
  const nPeers = rng.range(2, 5)
  const ids = new Set()
  const peers = []
  while (peers.length < nPeers) {
    const id = randomClientID(rng)
    if (ids.has(id)) continue
    ids.add(id)
    const doc = new Y.Doc({ gc: rng.bool(0.8) })
    doc.clientID = id
    peers.push(doc)
  }
  const updates = []
  for (const doc of peers) {
    doc.on('update', (u, origin) => {
      if (origin !== 'remote') updates.push(u) // includes Yjs's own formatting-cleanup transactions
    })
  }
  const sync = (from, to) => {
    const diff = Y.encodeStateAsUpdate(from, Y.encodeStateVector(to))
    Y.applyUpdate(to, diff, 'remote')
  }
  for (let s = 0; s < steps; s++) {
    const doc = rng.pick(peers)
    randomTransaction(rng, doc, roots, 4)
    if (rng.bool(0.35)) {
      const a = rng.pick(peers)
      const b = rng.pick(peers)
      if (a !== b) sync(a, b)
    }
  }
  const peerStates = peers.map((d) => ({ update: Y.encodeStateAsUpdate(d), snap: snapshot(d, roots) }))
  // full sync: everybody gets everything
  // (repeat: applying a remote update can make Yjs emit formatting-cleanup ops)
  const svKey = (d) => stringify(snapshot(d, roots).sv)
  for (let round = 0; round < 10; round++) {
    for (const a of peers) for (const b of peers) if (a !== b) sync(a, b)
    if (peers.every((d) => svKey(d) === svKey(peers[0]))) break
  }
  const ref = new Y.Doc()
  // The reference integrates only: no formatting cleanup of its own (a Yjs doc
  // normally deletes redundant format marks after remote changes, as new local ops).
  ref.on('afterTransaction', (tr) => { tr._needFormattingCleanup = false })
  let refCleanups = 0
  ref.on('update', (u, origin) => { if (origin !== 'remote') refCleanups++ })
  for (const u of updates) Y.applyUpdate(ref, u, 'remote')
  const snap = snapshot(ref, roots)
  if (refCleanups > 0) throw new Error(`seed ${seed}: reference doc made changes of its own`)
  for (const d of peers) {
    const got = stringify(snapshot(d, roots).json)
    if (got !== stringify(snap.json)) throw new Error(`seed ${seed}: peers diverged after full sync:\n${got}\n${stringify(snap.json)}`)
  }
  return { refCleanups, roots, updates, merged: Y.mergeUpdates(updates), full: Y.encodeStateAsUpdate(ref), snap, peerStates }
}

const base = Number(values.seed)
const n = Number(values.cases)
for (let i = 0; i < n; i++) {
  const seed = base + i
  const c = genCase(seed, Number(values.steps))
  const dir = path.join(values.out, `case-${String(i).padStart(3, '0')}`)
  c.updates.forEach((u, j) => writeFile(path.join(dir, 'updates', `${String(j).padStart(4, '0')}.bin`), u))
  writeFile(path.join(dir, 'merged.bin'), c.merged)
  writeFile(path.join(dir, 'full.bin'), c.full)
  c.peerStates.forEach((p, k) => writeFile(path.join(dir, `peer-${k}.bin`), p.update))
  writeFile(path.join(dir, 'expected.json'), stringify({
    seed,
    roots: c.roots,
    json: c.snap.json,
    deltas: c.snap.deltas,
    sv: c.snap.sv,
    updates: c.updates.length,
    peers: c.peerStates.map((p) => ({ json: p.snap.json, deltas: p.snap.deltas, sv: p.snap.sv }))
  }) + '\n')
}
console.log(stringify({ cases: n, out: values.out }))
