package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/yaps-dev/yaps/yaps"
)

// rawOut is the output of every operation: the handlers render the body
// themselves so that idempotent replays are byte-for-byte and every error
// has the Problem shape.
type rawOut struct {
	Status      int
	ContentType string `header:"Content-Type" hidden:"true"`
	ETag        string `header:"ETag" hidden:"true"`
	Body        []byte
}

func noContent() *rawOut { return &rawOut{Status: http.StatusNoContent} }

// replayOut writes a stored idempotent answer back verbatim.
func (st *reqState) replayOut(rec *yaps.IdempotencyRecord) *rawOut {
	st.header().Set("Idempotent-Replayed", "true")
	status := rec.Status
	if status == 0 {
		status = http.StatusOK
	}
	ct := "application/json"
	if status >= 400 {
		ct = problemMediaType
	}
	return &rawOut{Status: status, ContentType: ct, ETag: etag(rec.ETag), Body: rec.Body}
}

// Inputs. Only path parameters go through Huma; query parameters, headers
// and bodies are read by the handlers after authentication, so the order
// of checks of RULINGS R3 holds (404, 401, 403, then 400).

type noInput struct{}

type refInput struct {
	Ref string `path:"ref" doc:"List reference"`
}

type yapInput struct {
	Ref   string `path:"ref" doc:"List reference"`
	YapID string `path:"yapId" doc:"Yap id"`
}

type permInput struct {
	Ref          string `path:"ref" doc:"List reference"`
	PermissionID string `path:"permissionId" doc:"Permission id"`
}

var (
	writers   = []yaps.Role{yaps.RoleOwner, yaps.RoleEditor, yaps.RoleAgent}
	editors   = []yaps.Role{yaps.RoleOwner, yaps.RoleEditor}
	ownerOnly = []yaps.Role{yaps.RoleOwner}
)

// titleField reads the list title from "title" or its alias "name".
func titleField(o *object) (yaps.Field[string], error) {
	t, err := o.text("title", lineText)
	if err != nil {
		return t, err
	}
	n, err := o.text("name", lineText)
	if err != nil {
		return n, err
	}
	if t.Present && n.Present && t != n {
		return t, errInvalid("title and name are the same member; they differ")
	}
	if t.Present {
		return t, nil
	}
	return n, nil
}

// listKindField reads a list kind (plural spellings accepted, RULINGS R2).
func listKindField(o *object) (yaps.Field[yaps.Kind], error) {
	f, err := o.text("kind", lineText)
	if err != nil || !f.Present {
		return yaps.Field[yaps.Kind]{}, err
	}
	if f.Null {
		return yaps.Field[yaps.Kind]{}, errInvalid("kind must be one of task, note, event")
	}
	k, err := yaps.ParseKind(f.Value, true)
	if err != nil {
		return yaps.Field[yaps.Kind]{}, err
	}
	return yaps.Set(k), nil
}

func (s *server) createList(ctx context.Context, st *reqState, _ *noInput) *rawOut {
	acct, acctErr := s.account(st.r)
	if out := s.limit(ctx, st, yaps.LimitCreateList, acct, nil); out != nil {
		return out
	}
	if acctErr != nil {
		return st.errorOut(acctErr)
	}
	if out := st.checkQuery(); out != nil {
		return out
	}
	body, err := st.readBody()
	if err != nil {
		return st.errorOut(err)
	}
	o, err := decodeObject(body, true)
	if err != nil {
		return st.errorOut(err)
	}
	title, err := titleField(o)
	if err != nil {
		return st.errorOut(err)
	}
	if title.Null {
		title = yaps.Field[string]{}
	}
	kind, err := listKindField(o)
	if err != nil {
		return st.errorOut(err)
	}
	if err := o.unknown(); err != nil {
		return st.errorOut(err)
	}
	key, err := st.idempotencyKey()
	if err != nil {
		return st.errorOut(err)
	}
	in := yaps.CreateListInput{
		Title:          title,
		IdempotencyKey: key,
		RequestHash:    bodyHash(body),
		ClientIP:       st.ip,
		Account:        acct,
	}
	if kind.Present {
		in.Kind = yaps.Set(string(kind.Value))
	}
	created, err := s.svc.CreateList(ctx, in)
	if err != nil {
		return st.errorOut(err)
	}
	st.header().Set("Cache-Control", "no-store") // the answer carries the owner code, replayed or not
	if created.Replay != nil {
		return st.replayOut(created.Replay)
	}
	b, err := Render(created)
	if err != nil {
		return st.errorOut(err)
	}
	out := &rawOut{Status: http.StatusCreated, ContentType: "application/json", Body: b}
	out.ETag = etag(yaps.ListETag(created.List))
	return out
}

