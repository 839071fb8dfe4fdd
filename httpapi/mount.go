package httpapi

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/yaps-dev/yaps/yaps"
)

// APIVersion is the version in the OpenAPI document (INTERFACE §9).
const APIVersion = "1.0.0"

// server holds what the operations need.
type server struct {
	svc      *yaps.Service
	cfg      Config
	accounts AccountResolver
	builtin  bool
	owned    map[string]bool // operation ids registered by this server
}

// HumaConfig returns the Huma configuration Mount uses for cfg: OpenAPI 3.1
// at {prefix}/openapi.json (3.0 at {prefix}/openapi-3.0.json), docs at
// {prefix}/docs, and the security schemes: permCode and permCodeQuery for
// list codes, and either the built-in account keys (accountKey,
// accountKeyHeader; without cfg.Accounts) or cfg.AccountScheme as
// "account". It does not touch any package-level Huma state.
func HumaConfig(cfg Config) huma.Config {
	cfg = cfg.WithDefaults()
	hc := huma.DefaultConfig("Yaps API", APIVersion)
	hc.CreateHooks = nil // no $schema members or Link headers in bodies
	hc.Info.Description = "Anonymous, permission-coded collaborative lists of tasks, notes and events (yaps).\n\n" +
		"Errors are `application/problem+json` objects carrying both the RFC 9457 members " +
		"(`type`, `title`, `status`, `detail`, `instance`) and `error: {code, message, retryAfter?}`."
	server := cfg.Prefix
	if cfg.PublicURL != "" {
		server = cfg.PublicURL + cfg.Prefix
	}
	hc.Servers = []*huma.Server{{URL: server}}
	hc.Components.SecuritySchemes = securitySchemes(cfg)
	ownRegistries.Store(hc.Components.Schemas, struct{}{}) // plain schema names (schemas.go)
	return hc
}

// securitySchemes returns the security schemes the operations document:
// the permission code (header and query) and the account credential.
func securitySchemes(cfg Config) map[string]*huma.SecurityScheme {
	schemes := map[string]*huma.SecurityScheme{
		"permCode": {
			Type: "http", Scheme: "bearer", BearerFormat: "yap_<43 base64url characters>",
			Description: "A permission code of the list: Authorization: Bearer yap_...",
		},
		"permCodeQuery": {
			Type: "apiKey", In: "query", Name: "k",
			Description: "The permission code as the k query parameter (for links and the WebSocket)",
		},
	}
	maps.Copy(schemes, accountSchemes(cfg))
	return schemes
}

// accountSchemes returns the security schemes of cfg's account credential:
// the built-in keys without a custom resolver, else cfg.AccountScheme as
// "account" if set, else none.
func accountSchemes(cfg Config) map[string]*huma.SecurityScheme {
	if cfg.Accounts == nil {
		return map[string]*huma.SecurityScheme{
			"accountKey": {
				Type: "http", Scheme: "bearer", BearerFormat: "yak_<43 base64url characters>",
				Description: "An account key of the built-in accounts: Authorization: Bearer yak_...",
			},
			"accountKeyHeader": {
				Type: "apiKey", In: "header", Name: "X-Account-Key",
				Description: "An account key sent beside a list code",
			},
		}
	}
	if cfg.AccountScheme != nil {
		return map[string]*huma.SecurityScheme{"account": cfg.AccountScheme}
	}
	return nil
}

// Mount creates the Huma API for the list service under cfg.Prefix on the
// host mux and registers every operation (Register). Unmatched paths under
// the prefix answer 404 in the Problem format. It panics on an invalid
// configuration, like http.ServeMux does on a bad pattern, and on a nil
// service.
//
// The OpenAPI document names the built-in account keys only when they are
// in use (cfg.Accounts nil). A host with its own resolver describes its
// credential with cfg.AccountScheme, or edits api.OpenAPI() after Mount.
// Operations the host registers on the returned API answer errors as
// Problems, and their documented error responses say so.
//
// An empty cfg.Prefix takes the service's (yaps.Config.Prefix), which is
// also the prefix of the links in answers (apiBase, sliceUrl). A different
// prefix, or a cfg.PublicURL other than the service's, is logged as a
// warning: it is right only behind a proxy that rewrites paths or hosts.
func Mount(mux *http.ServeMux, svc *yaps.Service, cfg Config) huma.API {
	if svc == nil {
		panic(errNilService)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = svc.Prefix()
	}
	cfg = cfg.WithDefaults()
	if _, err := cfg.validate(); err != nil {
		panic("httpapi: " + err.Error())
	}
	if cfg.Prefix != svc.Prefix() {
		cfg.Logger.Warn("httpapi: mounted under another prefix than the service's, which its answers' links (apiBase, sliceUrl) use; set yaps.Config.Prefix alike unless a proxy rewrites paths",
			"prefix", cfg.Prefix, "servicePrefix", svc.Prefix())
	}
	if cfg.PublicURL != "" && cfg.PublicURL != svc.PublicURL() {
		cfg.Logger.Warn("httpapi: PublicURL differs from the service's, which its answers' links (apiBase, sliceUrl) use; set yaps.Config.PublicURL alike",
			"publicURL", cfg.PublicURL, "servicePublicURL", svc.PublicURL())
	}
	api := humago.NewWithPrefix(mux, cfg.Prefix, HumaConfig(cfg))
	Register(api, svc, cfg)
	mux.Handle(cfg.Prefix+"/", notFoundHandler(mux, cfg.Prefix))
	return api
}

