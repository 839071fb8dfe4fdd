// Package httpapi is the HTTP edge of the list service: every operation of
// INTERFACE.md §4 as decided by RULINGS.md, built with Huma v2 on the
// standard library mux (humago), so it mounts on any *http.ServeMux.
//
//	svc, _ := yaps.NewService(yaps.Config{Store: store, Prefix: "/lists-api", PublicURL: "https://app.example"})
//	mux := http.NewServeMux()
//	api := httpapi.Mount(mux, svc, httpapi.Config{}) // under the service's prefix
//	_ = api // add further operations, or read api.OpenAPI()
//
// The prefix and public URL belong to the service: they start the links in
// its answers (apiBase, sliceUrl), and Mount takes the prefix from it.
// The OpenAPI 3.1 document is served at {prefix}/openapi.json and human
// docs at {prefix}/docs. Register is the one registration of the operations
// (Mount calls it); the binary and the tests go through Mount.
//
// # Endpoints (relative to the prefix)
//
//	POST   /accounts                               built-in account (only with the default resolver)
//	GET    /lists                                  {lists, nextCursor} of the account credential (401 without one); cursor, limit (1..200, 50)
//	POST   /lists                                  create a list (no credential; empty body allowed)
//	GET    /lists/{ref}                            {list, role}
//	PATCH  /lists/{ref}                            title/name, kind, archivedAt (owner, editor)
//	DELETE /lists/{ref}                            archive (owner), 204, idempotent
//	GET    /lists/{ref}/yaps                       {yaps, nextCursor}; cursor, limit (1..200, 50), includeDeleted
//	POST   /lists/{ref}/yaps                       create a yap (owner, editor, agent by scope)
//	GET    /lists/{ref}/yaps/{yapId}               one live yap
//	PATCH  /lists/{ref}/yaps/{yapId}               merge patch; deletedAt: null restores
//	DELETE /lists/{ref}/yaps/{yapId}               soft delete, 204
//	GET    /lists/{ref}/permissions                (owner)
//	POST   /lists/{ref}/permissions                {role, label?, scopes?} → {permission, code} (owner)
//	DELETE /lists/{ref}/permissions/{permissionId} revoke (owner), 204
//	POST   /lists/{ref}/permissions/rotate-owner   {ownerCode} (owner)
//	POST   /lists/{ref}/rollup                     owner code + account credential → {merged}
//	GET    /lists/{ref}/snapshot                   application/octet-stream Yjs update; ?sv=
//	GET    /lists/{ref}/audit                      {entries, nextCursor} (owner)
//
// The WebSocket sync endpoint (GET /lists/{ref}/sync) belongs to package
// sync and is mounted beside this API by the binary.
//
// # Credentials
//
// A permission code is sent as "Authorization: Bearer yap_..." or as the
// query parameter k. An account key (built-in resolver) is sent as
// "Authorization: Bearer yak_..." on account routes, or as X-Account-Key
// beside a list code. A host's own resolver (Config.Accounts) reads its own
// credential, which Config.AccountScheme describes in the OpenAPI document
// (the built-in keys are documented only when they are in use). Codes and
// keys are never logged; k is redacted from logged URLs.
//
// # Order of checks
//
// Unknown ref 404, then the code 401 (and an invalid account credential 401),
// then the role 403 (and writes to an archived list 403, and an agent's
// scope where the yap is known), then the request
// itself 400. To keep that order, query parameters, headers and bodies are
// read by the handlers after authentication, never validated by Huma first.
// Every request to a list is counted against its rate-limit group
// (create_list for POST /lists and POST /accounts; mutation for every write;
// read for every read) before the credential is judged, so guessing refs or
// codes is limited too.
//
// # Errors
//
// Every error, including Huma's own validation errors and panics, is one
// application/problem+json object with the RFC 9457 members type (always
// "about:blank"), title, status, detail and instance (the request path,
// percent-encoded so that it is a URI reference; never the query) and the
// member error: {code, message, retryAfter?}.
// One table (errorTable) maps the error kinds of package yaps:
//
//	EINVALID       400 bad_request
//	EUNAUTHORIZED  401 unauthorized
//	EFORBIDDEN     403 forbidden
//	ENOTFOUND      404 not_found
//	ECONFLICT      409 conflict
//	EPRECONDITION  412 precondition_failed
//	ETOOLARGE      413 payload_too_large
//	ETIMEOUT       408 request_timeout (the body did not arrive in time)
//	ERATELIMITED   429 rate_limited (Retry-After header, retryAfter member)
//	EUNAVAILABLE   503 unavailable
//	EINTERNAL      500 internal_error (no internals)
//
// Huma's own errors are rewritten per API, never by replacing Huma's
// package-level huma.NewError: Register installs a middleware on its API
// that holds back error bodies Huma writes and re-emits them as a Problem,
// with 422 turned into 400. Other Huma APIs in the process keep Huma's
// defaults. Unknown paths under the prefix answer 404 not_found, known
// paths with another method 405 method_not_allowed with an Allow header.
// A 401 carries WWW-Authenticate: Bearer realm="yaps".
//
// # Decisions
//
//   - Unknown members in a request body are rejected with 400, except the
//     read-only members of the object the API itself returns (yaps: id,
//     listId, createdAt, updatedAt; lists: ref, createdAt, updatedAt,
//     rolledUpAt, docVersion), which are ignored so a client may send back
//     what it read. The OpenAPI request schemas (YapRequest,
//     PatchListRequest) list them as optional members of any value. Members of another yap kind are 400 ("wrong field for
//     the kind") whenever the kind is known (POST, or PATCH naming kind).
//   - deletedAt is always present on a yap: null while live, the deletion
//     time once soft-deleted (visible with includeDeleted=true). Optional
//     members of a kind are always present too (null when unset); tags is
//     always an array.
//   - Bodies over MaxBodyBytes (1 MiB) answer 413 payload_too_large.
//   - A missing yap kind on POST defaults to the list's kind.
//   - Strings may not contain control characters (C0, DEL, C1) other than
//     tab; only a note's body may contain LF. Date-times take RFC 3339's
//     lower-case t and z too.
//   - A query string whose %-escapes do not decode is 400 on every
//     operation (after the credential and role checks).
//   - X-RateLimit-Reset is the number of seconds until the window resets.
//   - Answers about a list are "Cache-Control: private, no-cache"; answers
//     carrying a code or key once are "no-store".
//   - Path refs and ids outside [A-Za-z0-9_-]{1,128} are 404 without a
//     store lookup.
//   - ETags are quoted strong tags; If-Match takes a tag, a list of tags,
//     the weak form or "*" on PATCH and DELETE. GET /snapshot also honours
//     If-None-Match (304). A PATCH that changes nothing keeps updatedAt and
//     the ETag; an empty PATCH body is {}. POST /accounts, rollup and
//     rotate-owner take no body (none, null or {}): members and malformed
//     JSON are 400, bodies over 1 MiB 413.
//   - An Idempotency-Key replay is marked with "Idempotent-Replayed: true"
//     and carries the first answer's ETag and Cache-Control.
//     The stored first answer is rendered by the service's Config.Render,
//     which must stay yaps.RenderJSON (the default) or Render of this
//     package, the encoder of the first answers, so replays are identical.
//   - An agent code without yaps:write that PATCHes a live non-task yap
//     is refused 403 before its body is read (scope before body).
//   - Request logs go to Config.Logger at Debug level; faults and panics at
//     Error level, with the cause, never to the client.
package httpapi