func (s *server) getList(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitRead)
	if out != nil {
		return out
	}
	out = listWithRoleOut(a.List, a.Permission.Role)
	out.ETag = etag(yaps.ListETag(a.List))
	return out
}

func (s *server) patchList(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, editors...)
	if out != nil {
		return out
	}
	var p yaps.ListPatch
	// On an archived list only an unarchive may proceed: anything else is
	// 403, before the body's own errors (RULINGS R3), as the service
	// answers a valid body.
	bad := func(err error) *rawOut {
		if a.List.Archived() && !(p.ArchivedAt.Present && p.ArchivedAt.Null) {
			return st.requireWritable(a)
		}
		return st.errorOut(err)
	}
	body, err := st.readBody()
	if err != nil {
		return bad(err)
	}
	o, err := decodeObject(body, true)
	if err != nil {
		return bad(err)
	}
	if p.ArchivedAt, err = o.time("archivedAt"); err != nil {
		return bad(err)
	}
	if p.Title, err = titleField(o); err != nil {
		return bad(err)
	}
	if p.Kind, err = listKindField(o); err != nil {
		return bad(err)
	}
	o.ignore("ref", "createdAt", "updatedAt", "rolledUpAt", "docVersion") // read-only members echoed back
	if err := o.unknown(); err != nil {
		return bad(err)
	}
	l, err := s.svc.UpdateList(ctx, a, p, st.ifMatch())
	if err != nil {
		return st.errorOut(err)
	}
	out = listOut(http.StatusOK, l)
	out.ETag = etag(yaps.ListETag(l))
	return out
}

func (s *server) deleteList(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, ownerOnly...)
	if out != nil {
		return out
	}
	if err := s.svc.ArchiveList(ctx, a, st.ifMatch()); err != nil {
		return st.errorOut(err)
	}
	return noContent()
}

func (s *server) listYaps(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitRead)
	if out != nil {
		return out
	}
	q, limit, cursor, err := st.page()
	if err != nil {
		return st.errorOut(err)
	}
	incl, err := parseBool("includeDeleted", q.Get("includeDeleted"))
	if err != nil {
		return st.errorOut(err)
	}
	page, err := s.svc.ListYaps(ctx, a, cursor, limit, incl)
	if err != nil {
		return st.errorOut(err)
	}
	return yapPageOut(st, page)
}

func (s *server) getYap(ctx context.Context, st *reqState, in *yapInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitRead)
	if out != nil {
		return out
	}
	if out := st.requireID(in.YapID, "yap"); out != nil {
		return out
	}
	y, err := s.svc.GetYap(ctx, a, in.YapID)
	if err != nil {
		return st.errorOut(err)
	}
	out = yapOut(http.StatusOK, y)
	out.ETag = etag(yaps.YapETag(y))
	return out
}

// kindFields names the members of each yap kind (INTERFACE §2.2).
var kindFields = map[yaps.Kind][]string{
	yaps.KindTask:  {"content", "status", "priority", "dueAt", "tags"},
	yaps.KindNote:  {"title", "body", "tags"},
	yaps.KindEvent: {"title", "startsAt", "endsAt", "location"},
}

var allYapFields = []string{"content", "status", "priority", "dueAt", "tags", "title", "body", "startsAt", "endsAt", "location"}