// notFoundHandler answers every unknown path under the prefix: 405 with
// Allow when the path exists for other methods, else 404, both as Problems.
func notFoundHandler(mux *http.ServeMux, prefix string) http.Handler {
	catchAll := prefix + "/"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
			if m == r.Method || (m == http.MethodGet && r.Method == http.MethodHead) {
				continue
			}
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != catchAll {
				allow = append(allow, m)
				if m == http.MethodGet {
					allow = append(allow, http.MethodHead) // net/http answers HEAD wherever GET is
				}
			}
		}
		k := errorTable[yaps.ENOTFOUND]
		msg := "no such endpoint: " + r.Method + " " + clip(r.URL.Path, 200)
		if len(allow) > 0 {
			k = errorKind{http.StatusMethodNotAllowed, "method_not_allowed"}
			msg = "method " + r.Method + " is not allowed here; allowed: " + strings.Join(allow, ", ")
			w.Header().Set("Allow", strings.Join(allow, ", "))
		}
		p := problem(k, msg, instancePath(r.URL), 0)
		w.Header().Set("Content-Type", problemMediaType)
		w.WriteHeader(k.Status)
		_, _ = w.Write(p.marshal())
	})
}

// Register registers every operation of the list service on api, which must
// be built on the humago (net/http) adapter. Paths are relative to the API's
// prefix. It also installs the API's middleware: client IP resolution, panic
// recovery (500 internal_error), request logging without secrets, and the
// rewriting of every error body this package's operations did not write
// themselves (Huma's validation and parse errors, errors of operations the
// host adds to the same API) into the Problem format, 422 becoming 400.
// Only this API is affected; other Huma APIs of the process keep Huma's
// defaults, and huma.NewError is never touched. The OpenAPI entries of
// operations registered on api after Register document that Problem too,
// in place of Huma's ErrorModel (422 documented as 400). On an API not
// built from HumaConfig (a host's own), this package's schemas are named
// with the prefix "Yaps" (YapsList, YapsProblem), so that they cannot clash
// with the host's types of the same name (see schemas.go). It panics on an
// invalid configuration and on a nil service.
func Register(api huma.API, svc *yaps.Service, cfg Config) {
	if svc == nil {
		panic(errNilService)
	}
	cfg = cfg.WithDefaults()
	cfg, err := cfg.validate()
	if err != nil {
		panic("httpapi: " + err.Error())
	}
	s := &server{svc: svc, cfg: cfg, accounts: cfg.Accounts, owned: map[string]bool{}}
	if s.accounts == nil {
		s.accounts = s.builtinAccount
		s.builtin = true
	}
	oapi := api.OpenAPI()
	if oapi.Components == nil {
		oapi.Components = &huma.Components{}
	}
	if oapi.Components.SecuritySchemes == nil {
		oapi.Components.SecuritySchemes = map[string]*huma.SecurityScheme{}
	}
	// A host's own API gets the schemes it lacks; one it defined itself
	// under the same name is kept.
	schemes := oapi.Components.SecuritySchemes
	for name, sc := range securitySchemes(cfg) {
		if schemes[name] == nil {
			schemes[name] = sc
		}
	}
	api.UseMiddleware(s.middleware)
	reg := registryFor(oapi)
	if p, ok := reg.(*prefixedRegistry); ok {
		// While our operations are added, Huma's hooks (its schema links)
		// look up their schemas' types in the API's registry: give them
		// ours, and the host's back after.
		oapi.Components.Schemas = p
		defer func() { oapi.Components.Schemas = p.Registry }()
	}
	d := &documenter{reg: reg}
	// Operations added from here on (ours and the host's) document the
	// Problem in place of Huma's ErrorModel, as the middleware answers it.
	// Huma's error schemas are dropped once our operations are in (end of
	// Register), and again after each operation the host adds.
	registered := false
	oapi.OnAddOperation = append(oapi.OnAddOperation, func(oapi *huma.OpenAPI, op *huma.Operation) {
		problemErrors(oapi, reg, op)
		if registered {
			dropUnusedHumaErrors(oapi, reg)
		}
	})
	defer func() {
		registered = true
		dropUnusedHumaErrors(oapi, reg)
	}()

	public := []map[string][]string{{}} // no credential needed
	codeSec := []map[string][]string{{"permCode": {}}, {"permCodeQuery": {}}}
	// The account credential: the built-in keys, the host's scheme, or
	// none documented (a custom resolver without Config.AccountScheme).
	var acctSec []map[string][]string
	rollupSec := codeSec
	var rollupParams []*huma.Param
	switch {
	// Rollup takes the list code and the account credential, each in any
	// of its forms that can travel together (the list code and an account
	// key cannot both be the Authorization header).
	case s.builtin:
		acctSec = []map[string][]string{{"accountKey": {}}}
		rollupSec = []map[string][]string{
			{"permCode": {}, "accountKeyHeader": {}},
			{"permCodeQuery": {}, "accountKeyHeader": {}},
			{"permCodeQuery": {}, "accountKey": {}},
		}
		rollupParams = []*huma.Param{paramAccountKey}
	case schemes["account"] != nil:
		acctSec = []map[string][]string{{"account": {}}}
		rollupSec = []map[string][]string{{"permCode": {}, "account": {}}, {"permCodeQuery": {}, "account": {}}}
	}
	// POST /lists: no credential, or an account's (the list is then the
	// account's from the start).
	createSec := append(slices.Clone(public), acctSec...)
	if s.builtin {
		createSec = append(createSec, map[string][]string{"accountKeyHeader": {}})
	}
	acctNote := ""
	if !s.builtin {
		acctNote = " The account credential is the embedding application's own."
	}

	tagLists, tagYaps, tagPerms, tagAccounts := []string{"Lists"}, []string{"Yaps"}, []string{"Permissions"}, []string{"Accounts"}
	// The error answers each operation can give. Every operation has 400:
	// a query string that does not decode is 400 even where no parameter is
	// read (reqState.query); operations that read a body (even one they
	// want empty) have 408 and 413 too.
	readErrs := []int{400, 401, 404, 429, 500}
	writeErrs := []int{400, 401, 403, 404, 408, 413, 429, 500}

	handle(s, api, d.op(huma.Operation{
		OperationID: "createList", Method: http.MethodPost, Path: "/lists", Tags: tagLists,
		Summary: "Create a list",
		Description: "Creates a list; the owner code is returned once. No credential is needed: without one the list is anonymous. " +
			"With a valid account credential it belongs to that account from the start (rolledUpAt is set, the account's rate limits apply); " +
			"an account credential that is not valid is 401. " +
			"An empty body creates a task list without a title. Honours Idempotency-Key.",
		RequestBody: d.body(CreateListRequest{}, false),
		Parameters:  append([]*huma.Param{paramIdempotency}, rollupParams...),
		Security:    createSec,
	}, http.StatusCreated, CreatedList{}, 400, 401, 408, 413, 429, 500), s.createList)

	if s.builtin {
		handle(s, api, d.op(huma.Operation{
			OperationID: "createAccount", Method: http.MethodPost, Path: "/accounts", Tags: tagAccounts,
			Summary: "Create an account",
			Description: "Creates a built-in account and returns its key (yak_...) once. Send it as Authorization: Bearer on account routes or as X-Account-Key beside a list code. " +
				"Takes no body: none, null or {}; members are 400.",
			Security: public,
		}, http.StatusCreated, CreatedAccount{}, 400, 408, 413, 429, 500), s.createAccount)
	}

	handle(s, api, d.op(huma.Operation{
		OperationID: "accountLists", Method: http.MethodGet, Path: "/lists", Tags: tagAccounts,
		Summary: "List an account's lists",
		Description: "Returns the lists rolled up into the account of the credential, oldest first (createdAt, then ref), paged by cursor. " +
			"Without an account credential: 401." + acctNote,
		Security:   acctSec,
		Parameters: []*huma.Param{paramCursor, paramLimit},
	}, http.StatusOK, AccountLists{}, 400, 401, 429, 500), s.accountLists)

	handle(s, api, d.op(huma.Operation{
		OperationID: "getList", Method: http.MethodGet, Path: "/lists/{ref}", Tags: tagLists,
		Summary: "Get a list and the caller's role", Security: codeSec,
	}, http.StatusOK, ListWithRole{}, readErrs...), s.getList)

	handle(s, api, d.op(huma.Operation{
		OperationID: "updateList", Method: http.MethodPatch, Path: "/lists/{ref}", Tags: tagLists,
		Summary:     "Update a list (owner, editor)",
		Description: "Merge patch of title (alias name), kind and archivedAt; archivedAt null unarchives. If-Match guards against lost updates (412).",
		Security:    codeSec, RequestBody: d.body(PatchListRequest{}, false),
		Parameters: []*huma.Param{paramIfMatch},
	}, http.StatusOK, List{}, append(writeErrs, 412)...), s.patchList)

	handle(s, api, d.op(huma.Operation{
		OperationID: "archiveList", Method: http.MethodDelete, Path: "/lists/{ref}", Tags: tagLists,
		Summary: "Archive a list (owner)", Description: "Sets archivedAt; idempotent. If-Match guards against archiving a list changed since it was read (412).", Security: codeSec,
		Parameters: []*huma.Param{paramIfMatch},
	}, http.StatusNoContent, nil, 400, 401, 403, 404, 412, 429, 500), s.deleteList)

	handle(s, api, d.op(huma.Operation{
		OperationID: "listYaps", Method: http.MethodGet, Path: "/lists/{ref}/yaps", Tags: tagYaps,
		Summary:     "List yaps",
		Description: "Yaps in chronological order (createdAt, then id), paged by cursor. Soft-deleted yaps are left out unless includeDeleted=true.",
		Security:    codeSec,
		Parameters:  []*huma.Param{paramCursor, paramLimit, paramIncludeDeleted},
	}, http.StatusOK, YapPage{}, readErrs...), s.listYaps)

	handle(s, api, d.op(huma.Operation{
		OperationID: "createYap", Method: http.MethodPost, Path: "/lists/{ref}/yaps", Tags: tagYaps,
		Summary:     "Create a yap (owner, editor, agent by scope)",
		Description: "The body is a yap of one kind (default: the list's kind) with that kind's members only; id, listId, createdAt and updatedAt are assigned by the server. Honours Idempotency-Key.",
		Security:    codeSec, RequestBody: d.body(YapRequest{}, true),
		Parameters: []*huma.Param{paramIdempotency},
	}, http.StatusCreated, yapSchema, writeErrs...), s.createYap)

	handle(s, api, d.op(huma.Operation{
		OperationID: "getYap", Method: http.MethodGet, Path: "/lists/{ref}/yaps/{yapId}", Tags: tagYaps,
		Summary: "Get a yap", Security: codeSec,
	}, http.StatusOK, yapSchema, readErrs...), s.getYap)

	handle(s, api, d.op(huma.Operation{
		OperationID: "updateYap", Method: http.MethodPatch, Path: "/lists/{ref}/yaps/{yapId}", Tags: tagYaps,
		Summary: "Update or restore a yap (owner, editor, agent by scope)",
		Description: "JSON merge patch: absent members stay, null clears an optional member, deletedAt: null restores a soft-deleted yap within 30 days. kind cannot change. If-Match guards against lost updates (412). " +
			"No body, null or {} changes nothing.",
		Security: codeSec, RequestBody: d.body(YapRequest{}, false),
		Parameters: []*huma.Param{paramIfMatch},
	}, http.StatusOK, yapSchema, append(writeErrs, 412)...), s.patchYap)

	handle(s, api, d.op(huma.Operation{
		OperationID: "deleteYap", Method: http.MethodDelete, Path: "/lists/{ref}/yaps/{yapId}", Tags: tagYaps,
		Summary: "Soft-delete a yap (owner, editor, agent by scope)", Security: codeSec,
		Description: "If-Match guards against deleting a yap changed since it was read (412).",
		Parameters:  []*huma.Param{paramIfMatch},
	}, http.StatusNoContent, nil, 400, 401, 403, 404, 412, 429, 500), s.deleteYap)

	handle(s, api, d.op(huma.Operation{
		OperationID: "listPermissions", Method: http.MethodGet, Path: "/lists/{ref}/permissions", Tags: tagPerms,
		Summary: "List active permissions (owner)", Security: codeSec,
	}, http.StatusOK, Permissions{}, 400, 401, 403, 404, 429, 500), s.listPermissions)

	handle(s, api, d.op(huma.Operation{
		OperationID: "issuePermission", Method: http.MethodPost, Path: "/lists/{ref}/permissions", Tags: tagPerms,
		Summary:     "Issue a permission code (owner)",
		Description: "Returns the new code once. Agent codes take scopes (tasks:write, the default, or yaps:write).",
		Security:    codeSec, RequestBody: d.body(IssuePermissionRequest{}, true),
	}, http.StatusCreated, IssuedPermission{}, writeErrs...), s.issuePermission)

	handle(s, api, d.op(huma.Operation{
		OperationID: "revokePermission", Method: http.MethodDelete, Path: "/lists/{ref}/permissions/{permissionId}", Tags: tagPerms,
		Summary: "Revoke a permission code (owner)", Description: "The last owner code cannot be revoked (403); rotate it instead.",
		Security: codeSec,
	}, http.StatusNoContent, nil, 400, 401, 403, 404, 429, 500), s.revokePermission)

	handle(s, api, d.op(huma.Operation{
		OperationID: "rotateOwner", Method: http.MethodPost, Path: "/lists/{ref}/permissions/rotate-owner", Tags: tagPerms,
		Summary: "Rotate the owner code (owner)", Description: "The calling owner code stops working; the new one is returned once. Takes no body: none, null or {}; members are 400.",
		Security: codeSec,
	}, http.StatusOK, RotatedOwner{}, writeErrs...), s.rotateOwner)

	handle(s, api, d.op(huma.Operation{
		OperationID: "rollup", Method: http.MethodPost, Path: "/lists/{ref}/rollup", Tags: tagAccounts,
		Summary:     "Roll a list up into an account (owner code + account credential)",
		Description: "merged is true when the list moved into the account, false when it already was there; a list in another account is 403. Takes no body: none, null or {}; members are 400." + acctNote,
		Security:    rollupSec,
		Parameters:  rollupParams,
	}, http.StatusOK, RollupResult{}, writeErrs...), s.rollup)

	snapshot := d.op(huma.Operation{
		OperationID: "snapshot", Method: http.MethodGet, Path: "/lists/{ref}/snapshot", Tags: tagLists,
		Summary: "Download the list document",
		Description: "Y.encodeStateAsUpdate of the list's Yjs document (update format v1), or with sv only the part missing from that state vector. " +
			"Without sv, If-None-Match with the snapshot's ETag answers 304.",
		Security:   codeSec,
		Parameters: []*huma.Param{paramSV, paramIfNoneMatch},
	}, http.StatusOK, binarySchema, readErrs...)
	snapshot.Responses["304"] = &huma.Response{
		Description: http.StatusText(http.StatusNotModified),
		Headers:     map[string]*huma.Param{"ETag": {Description: "Entity tag of the document state", Schema: &huma.Schema{Type: "string"}}},
	}
	documentHeaders(&snapshot, http.StatusOK)
	handle(s, api, snapshot, s.snapshot)

	handle(s, api, d.op(huma.Operation{
		OperationID: "audit", Method: http.MethodGet, Path: "/lists/{ref}/audit", Tags: tagLists,
		Summary: "Read the audit log (owner)", Security: codeSec,
		Parameters: []*huma.Param{paramCursor, paramLimit},
	}, http.StatusOK, AuditPage{}, 400, 401, 403, 404, 429, 500), s.audit)

	// The WebSocket endpoint is served by package sync (sync/ysync); it is
	// described here so the document lists every endpoint (no route is
	// added). The description lists its refusals.
	if oapi.Paths["/lists/{ref}/sync"] == nil {
		op := d.op(huma.Operation{
			OperationID: "sync", Method: http.MethodGet, Path: "/lists/{ref}/sync", Tags: tagLists,
			Summary: "Sync the list document over a WebSocket (y-websocket protocol)",
			Description: "Upgrades to a WebSocket speaking the y-websocket protocol (sync, awareness, auth, query-awareness). " +
				"The permission code goes in k, or in Authorization: Bearer (browsers cannot set headers on a WebSocket). Viewer and non-writing agent connections are read-only. " +
				"Every refusal comes before the upgrade: 403 for a browser Origin that is not allowed, 404 for an unknown ref, " +
				"401 for a bad or revoked code, 429 over the read rate limit (attempts count as reads) or when the client's address already holds its cap of sockets on the list (64 by default), " +
				"400 for a request that is not a WebSocket upgrade, 503 when the server is at its connection caps.",
			Parameters: []*huma.Param{
				{Name: "ref", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}},
				{Name: "k", In: "query", Description: "Permission code (unless sent as Authorization: Bearer)", Schema: &huma.Schema{Type: "string"}},
			},
			Security: codeSec,
		}, http.StatusSwitchingProtocols, nil, 400, 401, 403, 404, 429, 500, 503)
		oapi.AddOperation(&op)
	}

	if reg != nil {
		if page := reg.Map()[schemaName(reg, "YapPage")]; page != nil && page.Properties["yaps"] != nil {
			page.Properties["yaps"].Items = yapSchema.s(reg)
		}
	}

	// Bodiless answers have no content in the document.
	for _, path := range oapi.Paths {
		for _, op := range []*huma.Operation{path.Get, path.Post, path.Patch, path.Delete} {
			if op != nil && s.owns(op.OperationID) {
				if r := op.Responses["204"]; r != nil {
					r.Content = nil
				}
			}
		}
	}

	// Huma writes a nullable enum as {"type": [T, "null"], "enum": [...]}
	// without null in the enum, which JSON Schema 2020-12 reads as "null is
	// invalid" (enum is checked on its own). Add null to the enums of
	// every schema our operations use.
	seen := map[*huma.Schema]bool{}
	for _, path := range oapi.Paths {
		for _, op := range []*huma.Operation{path.Get, path.Post, path.Patch, path.Delete} {
			if op == nil || !(s.owns(op.OperationID) || op.OperationID == "sync") {
				continue
			}
			if op.RequestBody != nil {
				for _, mt := range op.RequestBody.Content {
					nullableEnums(d.reg, mt.Schema, seen)
				}
			}
			for _, r := range op.Responses {
				for _, mt := range r.Content {
					nullableEnums(d.reg, mt.Schema, seen)
				}
			}
		}
	}
}

