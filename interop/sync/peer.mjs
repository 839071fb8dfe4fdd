// A scriptable set of real y-websocket clients (WebsocketProvider from
// y-websocket, ws as the WebSocket polyfill), driven by the Go interop
// tests in sync/ysync over stdin/stdout with one JSON object per line.
//
// Request:  {"req": n, "op": "...", ...arguments}
// Response: {"req": n, "ok": true, "result": ...} or {"req": n, "ok": false, "error": "..."}
// Event:    {"ev": "status"|"synced"|"denied"|"closed", "id": ..., ...}
import * as readline from 'node:readline'
import * as Y from 'yjs'
import WebSocket from 'ws'
import { WebsocketProvider } from 'y-websocket'
import * as authProtocol from 'y-protocols/auth'

const peers = new Map() // id -> { doc, provider }

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')

const yapMap = (doc, yapId) => {
  const m = doc.getMap('yaps').get(yapId)
  if (!(m instanceof Y.Map)) throw new Error('no yap ' + yapId)
  return m
}

const ops = {
  connect ({ id, serverUrl, room, code }) {
    const doc = new Y.Doc()
    const provider = new WebsocketProvider(serverUrl, room, doc, {
      WebSocketPolyfill: WebSocket,
      params: { k: code },
      disableBc: true,
      maxBackoffTime: 200
    })
    // Report auth messages instead of only console.warn-ing them.
    provider.messageHandlers[2] = (_encoder, decoder) => {
      authProtocol.readAuthMessage(decoder, doc, (_ydoc, reason) => emit({ ev: 'denied', id, reason }))
    }
    provider.on('status', ({ status }) => emit({ ev: 'status', id, status }))
    provider.on('sync', (synced) => emit({ ev: 'synced', id, synced }))
    provider.on('connection-close', (event) => {
      if (event) emit({ ev: 'closed', id, code: event.code, reason: event.reason })
    })
    peers.set(id, { doc, provider })
    return { clientID: doc.clientID }
  },
  state ({ id }) {
    const { doc, provider } = peers.get(id)
    const roots = {}
    for (const [name, type] of doc.share) {
      roots[name] = type instanceof Y.Text ? type.toString() : type.toJSON()
    }
    // Root types created on the server side arrive as abstract types; read
    // the known ones through their concrete getters.
    roots.list = doc.getMap('list').toJSON()
    roots.yaps = doc.getMap('yaps').toJSON()
    const awareness = {}
    provider.awareness.getStates().forEach((s, cid) => { awareness[cid] = s })
    return { roots, awareness, synced: provider.synced, connected: provider.wsconnected }
  },
  // createYap adds a yap map with the given plain fields; text fields are
  // given in texts and become Y.Text.
  createYap ({ id, yapId, fields = {}, texts = {} }) {
    const { doc } = peers.get(id)
    doc.transact(() => {
      const m = new Y.Map()
      doc.getMap('yaps').set(yapId, m)
      for (const [k, v] of Object.entries(fields)) m.set(k, v)
      for (const [k, v] of Object.entries(texts)) m.set(k, new Y.Text(v))
    })
  },
  insertText ({ id, yapId, field, index, text }) {
    const t = yapMap(peers.get(id).doc, yapId).get(field)
    t.insert(index, text)
  },
  // insertMany runs several inserts in one tick, so none of the peers can
  // receive another's edit in between: truly concurrent edits.
  insertMany ({ edits }) {
    for (const e of edits) ops.insertText(e)
  },
  setField ({ id, yapId, key, value }) {
    yapMap(peers.get(id).doc, yapId).set(key, value)
  },
  // setCustom writes root types outside the list schema.
  setCustom ({ id, key, value, text }) {
    const { doc } = peers.get(id)
    doc.transact(() => {
      doc.getMap('custom').set(key, value)
      doc.getText('notes').insert(0, text)
    })
  },
  customOf ({ id }) {
    const { doc } = peers.get(id)
    return { custom: doc.getMap('custom').toJSON(), notes: doc.getText('notes').toString() }
  },
  awareness ({ id, state }) {
    peers.get(id).provider.awareness.setLocalState(state)
  },
  // drop cuts the socket without a close frame or awareness goodbye, like
  // a crashed browser tab, and does not reconnect.
  drop ({ id }) {
    const { provider } = peers.get(id)
    provider.shouldConnect = false
    provider.ws.terminate()
  },
  // reconnect undoes drop.
  reconnect ({ id }) {
    peers.get(id).provider.connect()
  },
  // forgeClient makes the doc write under another client's ID from now on
  // (Y.Doc.clientID is assignable), as a hostile client could.
  forgeClient ({ id, clientID }) {
    peers.get(id).doc.clientID = clientID
  },
  destroy ({ id }) {
    const { doc, provider } = peers.get(id)
    provider.destroy()
    doc.destroy()
    peers.delete(id)
  }
}

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', (line) => {
  let msg
  try {
    msg = JSON.parse(line)
    const result = ops[msg.op](msg)
    emit({ req: msg.req, ok: true, result: result ?? null })
  } catch (err) {
    emit({ req: msg?.req, ok: false, error: String(err?.stack || err) })
  }
})
rl.on('close', () => {
  for (const { provider } of peers.values()) provider.destroy()
  process.exit(0)
})