// parseYap reads a yap body. For POST (create) kind is the kind of the new
// yap; for PATCH it is "" unless the body names it. Members of another kind
// are 400 whenever the kind is known; id, listId, createdAt and updatedAt
// are server-assigned and ignored (RULINGS R6); any other member is 400.
func parseYap(o *object, kind yaps.Kind, create bool) (yaps.YapFields, error) {
	var f yaps.YapFields
	var err error
	o.ignore("id", "listId", "createdAt", "updatedAt")
	kf, err := o.text("kind", lineText)
	if err != nil {
		return f, err
	}
	if kf.Present {
		if kf.Null {
			return f, errInvalid("kind must be one of task, note, event")
		}
		k, err := yaps.ParseKind(kf.Value, false)
		if err != nil {
			return f, err
		}
		if create || kind == "" {
			kind = k
		}
		f.Kind = yaps.Set(k)
	}
	if kind != "" {
		allowed := map[string]bool{}
		for _, n := range kindFields[kind] {
			allowed[n] = true
		}
		for _, n := range allYapFields {
			if o.has(n) && !allowed[n] {
				return f, errInvalid("field %q does not apply to %s yaps", n, kind)
			}
		}
	}
	if f.Content, err = o.text("content", lineText); err != nil {
		return f, err
	}
	st, err := o.text("status", lineText)
	if err != nil {
		return f, err
	}
	if st.Present && !st.Null && !yaps.TaskStatus(st.Value).Valid() {
		return f, errInvalid("status must be one of open, in_progress, done, cancelled")
	}
	f.Status = yaps.Field[yaps.TaskStatus]{Present: st.Present, Null: st.Null, Value: yaps.TaskStatus(st.Value)}
	pr, err := o.text("priority", lineText)
	if err != nil {
		return f, err
	}
	if pr.Present && !pr.Null && !yaps.Priority(pr.Value).Valid() {
		return f, errInvalid("priority must be one of low, medium, high, urgent (or null)")
	}
	f.Priority = yaps.Field[yaps.Priority]{Present: pr.Present, Null: pr.Null, Value: yaps.Priority(pr.Value)}
	if f.DueAt, err = o.time("dueAt"); err != nil {
		return f, err
	}
	if f.Tags, err = o.strings("tags"); err != nil {
		return f, err
	}
	if f.Title, err = o.text("title", lineText); err != nil {
		return f, err
	}
	if f.Body, err = o.text("body", multiText); err != nil {
		return f, err
	}
	if f.StartsAt, err = o.time("startsAt"); err != nil {
		return f, err
	}
	if f.EndsAt, err = o.time("endsAt"); err != nil {
		return f, err
	}
	if f.Location, err = o.text("location", lineText); err != nil {
		return f, err
	}
	del, err := o.time("deletedAt")
	if err != nil {
		return f, errInvalid("deletedAt can only be null (to restore a deleted yap)")
	}
	if del.Present && !del.Null {
		return f, errInvalid("deletedAt can only be null (to restore a deleted yap); use DELETE to delete")
	}
	if !create {
		f.DeletedAt = del
	}
	return f, o.unknown()
}

func (s *server) createYap(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, writers...)
	if out != nil {
		return out
	}
	if out := st.requireWritable(a); out != nil {
		if rec := s.archivedReplay(ctx, st, a); rec != nil {
			return st.replayOut(rec)
		}
		return out
	}
	body, err := st.readBody()
	if err != nil {
		return st.errorOut(err)
	}
	o, err := decodeObject(body, false)
	if err != nil {
		return st.errorOut(err)
	}
	kind := a.List.Kind
	if kind == "" {
		kind = yaps.KindTask
	}
	// The scope check comes before the body check (RULINGS R3), by the
	// kind the body names, if it names one.
	scopeKind := kind
	if raw, ok := o.m["kind"]; ok {
		if k, ok := jsonString(raw); ok {
			scopeKind = yaps.Kind(k)
		}
	}
	if err := s.svc.CheckKindScope(a, scopeKind); err != nil {
		return st.errorOut(err)
	}
	f, err := parseYap(o, kind, true)
	if err != nil {
		return st.errorOut(err)
	}
	if f.Kind.Present {
		kind = f.Kind.Value
	}
	key, err := st.idempotencyKey()
	if err != nil {
		return st.errorOut(err)
	}
	var hash []byte // identifies the request for an Idempotency-Key's replay
	if key != "" {
		hash = bodyHash(body)
	}
	y, replay, err := s.svc.CreateYap(ctx, a, kind, f, key, hash)
	if err != nil {
		return st.errorOut(err)
	}
	if replay != nil {
		return st.replayOut(replay)
	}
	out = pooledYapOut(st, http.StatusCreated, y)
	out.ETag = etag(yaps.YapETag(y))
	return out
}

func (s *server) patchYap(ctx context.Context, st *reqState, in *yapInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, writers...)
	if out != nil {
		return out
	}
	if out := st.requireID(in.YapID, "yap"); out != nil {
		return out
	}
	if out := st.requireWritable(a); out != nil {
		return out
	}
	deleted, err := s.svc.CheckYapScope(ctx, a, in.YapID)
	if err != nil {
		return st.errorOut(err)
	}
	body, err := st.readBody()
	if err != nil {
		return st.errorOut(err)
	}
	o, err := decodeObject(body, true)
	if err != nil {
		if deleted {
			err = errYapNotFound // not a restore (RULINGS R3: 404 before the body check)
		}
		return st.errorOut(err)
	}
	if raw, ok := o.m["deletedAt"]; deleted && (!ok || !isNull(raw)) {
		return st.errorOut(errYapNotFound)
	}
	f, err := parseYap(o, "", false)
	if err != nil {
		return st.errorOut(err)
	}
	y, err := s.svc.UpdateYap(ctx, a, in.YapID, f, st.ifMatch())
	if err != nil {
		return st.errorOut(err)
	}
	out = yapOut(http.StatusOK, y)
	out.ETag = etag(yaps.YapETag(y))
	return out
}