// nullableEnums adds null to the enum of every nullable schema in s (refs
// followed through reg) that lacks it.
func nullableEnums(reg huma.Registry, s *huma.Schema, seen map[*huma.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if s.Ref != "" {
		nullableEnums(reg, reg.SchemaFromRef(s.Ref), seen)
	}
	if s.Nullable && len(s.Enum) > 0 && !slices.Contains(s.Enum, nil) {
		s.Enum = append(s.Enum, nil)
		s.PrecomputeMessages()
	}
	for _, p := range s.Properties {
		nullableEnums(reg, p, seen)
	}
	nullableEnums(reg, s.Items, seen)
	nullableEnums(reg, s.Not, seen)
	for _, l := range [][]*huma.Schema{s.OneOf, s.AnyOf, s.AllOf} {
		for _, c := range l {
			nullableEnums(reg, c, seen)
		}
	}
}

func (s *server) owns(id string) bool { return s.owned[id] }

// errNilService is Mount's and Register's panic on a nil service, which
// would otherwise fail every request.
const errNilService = "httpapi: nil *yaps.Service"

// problemErrors documents the error answers of op, just added to an API
// that Register installed its middleware on, as that middleware gives
// them: every error body that is not this package's own becomes a Problem
// (so Huma's ErrorModel is replaced, and its 422 is 400). Our own
// operations already document the Problem and are left as they are.
// Huma's error schemas that nothing refers to any more are dropped after
// it (dropUnusedHumaErrors).
func problemErrors(oapi *huma.OpenAPI, reg huma.Registry, op *huma.Operation) {
	if oapi.Components == nil || oapi.Components.Schemas == nil {
		return
	}
	ps := problemSchema(reg)
	humaErr := reflect.TypeOf(huma.NewError(0, ""))
	for humaErr != nil && humaErr.Kind() == reflect.Pointer {
		humaErr = humaErr.Elem()
	}
	isHumaError := func(r *huma.Response) bool {
		for _, mt := range r.Content {
			if mt != nil && mt.Schema != nil && mt.Schema.Ref != "" && reg.SchemaFromRef(mt.Schema.Ref) != nil &&
				reg.TypeFromRef(mt.Schema.Ref) == humaErr {
				return true
			}
		}
		return false
	}
	if r := op.Responses["422"]; r != nil {
		delete(op.Responses, "422")
		if op.Responses["400"] == nil {
			r.Description = http.StatusText(http.StatusBadRequest)
			op.Responses["400"] = r
		}
	}
	for code, r := range op.Responses {
		if r == nil {
			continue
		}
		n, err := strconv.Atoi(code)
		if (err == nil && n >= 400) || (code == "default" && isHumaError(r)) {
			if len(r.Content) == 1 && r.Content[problemMediaType] != nil && r.Content[problemMediaType].Schema != nil &&
				r.Content[problemMediaType].Schema.Ref == ps.Ref {
				continue // already ours
			}
			r.Content = map[string]*huma.MediaType{problemMediaType: {Schema: ps}}
		}
	}
}

// problemSchema is the registry's reference to the Problem schema,
// registering it first if need be.
func problemSchema(reg huma.Registry) *huma.Schema {
	return reg.Schema(reflect.TypeOf(Problem{}), true, "Problem")
}

// dropUnusedHumaErrors removes Huma's ErrorModel and ErrorDetail schemas,
// which every huma.Register call adds to the registry, while no part of the
// document refers to them. Huma's registry adds them again when next asked.
func dropUnusedHumaErrors(oapi *huma.OpenAPI, reg huma.Registry) {
	if oapi.Components == nil || oapi.Components.Schemas == nil {
		return
	}
	prefix := schemaRefs
	m := reg.Map()
	dropped := map[string]*huma.Schema{}
	for name, t := range map[string]reflect.Type{"ErrorModel": reflect.TypeOf(huma.ErrorModel{}), "ErrorDetail": reflect.TypeOf(huma.ErrorDetail{})} {
		if sc := m[name]; sc != nil && reg.TypeFromRef(prefix+name) == t {
			dropped[name] = sc
			delete(m, name)
		}
	}
	if len(dropped) == 0 {
		return
	}
	b, err := json.Marshal(oapi)
	used := func(name string) bool { return err != nil || strings.Contains(string(b), strconv.Quote(prefix+name)) }
	switch {
	case used("ErrorModel"): // it refers to ErrorDetail
		for name, sc := range dropped {
			m[name] = sc
		}
	case used("ErrorDetail") && dropped["ErrorDetail"] != nil:
		m["ErrorDetail"] = dropped["ErrorDetail"]
	}
}

// handle registers one operation whose handler renders its own answer.
func handle[I any](s *server, api huma.API, op huma.Operation, fn func(context.Context, *reqState, *I) *rawOut) {
	s.owned[op.OperationID] = true
	// The request body is documented only after registration: given to
	// Huma, it would read and schema-validate the body before the handler
	// could authenticate (RULINGS R3 order).
	rb := op.RequestBody
	op.RequestBody = nil
	defer func() {
		if rb == nil {
			return
		}
		if pi := api.OpenAPI().Paths[op.Path]; pi != nil {
			for _, o := range []*huma.Operation{pi.Get, pi.Post, pi.Put, pi.Patch, pi.Delete} {
				if o != nil && o.OperationID == op.OperationID {
					o.RequestBody = rb
				}
			}
		}
	}()
	huma.Register(api, op, func(ctx context.Context, in *I) (*rawOut, error) {
		st := stateFrom(ctx)
		if st == nil {
			return nil, huma.Error500InternalServerError("httpapi: the API must use the humago adapter")
		}
		out := fn(ctx, st, in)
		st.own = true
		if out == nil {
			out = noContent()
		}
		return out, nil
	})
}

// documenter fills in the OpenAPI description of operations whose inputs
// and outputs are read and written by hand.
type documenter struct{ reg huma.Registry }

type schemaRef struct {
	s      func(huma.Registry) *huma.Schema
	binary bool
}

var (
	yapSchema = schemaRef{s: func(r huma.Registry) *huma.Schema {
		t := r.Schema(reflect.TypeOf(TaskYap{}), true, "TaskYap")
		n := r.Schema(reflect.TypeOf(NoteYap{}), true, "NoteYap")
		e := r.Schema(reflect.TypeOf(EventYap{}), true, "EventYap")
		return &huma.Schema{
			OneOf: []*huma.Schema{t, n, e},
			Discriminator: &huma.Discriminator{PropertyName: "kind", Mapping: map[string]string{
				"task": t.Ref, "note": n.Ref, "event": e.Ref,
			}},
		}
	}}
	// binarySchema documents an application/octet-stream answer by its
	// media type alone ({}), as OpenAPI 3.1 recommends; Huma's 3.0
	// downgrade turns that into {type: string, format: binary}. A schema
	// with format binary would carry contentMediaType into the 3.0
	// document, where it is invalid.
	binarySchema = schemaRef{binary: true}
)

func (d *documenter) schema(v any) *huma.Schema {
	if sr, ok := v.(schemaRef); ok {
		if sr.s == nil {
			return nil
		}
		return sr.s(d.reg)
	}
	t := reflect.TypeOf(v)
	return d.reg.Schema(t, true, t.Name())
}

func (d *documenter) body(v any, required bool) *huma.RequestBody {
	return &huma.RequestBody{
		Required: required,
		Content:  map[string]*huma.MediaType{"application/json": {Schema: d.schema(v)}},
	}
}

// op documents the success answer and the error answers of an operation.
func (d *documenter) op(op huma.Operation, success int, body any, errs ...int) huma.Operation {
	op.DefaultStatus = success
	op.Responses = map[string]*huma.Response{}
	r := &huma.Response{Description: http.StatusText(success)}
	if body != nil {
		ct := "application/json"
		if sr, ok := body.(schemaRef); ok && sr.binary {
			ct = "application/octet-stream"
			r.Headers = map[string]*huma.Param{"ETag": {Description: "Entity tag of the document state", Schema: &huma.Schema{Type: "string"}}}
		}
		r.Content = map[string]*huma.MediaType{ct: {Schema: d.schema(body)}}
	}
	if strings.Contains(op.OperationID, "List") || strings.Contains(op.OperationID, "Yap") {
		if success != http.StatusNoContent && op.OperationID != "listYaps" && op.OperationID != "accountLists" {
			if r.Headers == nil {
				r.Headers = map[string]*huma.Param{}
			}
			r.Headers["ETag"] = &huma.Param{Description: "Entity tag; send it back in If-Match", Schema: &huma.Schema{Type: "string"}}
		}
	}
	op.Responses[strconv.Itoa(success)] = r
	ps := problemSchema(d.reg)
	for _, code := range errs {
		er := &huma.Response{
			Description: http.StatusText(code),
			Content:     map[string]*huma.MediaType{problemMediaType: {Schema: ps}},
		}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			er.Headers = map[string]*huma.Param{"Retry-After": {Description: "Seconds to wait", Schema: &huma.Schema{Type: "integer"}}}
		}
		op.Responses[strconv.Itoa(code)] = er
	}
	documentHeaders(&op, success)
	return op
}

