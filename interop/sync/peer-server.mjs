// Starts one of the peer sync servers the load benchmark compares against,
// in memory and without persistence:
//
//   node peer-server.mjs ywebsocket PORT   @y/websocket-server (y-websocket protocol; room = URL path)
//   node peer-server.mjs hocuspocus PORT   @hocuspocus/server (Hocuspocus framing: document name prefix)
//
// Prints "READY <port>" on stdout once it accepts connections and runs
// until killed.
import http from 'node:http'

const [kind, portArg] = process.argv.slice(2)
const port = parseInt(portArg || '0', 10)

if (kind === 'ywebsocket') {
  const { WebSocketServer } = await import('ws')
  const { setupWSConnection } = await import('@y/websocket-server/utils')
  const wss = new WebSocketServer({ noServer: true })
  const server = http.createServer((_req, res) => { res.writeHead(200); res.end('okay') })
  wss.on('connection', setupWSConnection)
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req))
  })
  server.listen(port, '127.0.0.1', () => console.log(`READY ${server.address().port}`))
} else if (kind === 'hocuspocus') {
  const { Server } = await import('@hocuspocus/server')
  const server = new Server({ port, address: '127.0.0.1', quiet: true, stopOnSignals: true })
  await server.listen()
  console.log(`READY ${server.httpServer.address().port}`)
} else {
  console.error('usage: node peer-server.mjs ywebsocket|hocuspocus PORT')
  process.exit(2)
}
