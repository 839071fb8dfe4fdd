// The closing handshake seen from a Node `ws` client, the WebSocket that
// y-websocket uses in Node (driven by the Go test
// sync/ysync/closehandshake_interop_test.go).
//
// Each of `count` connections sends, as soon as it is open and in the same
// tick, one malformed frame (0x80: a varuint cut short, which the server
// refuses with 4400) followed by `frames` small valid ones ([3], query
// awareness). The server refuses the connection while the client is still
// sending. If it then closed its socket at once, the client's unread
// frames would make the kernel reset the connection and `ws` would report
// 1006 (and y-websocket would reconnect after a final refusal) instead of
// the server's close code.
//
// Usage: node closerace.mjs '{"urls": ["ws://…/sync?k=…"], "count": 40, "frames": 200}'
//    or: node closerace.mjs <url> [count] [frames]
// Connections use the URLs in turn. Prints one JSON line:
//   {"codes": {"4400": 40}, "errors": {...}}
// where codes counts the close codes seen (0 for a connection that did not
// close within 5 s) and errors counts the socket errors reported.
import WebSocket from 'ws'

const arg = process.argv[2] ?? ''
const opts = arg.startsWith('{')
  ? JSON.parse(arg)
  : { urls: [arg], count: Number(process.argv[3] ?? 40), frames: Number(process.argv[4] ?? 200) }
const urls = opts.urls ?? []
const count = opts.count ?? 40
const frames = opts.frames ?? 200
if (!urls[0]) throw new Error('usage: node closerace.mjs <url> [count] [frames]')

const bad = Buffer.from([0x80])
const query = Buffer.from([3])
const codes = {}
const errors = {}
const bump = (m, k) => { m[k] = (m[k] ?? 0) + 1 }

const one = (url) => new Promise((resolve) => {
  const ws = new WebSocket(url)
  const timer = setTimeout(() => { ws.terminate(); resolve(0) }, 5000)
  ws.on('open', () => {
    ws.send(bad)
    for (let i = 0; i < frames; i++) ws.send(query)
  })
  // A reset shows up here (ECONNRESET, EPIPE) and then as close 1006.
  ws.on('error', (err) => bump(errors, err.code ?? err.message))
  ws.on('close', (code) => { clearTimeout(timer); resolve(code) })
})

const got = await Promise.all(Array.from({ length: count }, (_, i) => one(urls[i % urls.length])))
for (const code of got) bump(codes, code)
process.stdout.write(JSON.stringify({ codes, errors }) + '\n')
