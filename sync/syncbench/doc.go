// Package syncbench is the client side of the sync load benchmark (issue
// 4): R rooms × C clients, each client sending U small document updates
// over a y-websocket style connection, against yaps or a peer server, and
// the figures to compare them by: delivered updates per second, p50/p99
// delivery latency, server CPU per delivered update and server RSS.
//
// A delivery is one update reaching one other client of its room (the
// sender's own echo is not counted), so a run delivers R × U × C × (C-1).
// Every client writes real Yjs updates (yaps/yjs): it appends a marker
// "~client.update~" to the root Y.Text "bench" of its own document, which
// needs no initial sync and is the same workload for every server (yaps
// keeps and persists root types outside its list schema). Receivers find
// the markers in the frames they get without applying anything, so the
// client side stays cheap.
//
// Servers are described by a Target: its wire dialect (plain y-websocket,
// or Hocuspocus, which prefixes every message with the document name and
// wants an auth message first), how to get a room's URL, and the server's
// process id for CPU and RSS (read from /proc). StartPeer starts the npm
// peers (interop/sync/peer-server.mjs); YapsRooms creates yaps lists over
// HTTP. `yaps bench sync` (cmd/yaps) is meant to wire these together.
package syncbench