// Headers the middleware and handlers set on answers, described once.
var (
	rateLimitHeaders = map[string]*huma.Param{
		"X-RateLimit-Limit":     {Description: "Requests allowed in the current window of the operation's rate-limit group (absent when rate limiting is off)", Schema: &huma.Schema{Type: "integer"}},
		"X-RateLimit-Remaining": {Description: "Requests left in the current window (absent when rate limiting is off)", Schema: &huma.Schema{Type: "integer"}},
		"X-RateLimit-Reset":     {Description: "Seconds until the current window resets (absent when rate limiting is off)", Schema: &huma.Schema{Type: "integer"}},
	}
	headerNoStore  = &huma.Param{Description: "no-store: the answer carries a secret shown once", Schema: &huma.Schema{Type: "string"}}
	headerRefusal  = &huma.Param{Description: "no-store", Schema: &huma.Schema{Type: "string"}}
	headerPrivate  = &huma.Param{Description: "private, no-cache: the answer depends on the credential", Schema: &huma.Schema{Type: "string"}}
	headerReplayed = &huma.Param{Description: "true when the answer replays the first answer to this Idempotency-Key", Schema: &huma.Schema{Type: "string", Enum: []any{"true"}}}
	secretAnswers  = map[string]bool{"createList": true, "createAccount": true, "issuePermission": true, "rotateOwner": true}
)