// errYapNotFound is what a write to a soft-deleted yap that is not a
// restore answers, as the service does.
var errYapNotFound = yaps.Errorf(yaps.ENOTFOUND, "yap not found")

// archivedReplay returns the first answer to a yap create the list took
// before it was archived, when the request is a retry of it (same
// Idempotency-Key and body, RULINGS R6), or nil: the request is then
// refused as archived, before its body is judged.
func (s *server) archivedReplay(ctx context.Context, st *reqState, a *yaps.Actor) *yaps.IdempotencyRecord {
	key, err := st.idempotencyKey()
	if err != nil || key == "" {
		return nil
	}
	body, err := st.readBody()
	if err != nil {
		return nil
	}
	rec, err := s.svc.CreateYapReplay(ctx, a, key, bodyHash(body))
	if err != nil {
		return nil
	}
	return rec
}

func (s *server) deleteYap(ctx context.Context, st *reqState, in *yapInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, writers...)
	if out != nil {
		return out
	}
	if out := st.requireID(in.YapID, "yap"); out != nil {
		return out
	}
	if out := st.requireWritable(a); out != nil {
		return out
	}
	if err := s.svc.DeleteYap(ctx, a, in.YapID, st.ifMatch()); err != nil {
		return st.errorOut(err)
	}
	return noContent()
}

func (s *server) listPermissions(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitRead, ownerOnly...)
	if out != nil {
		return out
	}
	ps, err := s.svc.Permissions(ctx, a)
	if err != nil {
		return st.errorOut(err)
	}
	res := Permissions{Permissions: make([]Permission, 0, len(ps))}
	for _, p := range ps {
		res.Permissions = append(res.Permissions, renderPermission(p))
	}
	return jsonOut(http.StatusOK, res)
}

func (s *server) issuePermission(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, ownerOnly...)
	if out != nil {
		return out
	}
	body, err := st.readBody()
	if err != nil {
		return st.errorOut(err)
	}
	o, err := decodeObject(body, false)
	if err != nil {
		return st.errorOut(err)
	}
	rf, err := o.text("role", lineText)
	if err != nil {
		return st.errorOut(err)
	}
	if !rf.Present || rf.Null {
		return st.errorOut(errInvalid("role is required: one of owner, editor, viewer, agent"))
	}
	role := yaps.Role(rf.Value)
	if !role.Valid() {
		return st.errorOut(errInvalid("role must be one of owner, editor, viewer, agent"))
	}
	lf, err := o.text("label", lineText)
	if err != nil {
		return st.errorOut(err)
	}
	sf, err := o.strings("scopes")
	if err != nil {
		return st.errorOut(err)
	}
	var scopes []yaps.Scope
	if sf.Present && !sf.Null {
		scopes = []yaps.Scope{} // [] is not "absent" (IssuePermission refuses it for agents)
		for _, sc := range sf.Value {
			if !yaps.Scope(sc).Valid() {
				return st.errorOut(errInvalid("scopes must be among tasks:write, yaps:write"))
			}
			scopes = append(scopes, yaps.Scope(sc))
		}
		if len(scopes) > 0 && role != yaps.RoleAgent {
			return st.errorOut(errInvalid("scopes apply to agent codes only"))
		}
	}
	if err := o.unknown(); err != nil {
		return st.errorOut(err)
	}
	issued, err := s.svc.IssuePermission(ctx, a, role, lf.Value, scopes)
	if err != nil {
		return st.errorOut(err)
	}
	st.header().Set("Cache-Control", "no-store")
	return jsonOut(http.StatusCreated, IssuedPermission{Permission: renderPermission(issued.Permission), Code: issued.Code})
}

func (s *server) revokePermission(ctx context.Context, st *reqState, in *permInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, ownerOnly...)
	if out != nil {
		return out
	}
	if out := st.requireID(in.PermissionID, "permission"); out != nil {
		return out
	}
	if err := s.svc.RevokePermission(ctx, a, in.PermissionID); err != nil {
		return st.errorOut(err)
	}
	return noContent()
}

func (s *server) rotateOwner(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation, ownerOnly...)
	if out != nil {
		return out
	}
	if err := st.emptyBody(); err != nil {
		return st.errorOut(err)
	}
	code, err := s.svc.RotateOwner(ctx, a)
	if err != nil {
		return st.errorOut(err)
	}
	st.header().Set("Cache-Control", "no-store")
	return jsonOut(http.StatusOK, RotatedOwner{OwnerCode: code})
}

