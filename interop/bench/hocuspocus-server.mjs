// The @hocuspocus/server peer of `yaps bench sync` (docs/benchmarks.md,
// "Sync"): @hocuspocus/server 4.7.0 with no extensions (in memory, no
// persistence, no onAuthenticate hook: any token is accepted) and its
// default settings otherwise (flushDelay 0: updates arriving in one event
// loop turn are merged into one broadcast).
//
//   node hocuspocus-server.mjs PORT    (0 picks a free port)
//
// Clients speak the Hocuspocus framing: every y-protocols message is
// prefixed with varString(document name), and each document starts with an
// auth message. Prints "READY <port>" once it listens; stops on SIGTERM.
import { Server } from '@hocuspocus/server'

const port = parseInt(process.argv[2] || '0', 10)
const server = new Server({ port, address: '127.0.0.1', quiet: true, stopOnSignals: true })
await server.listen()
console.log(`READY ${server.httpServer.address().port}`)