// documentHeaders adds the rate-limit headers to every answer of op, and
// Cache-Control and Idempotent-Replayed where the handlers set them:
// answers about a list are private (errors too, since the credential is
// checked first), answers carrying a code or key once are no-store, and so
// are the sync endpoint's refusals (package ysync).
func documentHeaders(op *huma.Operation, success int) {
	idempotent := slices.Contains(op.Parameters, paramIdempotency)
	aboutList := strings.Contains(op.Path, "{ref}")
	for code, r := range op.Responses {
		if r.Headers == nil {
			r.Headers = map[string]*huma.Param{}
		}
		for name, h := range rateLimitHeaders {
			r.Headers[name] = h
		}
		ok := code == strconv.Itoa(success) || code == "304"
		switch {
		case op.OperationID == "sync":
			if !ok {
				r.Headers["Cache-Control"] = headerRefusal
			}
		case ok && secretAnswers[op.OperationID]:
			r.Headers["Cache-Control"] = headerNoStore
		case aboutList || (ok && op.OperationID == "accountLists"): // answers for one credential
			r.Headers["Cache-Control"] = headerPrivate
		}
		if idempotent && ok {
			r.Headers["Idempotent-Replayed"] = headerReplayed
		}
	}
}

// Manually documented parameters (read by the handlers, not by Huma, so that
// they are validated after authentication).
var (
	one, twoHundred     = 1.0, 200.0
	paramCursor         = &huma.Param{Name: "cursor", In: "query", Description: "Opaque cursor: the nextCursor of the previous page", Schema: &huma.Schema{Type: "string"}}
	paramLimit          = &huma.Param{Name: "limit", In: "query", Description: "Page size, 1 to 200", Schema: &huma.Schema{Type: "integer", Minimum: &one, Maximum: &twoHundred, Default: 50}}
	paramIncludeDeleted = &huma.Param{Name: "includeDeleted", In: "query", Description: "Include soft-deleted yaps", Schema: &huma.Schema{Type: "boolean", Default: false}}
	paramSV             = &huma.Param{Name: "sv", In: "query", Description: "Yjs state vector, base64 (standard or URL-safe alphabet, padding optional)", Schema: &huma.Schema{Type: "string"}}
	paramIdempotency    = &huma.Param{Name: "Idempotency-Key", In: "header", Description: "A retry with the same key and body replays the first answer (for POST /lists, the owner code too, to the same client address or account): use a random key such as a UUIDv4", Schema: &huma.Schema{Type: "string", MaxLength: intPtr(255)}}
	paramIfNoneMatch    = &huma.Param{Name: "If-None-Match", In: "header", Description: "ETag of a snapshot already held; 304 if it still matches (without sv)", Schema: &huma.Schema{Type: "string"}}
	paramIfMatch        = &huma.Param{Name: "If-Match", In: "header", Description: "ETag the change is based on; 412 precondition_failed if it no longer matches", Schema: &huma.Schema{Type: "string"}}
	paramAccountKey     = &huma.Param{Name: "X-Account-Key", In: "header", Description: "Account key (yak_...) of the account to roll the list into", Schema: &huma.Schema{Type: "string"}}
)

