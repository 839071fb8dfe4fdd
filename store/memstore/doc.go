// Package memstore is an in-memory yaps.Store.
//
// It exists so the service and the HTTP/sync edges can be unit tested
// without a database, and it passes the same conformance suite
// (store/storetest) as the SQL adapters, so tests written against it
// describe the real stores too.
//
// Values are deep-copied on the way in and out: a caller mutating a *List
// or *Yap it got back can never change what the store holds, exactly like
// a database round trip. Update serializes writers per list with a mutex
// and buffers every change until fn returns nil, so a failed fn leaves no
// trace.
package memstore
