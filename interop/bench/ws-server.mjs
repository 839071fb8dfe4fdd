// The @y/websocket-server peer of `yaps bench sync` (docs/benchmarks.md,
// "Sync"): setupWSConnection of @y/websocket-server 0.1.1 on a plain
// http + ws server, in memory (no YPERSISTENCE, no CALLBACK_URL), room =
// URL path, as its own bin/server.js does.
//
//   node ws-server.mjs PORT    (0 picks a free port)
//
// Prints "READY <port>" once it listens; stops on SIGTERM/SIGINT.
import http from 'node:http'
import { WebSocketServer } from 'ws'

// utils reads these as it loads: cleared first, so the peer stays in memory
// whatever the caller's environment holds (a static import would load
// utils before this line runs).
delete process.env.YPERSISTENCE
delete process.env.CALLBACK_URL
const { setupWSConnection } = await import('@y/websocket-server/utils')

const port = parseInt(process.argv[2] || '0', 10)
const wss = new WebSocketServer({ noServer: true })
const server = http.createServer((_req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/plain' })
  res.end('okay')
})
wss.on('connection', setupWSConnection)
server.on('upgrade', (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req))
})
server.listen(port, '127.0.0.1', () => console.log(`READY ${server.address().port}`))
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0))