func intPtr(n int) *int { return &n }

// Request bodies, for the OpenAPI document only (the handlers parse bodies
// themselves so that absent and null differ).

// CreateListRequest is the body of POST /lists.
type CreateListRequest struct {
	Title *string `json:"title,omitempty" maxLength:"200" nullable:"true" doc:"Display title; null is the empty title"`
	Name  *string `json:"name,omitempty" maxLength:"200" nullable:"true" doc:"Alias of title"`
	Kind  string  `json:"kind,omitempty" enum:"task,note,event,tasks,notes,events" doc:"List kind; plural spellings accepted and stored singular; default task"`
}

// PatchListRequest is the body of PATCH /lists/{ref}. It lists the
// read-only members of a List too: a client may send back what it read,
// and the server ignores them (any value), while other members are 400.
type PatchListRequest struct {
	Title      *string `json:"title,omitempty" maxLength:"200" nullable:"true" doc:"null sets the empty title"`
	Name       *string `json:"name,omitempty" maxLength:"200" nullable:"true" doc:"Alias of title"`
	Kind       string  `json:"kind,omitempty" enum:"task,note,event,tasks,notes,events"`
	ArchivedAt *string `json:"archivedAt,omitempty" format:"date-time" nullable:"true" doc:"A date-time archives the list, null unarchives it"`

	Ref        json.RawMessage `json:"ref,omitempty" doc:"Read-only: accepted and ignored (any value)"`
	CreatedAt  json.RawMessage `json:"createdAt,omitempty" doc:"Read-only: accepted and ignored (any value)"`
	UpdatedAt  json.RawMessage `json:"updatedAt,omitempty" doc:"Read-only: accepted and ignored (any value)"`
	RolledUpAt json.RawMessage `json:"rolledUpAt,omitempty" doc:"Read-only: accepted and ignored (any value)"`
	DocVersion json.RawMessage `json:"docVersion,omitempty" doc:"Read-only: accepted and ignored (any value)"`
}