func (s *server) rollup(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitMutation)
	if out != nil {
		return out
	}
	if a.Account == nil {
		return st.errorOut(yaps.Errorf(yaps.EUNAUTHORIZED, "rollup needs an account credential%s beside the owner code", s.accountHint("X-Account-Key")))
	}
	if out := st.requireRole(a, ownerOnly...); out != nil {
		return out
	}
	if err := st.emptyBody(); err != nil {
		return st.errorOut(err)
	}
	merged, err := s.svc.Rollup(ctx, a, a.Account)
	if err != nil {
		return st.errorOut(err)
	}
	return jsonOut(http.StatusOK, RollupResult{Merged: merged})
}

func (s *server) snapshot(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitRead)
	if out != nil {
		return out
	}
	q, err := st.query()
	if err != nil {
		return st.errorOut(err)
	}
	var sv []byte
	if v := q.Get("sv"); v != "" {
		b, err := decodeB64(v)
		if err != nil {
			return st.errorOut(err)
		}
		sv = b
	}
	data, tag, err := s.svc.Snapshot(ctx, a, sv)
	if err != nil {
		return st.errorOut(err)
	}
	tag = etag(tag)
	st.header().Set("Cache-Control", "private, no-cache")
	if sv == nil && tag != "" && matchesETag(st.r.Header.Get("If-None-Match"), tag) {
		return &rawOut{Status: http.StatusNotModified, ETag: tag}
	}
	if data == nil {
		data = []byte{}
	}
	return &rawOut{Status: http.StatusOK, ContentType: "application/octet-stream", ETag: tag, Body: data}
}

// matchesETag reports whether an If-None-Match header names tag.
func matchesETag(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == strings.TrimPrefix(tag, "W/") {
			return true
		}
	}
	return false
}

func (s *server) audit(ctx context.Context, st *reqState, in *refInput) *rawOut {
	a, out := s.actor(ctx, st, in.Ref, yaps.LimitRead, ownerOnly...)
	if out != nil {
		return out
	}
	_, limit, cursor, err := st.page()
	if err != nil {
		return st.errorOut(err)
	}
	page, err := s.svc.Audit(ctx, a, cursor, limit)
	if err != nil {
		return st.errorOut(err)
	}
	res := AuditPage{Entries: make([]AuditEntry, 0, len(page.Entries)), NextCursor: cursorPtr(page.NextCursor)}
	for _, e := range page.Entries {
		res.Entries = append(res.Entries, renderAudit(e))
	}
	return jsonOut(http.StatusOK, res)
}

func (s *server) createAccount(ctx context.Context, st *reqState, _ *noInput) *rawOut {
	if out := s.limit(ctx, st, yaps.LimitCreateList, nil, nil); out != nil {
		return out
	}
	// No body, like rollup and rotate-owner: nothing, null or {}; members,
	// malformed JSON (400) and oversized bodies (413) create no account.
	if out := st.checkQuery(); out != nil {
		return out
	}
	if err := st.emptyBody(); err != nil {
		return st.errorOut(err)
	}
	acct, key, err := s.svc.CreateAccount(ctx)
	if err != nil {
		return st.errorOut(err)
	}
	st.header().Set("Cache-Control", "no-store")
	return jsonOut(http.StatusCreated, CreatedAccount{
		Account:    Account{ID: acct.ID, CreatedAt: yapsTime(acct)},
		AccountKey: key,
	})
}

func yapsTime(a *yaps.Account) string { return yaps.FormatTime(a.CreatedAt) }

func (s *server) accountLists(ctx context.Context, st *reqState, _ *noInput) *rawOut {
	acct, acctErr := s.account(st.r)
	if out := s.limit(ctx, st, yaps.LimitRead, acct, nil); out != nil {
		return out
	}
	if acctErr != nil {
		return st.errorOut(acctErr)
	}
	if acct == nil {
		return st.errorOut(yaps.Errorf(yaps.EUNAUTHORIZED, "GET /lists needs an account credential%s", s.accountHint("Authorization: Bearer yak_...")))
	}
	_, limit, cursor, err := st.page()
	if err != nil {
		return st.errorOut(err)
	}
	page, err := s.svc.AccountLists(ctx, acct, cursor, limit)
	if err != nil {
		return st.errorOut(err)
	}
	st.header().Set("Cache-Control", "private, no-cache")
	res := AccountLists{Lists: make([]List, 0, len(page.Lists)), NextCursor: cursorPtr(page.NextCursor)}
	for _, l := range page.Lists {
		res.Lists = append(res.Lists, renderList(l))
	}
	return jsonOut(http.StatusOK, res)
}
