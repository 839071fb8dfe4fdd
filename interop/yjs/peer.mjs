// peer.mjs hosts any number of real Yjs peers behind a line-based JSON protocol
// on stdin/stdout, for the mixed Go/Yjs convergence tests. One request per line,
// one response per line, strictly in order:
//
//   {"op":"open","peer":"y1","client":123,"seed":7,"gc":true,"roots":{"m":"map",...}}
//   {"op":"edit","peer":"y1","n":3}           n random transactions
//   {"op":"apply","peer":"y1","update":"<b64>"}
//   {"op":"state","peer":"y1"}                -> snapshot + "update": full state (b64)
//   {"op":"close","peer":"y1"}
//   {"op":"reencode","update":"<b64>"}        -> "update": a fresh doc's
//                                              encodeStateAsUpdate after applying it
//
// Every response is {"ok":true,...} or {"ok":false,"error":"..."}. "edit" and
// "apply" also return "updates": the b64 updates this peer produced since the
// last response (its own edits, plus formatting-cleanup ops Yjs may emit while
// applying remote changes); the caller must deliver them to the other peers.
import * as Y from 'yjs'
import readline from 'node:readline'
import { b64, makeRng, randomTransaction, snapshot, stringify, unb64 } from './lib.mjs'

const peers = new Map()

function handle (req) {
  if (req.op === 'reencode') {
    const doc = new Y.Doc()
    Y.applyUpdate(doc, unb64(req.update), 'remote')
    return { update: b64(Y.encodeStateAsUpdate(doc)) }
  }
  const p = peers.get(req.peer)
  if (req.op !== 'open' && !p) throw new Error('no such peer ' + req.peer)
  const drain = () => p.outbox.splice(0).map(b64)
  switch (req.op) {
    case 'open': {
      const doc = new Y.Doc({ gc: req.gc !== false })
      doc.clientID = req.client
      const peer = { doc, roots: req.roots || {}, rng: makeRng(req.seed || 1), outbox: [] }
      doc.on('update', (u, origin) => { if (origin !== 'remote') peer.outbox.push(u) })
      peers.set(req.peer, peer)
      return {}
    }
    case 'edit':
      for (let i = 0; i < (req.n || 1); i++) randomTransaction(p.rng, p.doc, p.roots, 3)
      return { updates: drain() }
    case 'apply':
      Y.applyUpdate(p.doc, unb64(req.update), 'remote')
      return { updates: drain() }
    case 'state':
      return { ...snapshot(p.doc, p.roots), update: b64(Y.encodeStateAsUpdate(p.doc)) }
    case 'close':
      p.doc.destroy()
      peers.delete(req.peer)
      return {}
    default:
      throw new Error('unknown op ' + req.op)
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
rl.on('line', (line) => {
  if (!line.trim()) return
  let res
  try {
    res = { ok: true, ...handle(JSON.parse(line)) }
  } catch (e) {
    res = { ok: false, error: String(e && e.stack ? e.stack : e) }
  }
  process.stdout.write(stringify(res) + '\n')
})