// YapRequest is the body of POST and PATCH on yaps: the members of one
// kind, and the read-only members of a yap, which a client may send back as
// it read them and the server ignores (any value; RULINGS R6).
type YapRequest struct {
	Kind      string   `json:"kind,omitempty" enum:"task,note,event" doc:"Default on POST: the list's kind; cannot change on PATCH"`
	Content   string   `json:"content,omitempty" maxLength:"1000" doc:"task (required on POST): one line"`
	Status    string   `json:"status,omitempty" enum:"open,in_progress,done,cancelled" doc:"task (required on POST)"`
	Priority  *string  `json:"priority,omitempty" enum:"low,medium,high,urgent" nullable:"true" doc:"task"`
	DueAt     *string  `json:"dueAt,omitempty" format:"date-time" nullable:"true" doc:"task"`
	Tags      []string `json:"tags,omitempty" maxItems:"50" doc:"task, note"`
	Title     *string  `json:"title,omitempty" maxLength:"1000" nullable:"true" doc:"note (optional), event (required on POST)"`
	Body      string   `json:"body,omitempty" maxLength:"100000" doc:"note (required on POST)"`
	StartsAt  string   `json:"startsAt,omitempty" format:"date-time" doc:"event (required on POST)"`
	EndsAt    *string  `json:"endsAt,omitempty" format:"date-time" nullable:"true" doc:"event"`
	Location  *string  `json:"location,omitempty" maxLength:"1000" nullable:"true" doc:"event"`
	DeletedAt *string  `json:"deletedAt,omitempty" nullable:"true" doc:"PATCH only: null restores a soft-deleted yap"`

	ID           json.RawMessage `json:"id,omitempty" doc:"Read-only (server-assigned): accepted and ignored (any value)"`
	ListID       json.RawMessage `json:"listId,omitempty" doc:"Read-only (server-assigned): accepted and ignored (any value)"`
	YapCreatedAt json.RawMessage `json:"createdAt,omitempty" doc:"Read-only (server-assigned): accepted and ignored (any value)"`
	YapUpdatedAt json.RawMessage `json:"updatedAt,omitempty" doc:"Read-only (server-assigned): accepted and ignored (any value)"`
}

// TransformSchema documents what struct tags cannot: each tag is at most
// 100 characters, and deletedAt may only be null.
func (YapRequest) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	if tags := s.Properties["tags"]; tags != nil && tags.Items != nil {
		tags.Items.MaxLength = new(yaps.MaxTagLen)
	}
	if del := s.Properties["deletedAt"]; del != nil {
		del.Enum = []any{nil}
	}
	return s
}

// IssuePermissionRequest is the body of POST /lists/{ref}/permissions.
type IssuePermissionRequest struct {
	Role   string   `json:"role" enum:"owner,editor,viewer,agent"`
	Label  *string  `json:"label,omitempty" maxLength:"200" nullable:"true" doc:"null is the empty label"`
	Scopes []string `json:"scopes,omitempty" enum:"tasks:write,yaps:write" doc:"Agent codes only; default tasks:write"`
}
