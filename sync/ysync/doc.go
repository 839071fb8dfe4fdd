// Package ysync serves the y-websocket sync endpoint of a list,
// GET {prefix}/lists/{ref}/sync?k=CODE (RULINGS R9, R10), on top of
// yaps.Service and github.com/olahol/melody.
//
// # Protocol
//
// One y-websocket message per binary frame, lib0 encoding (see codec.go):
//
//	sync (0)            step 1 (0) state vector, step 2 (1) update, update (2)
//	awareness (1)       varUint8Array(awareness update)
//	auth (2)            permission denied (0) + varString reason; server to client only
//	query-awareness (3) no payload
//
// On connect the server sends its sync step 1 and, when there are any, the
// room's awareness states. Every step 1 is answered with a step 2 holding
// what the client lacks; per connection one answer is encoded at a time,
// and of the step 1 messages that arrive meanwhile only the latest waits.
// A client's step 2 and update messages are applied through
// Service.ApplyUpdates (durable before anything is relayed) by a per-room
// worker: the updates that arrived, from any connection of the room, while
// the previous batch was being stored are applied in one
// write, each validated on its own, and a connection's own updates in a
// batch are merged first (yjs.MergeUpdates). The applied updates come back
// as yaps.EventDocUpdates and are relayed to every connection of the room,
// the sender included. HTTP writes and compensating updates take the same
// path, so there is exactly one relay path. The updates of one write
// (Event.More) leave on each connection together, in one socket write:
// written at once by the relaying goroutine when nothing is queued for the
// connection (never blocking: what the socket does not take is queued),
// else queued, and frames queued back to back leave in one socket write
// (coalescingConn): one syscall per burst instead of one per frame, with no
// timer and no delay.
//
// Read-only connections (viewers, archived lists, agents without a write
// scope) never reach ApplyUpdates. The first non-empty update such a
// connection sends is answered with auth "permission denied"; later ones are
// dropped silently. An empty update (the step 2 of a client that has nothing
// new) is never treated as a write, and neither is a read-only client's
// step 2 whose structs the server already has (a reconnecting viewer
// answers our step 1 with its whole delete set). A connection that becomes
// writable again (unarchive) is sent our step 1 once more, so its client
// sends the edits that were refused while it was read-only.
//
// Awareness updates are validated (size, entry count, JSON states, JS-safe
// integers), applied with the y-protocols clock rules to the room's state
// table (at most MaxAwarenessRoomBytes of states per room; a message that
// would pass it is refused with 4400), and the accepted entries are
// relayed to every connection of the room, the sender included, and handed
// to the Broadcaster for other processes. Joiners and query-awareness
// answers share one frame with the whole table, built again only after the
// table changed. The IDs a connection set are removed (clock + 1, state
// null) when it disconnects. An ID set by a connection that is live, or
// left less than AwarenessTimeout ago, can be changed by another
// connection only if that one has the same code (a reconnect); entries for
// it from connections with other codes, here or on another process, are
// dropped (clients re-send the states of others, so the sender is not
// closed). A client that sends its state at a clock older than a removal
// the room holds for its ID (its reconnect after the server announced its
// departure) is sent that removal, which y-protocols answers with its
// state at a higher clock.
//
// # Several processes
//
// Rooms are per process. Everything another process does reaches this one
// as a service event: document updates (relayed like local ones),
// revocations (sockets closed) and list changes (write access re-checked),
// through the service's Notifier (store/pgnotify) or its poller. Awareness
// crosses through the Broadcaster, by default the service's
// PublishAwareness / yaps.EventAwareness, with the code of the connection
// that sent each entry; a process that opens a room publishes an empty
// awareness update, which asks the others to publish their connections'
// states.
//
// # Errors before the upgrade
//
// Refusals are written before the WebSocket upgrade as one JSON object that
// is both an RFC 9457 problem and the variant-B error body (RULINGS R2),
// media type application/problem+json:
//
//	403 forbidden     Origin not allowed
//	404 not_found     unknown list
//	401 unauthorized  missing, malformed, revoked or foreign code
//	400 bad_request   not a WebSocket upgrade request
//	429 rate_limited  too many connection attempts (each counts as a read, R8),
//	                  or too many connections to the list from the client's
//	                  address (MaxConnsPerIP), or to the process from it
//	                  (MaxConnsPerIPTotal; Retry-After: 5 for both)
//	503 unavailable   too many connections or rooms (Retry-After: 5)
//
// # Resources
//
// Every bound is a Config field (see config.go for defaults): frame size,
// rooms, connections per process, per room and per client address in a
// room, a bounded send queue per
// connection (a client that falls behind is disconnected, never silently
// skipped; a room's client updates first wait up to SendQueueWait for a
// reader that is behind, so a burst slows its writers instead of closing
// healthy readers), a per-connection message rate (pings and pongs count),
// awareness sizes and counts,
// keepalive pings with a dead-peer timeout, and idle room unloading (the
// room's pin on the service's document is released). After the handshake
// the socket is taken off net/http so an idle connection costs about 19 KB
// (10,000 idle connections: about 210 MB RSS; see TestIdleConnectionsRSS).
//
// Yaps a client creates, deletes, restores or removes count against the
// service's yap-mutation limit (RULINGS R8), in the class an account
// credential (Config.Accounts) or the list gives the socket; edits within
// yaps do not. Past the limit such an update is not refused: it, and what
// the socket sends after it, wait on the server until the window resets
// (conn.hold), within MaxMessageSize per socket and the address's
// MaxUnfinishedBytesPerIP (past them: close code 4529).
//
// # Close codes
//
// After the upgrade the server ends a connection with a close frame, then
// ignores but keeps reading the client's frames until the client's close
// frame (at most CloseTimeout) before it closes the socket, so a client
// that was still sending reads the code instead of a reset (1006). The
// code follows the y-websocket client's convention: 4400-4499 are final (the
// client stops reconnecting), everything else is transient.
//
//	4400 bad message       malformed frame or invalid update (hostile input)
//	4401 permission revoked / code no longer valid
//	4404 list not found
//	4413 too large         update or document over a size limit
//	1003 unsupported data  text frame
//	1009 message too big   frame over MaxMessageSize, or a step 2 over
//	                       MaxSyncStep2Size (sent by gorilla; see step2.go)
//	4529 rate limited      (transient: the client reconnects and resyncs)
//	4500 internal error    (transient)
//	4503 overloaded        capacity
//	4508 slow client       send queue full; the client reconnects and resyncs
//	1001 going away        server shutdown
//
// A client that takes longer than MessageReadTimeout to finish a message,
// or whose address has more than MaxUnfinishedBytesPerIP in unfinished
// messages, has its socket cut without a close frame (1006; see
// unfinished.go): no frame can be sent while gorilla is inside a message.
//
// Rate limiting uses 4529 rather than 4429 because the client treats the
// whole 4400-4499 range as final.
package ysync
