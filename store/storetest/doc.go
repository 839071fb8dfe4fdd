// Package storetest is the conformance suite for yaps.Store adapters.
//
// Every adapter runs Run from its own tests, so the service can rely on one
// behaviour whichever store it is given. The suite pins down the details the
// interface comments leave to the implementation: ENOTFOUND for every
// unknown key, ECONFLICT for duplicate keys, millisecond UTC times, the
// document log's numbering and compaction, and Update's all-or-nothing
// transactions serialized per list.
//
// PostgresDSN gives other packages' tests a private Postgres schema, so the
// whole server can be tested on Postgres next to SQLite.
package storetest
