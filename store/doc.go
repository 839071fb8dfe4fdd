// Package store groups the adapters that implement yaps.Store.
//
//   - memstore: in-memory, for unit tests and throwaway servers.
//   - bunstore: SQLite (file or memory) and Postgres through Bun.
//   - storetest: the conformance suite every adapter runs, so they all
//     behave the same way as far as the service can tell.
package store
