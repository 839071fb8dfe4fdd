package yaps

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// ListAuthStore is an optional Store extension: ListWithPermission returns
// the list ref and the permission (revoked or not) whose code hash is hash,
// read together (one query); a nil permission when no permission has that
// hash, ENOTFOUND for an unknown ref. Authenticate uses it when the store
// has it, else List then PermissionByHash.
type ListAuthStore interface {
	ListWithPermission(ctx context.Context, ref string, hash []byte) (*List, *Permission, error)
}

// Authenticate resolves a list ref and a code to an Actor. Unknown ref:
// ENOTFOUND (checked first, RULINGS R3); missing, malformed, revoked or
// foreign code: EUNAUTHORIZED. The edge fills in Actor.Account and
// Actor.ClientIP. Codes are looked up by their SHA-256 and the stored hash
// is compared in constant time; codes are never logged.
func (s *Service) Authenticate(ctx context.Context, ref, code string) (*Actor, error) {
	return s.authenticate(ctx, ref, code, true)
}

// AuthenticateFresh is Authenticate asking the store, never the cache: for
// a check that must see a revocation another process made a moment ago
// (the cache may hold the code for Config.AuthCacheTTL after one it was
// not told of). A refusal drops what the cache holds of the list.
func (s *Service) AuthenticateFresh(ctx context.Context, ref, code string) (*Actor, error) {
	a, err := s.authenticate(ctx, ref, code, false)
	if IsCode(err, EUNAUTHORIZED) || IsCode(err, ENOTFOUND) {
		s.auth.forget(ref)
	}
	return a, err
}

func (s *Service) authenticate(ctx context.Context, ref, code string, cached bool) (*Actor, error) {
	if !wellFormedRef(ref) {
		// Never hand the store bytes it may choke on (a NUL is an error
		// in Postgres, not a miss).
		return nil, Errorf(ENOTFOUND, "no such list")
	}
	var (
		l      *List
		p      *Permission
		err    error
		joined bool
	)
	h := []byte(nil)
	if code != "" && WellFormedCode(code) {
		h = HashSecret(code)
		if cached {
			if a, ok := s.auth.actor(ref, h); ok {
				return a, nil
			}
		}
	}
	ticket := s.auth.ticket()
	if las, ok := s.cfg.Store.(ListAuthStore); ok && h != nil {
		// One query for the list and the code's permission.
		if l, p, err = las.ListWithPermission(ctx, ref, h); err != nil {
			return nil, err
		}
		joined = true
	} else if l, err = s.cfg.Store.List(ctx, ref); err != nil {
		return nil, err
	}
	if code == "" {
		return nil, Errorf(EUNAUTHORIZED, "a permission code is required")
	}
	if h == nil {
		return nil, Errorf(EUNAUTHORIZED, "the permission code is malformed")
	}
	if p == nil && joined {
		return nil, Errorf(EUNAUTHORIZED, "the permission code is not valid")
	}
	if p == nil {
		p, err = s.cfg.Store.PermissionByHash(ctx, h)
		if IsCode(err, ENOTFOUND) {
			return nil, Errorf(EUNAUTHORIZED, "the permission code is not valid")
		}
		if err != nil {
			return nil, err
		}
	}
	if !SameHash(p.CodeHash, h) || p.ListRef != l.Ref {
		return nil, Errorf(EUNAUTHORIZED, "the permission code is not valid for this list")
	}
	if !p.Active() {
		return nil, Errorf(EUNAUTHORIZED, "the permission code was revoked")
	}
	s.auth.fill(ticket, l, p)
	return &Actor{List: l, Permission: p}, nil
}

// Permissions lists the active permissions (owner).
func (s *Service) Permissions(ctx context.Context, a *Actor) ([]*Permission, error) {
	if err := a.can(opManage, ""); err != nil {
		return nil, err
	}
	return s.cfg.Store.Permissions(ctx, a.List.Ref)
}

// IssuePermission issues a new code (owner). scopes are only valid for the
// agent role (EINVALID otherwise); an agent with nil scopes gets
// tasks:write (R5's default). An empty, non-nil list is EINVALID for an
// agent: whoever sent it asked for no write scope, and granting the default
// instead would give more than asked. Permissions can be managed on
// archived lists too (revoking a leaked code must always be possible).
func (s *Service) IssuePermission(ctx context.Context, a *Actor, role Role, label string, scopes []Scope) (*IssuedPermission, error) {
	if err := a.can(opManage, ""); err != nil {
		return nil, err
	}
	if !role.Valid() {
		return nil, Errorf(EINVALID, "role must be one of owner, editor, viewer, agent")
	}
	if err := CheckLabel(label); err != nil {
		return nil, err
	}
	if len(scopes) > 0 && role != RoleAgent {
		return nil, Errorf(EINVALID, "scopes are only valid for the agent role")
	}
	var sc []Scope
	for _, x := range scopes {
		if !x.Valid() {
			return nil, Errorf(EINVALID, "scope must be one of tasks:write, yaps:write")
		}
		if !slices.Contains(sc, x) {
			sc = append(sc, x)
		}
	}
	if role == RoleAgent && scopes != nil && len(scopes) == 0 {
		return nil, Errorf(EINVALID, "scopes must name at least one of tasks:write, yaps:write; leave it out for the default, tasks:write")
	}
	if role == RoleAgent && len(sc) == 0 {
		sc = []Scope{ScopeTasksWrite}
	}
	code := NewCode()
	p := &Permission{ID: newID(), ListRef: a.List.Ref, Role: role, Scopes: sc, Label: label,
		CreatedAt: s.now(), CodeHash: HashSecret(code)}
	err := s.cfg.Store.Update(ctx, a.List.Ref, func(tx Tx) error {
		if err := s.stillActive(tx, a); err != nil {
			return err
		}
		if err := tx.CreatePermission(p); err != nil {
			return err
		}
		return tx.AppendAudit(s.audit(a, "permission.issue", "", "role="+string(role)+" id="+p.ID))
	})
	if err != nil {
		return nil, internal(err, "could not issue the permission")
	}
	return &IssuedPermission{Permission: p, Code: code}, nil
}

// allActive is stillActive for each actor (several share a permission in a
// batch of sync updates; it is checked once).
func (s *Service) allActive(tx Tx, actors []*Actor) error {
	for i, a := range actors {
		if slices.ContainsFunc(actors[:i], func(b *Actor) bool { return b.Permission.ID == a.Permission.ID }) {
			continue
		}
		if err := s.stillActive(tx, a); err != nil {
			return err
		}
	}
	return nil
}

// stillActive re-checks inside the list's transaction that the actor's
// permission was not revoked since Authenticate.
func (s *Service) stillActive(tx Tx, a *Actor) error {
	if pa, ok := tx.(PermissionActiveTx); ok {
		found, active, err := pa.PermissionActive(a.Permission.ID)
		switch {
		case err != nil:
			return err
		case !found:
			return Errorf(EUNAUTHORIZED, "the permission code is not valid")
		case !active:
			return Errorf(EUNAUTHORIZED, "the permission code was revoked")
		}
		return nil
	}
	p, err := tx.Permission(a.Permission.ID)
	if err != nil {
		if IsCode(err, ENOTFOUND) {
			return Errorf(EUNAUTHORIZED, "the permission code is not valid")
		}
		return err
	}
	if !p.Active() {
		return Errorf(EUNAUTHORIZED, "the permission code was revoked")
	}
	return nil
}

// RevokePermission revokes a code (owner); the last owner code is
// EFORBIDDEN (rotate it instead). Revoking an already revoked permission
// succeeds without effect. Emits EventCodeRevoked.
func (s *Service) RevokePermission(ctx context.Context, a *Actor, id string) error {
	if err := a.can(opManage, ""); err != nil {
		return err
	}
	revoked := false
	err := s.cfg.Store.Update(ctx, a.List.Ref, func(tx Tx) error {
		if err := s.stillActive(tx, a); err != nil {
			return err
		}
		p, err := tx.Permission(id)
		if err != nil {
			return err
		}
		if p.ListRef != a.List.Ref {
			return Errorf(ENOTFOUND, "permission not found")
		}
		if !p.Active() {
			return nil
		}
		if p.Role == RoleOwner {
			n, err := tx.ActiveOwners()
			if err != nil {
				return err
			}
			if n <= 1 {
				return Errorf(EFORBIDDEN, "the last owner code cannot be revoked; rotate it instead")
			}
		}
		if err := tx.RevokePermission(id, s.now()); err != nil {
			return err
		}
		revoked = true
		return tx.AppendAudit(s.audit(a, "permission.revoke", "", "id="+id))
	})
	if err != nil {
		return internal(err, "could not revoke the permission")
	}
	committed := time.Now() // no later than any cache fill that saw the code active
	if revoked {
		s.auth.forget(a.List.Ref)
		s.emit(Event{Kind: EventCodeRevoked, ListRef: a.List.Ref, PermissionID: id})
		s.publishConfirmed(Notice{Kind: NoticePermission, ListRef: a.List.Ref, PermissionID: id}, committed)
	}
	return nil
}

// RotateOwner replaces the caller's owner code with a new one in one
// transaction: the caller's permission is revoked (EventCodeRevoked) and a
// new owner permission with the same label is issued.
func (s *Service) RotateOwner(ctx context.Context, a *Actor) (string, error) {
	if err := a.can(opManage, ""); err != nil {
		return "", err
	}
	code := NewCode()
	old := a.Permission.ID
	err := s.cfg.Store.Update(ctx, a.List.Ref, func(tx Tx) error {
		if err := s.stillActive(tx, a); err != nil {
			return err
		}
		cur, err := tx.Permission(old)
		if err != nil {
			return err
		}
		now := s.now()
		p := &Permission{ID: newID(), ListRef: a.List.Ref, Role: RoleOwner, Label: cur.Label,
			CreatedAt: now, CodeHash: HashSecret(code)}
		if err := tx.CreatePermission(p); err != nil {
			return err
		}
		if err := tx.RevokePermission(old, now); err != nil {
			return err
		}
		return tx.AppendAudit(s.audit(a, "owner.rotate", "", "old="+old+" new="+p.ID))
	})
	if err != nil {
		return "", internal(err, "could not rotate the owner code")
	}
	committed := time.Now() // no later than any cache fill that saw the code active
	s.auth.forget(a.List.Ref)
	s.emit(Event{Kind: EventCodeRevoked, ListRef: a.List.Ref, PermissionID: old})
	s.publishConfirmed(Notice{Kind: NoticePermission, ListRef: a.List.Ref, PermissionID: old}, committed)
	return code, nil
}

// Rollup moves the list into acct (owner code plus account credential):
// merged is true when it happened now, false when the list already was in
// acct; a list in another account is EFORBIDDEN; no account is
// EUNAUTHORIZED. Emits EventListChanged.
func (s *Service) Rollup(ctx context.Context, a *Actor, acct *Account) (merged bool, err error) {
	if err := a.can(opRollup, ""); err != nil {
		return false, err
	}
	if acct == nil || acct.ID == "" {
		return false, Errorf(EUNAUTHORIZED, "an account credential is required for rollup")
	}
	// The list's lock orders this list row change with the write path's,
	// which update the auth cache's copy of the row after their commits.
	e := s.docs.acquire(a.List.Ref)
	defer s.docs.release(e)
	e.row = nil // the row changes outside the write path
	err = s.cfg.Store.Update(ctx, a.List.Ref, func(tx Tx) error {
		if err := s.stillActive(tx, a); err != nil {
			return err
		}
		l := *tx.List()
		switch l.AccountID {
		case acct.ID:
			return nil
		case "":
		default:
			return Errorf(EFORBIDDEN, "the list belongs to another account")
		}
		now := s.now()
		l.AccountID, l.RolledUpAt = acct.ID, &now
		if err := tx.SaveList(&l); err != nil {
			return err
		}
		merged = true
		return tx.AppendAudit(s.audit(a, "list.rollup", "", "account="+acct.ID))
	})
	if err != nil {
		return false, internal(err, "could not roll up the list")
	}
	if merged {
		s.auth.forget(a.List.Ref)
		s.emit(Event{Kind: EventListChanged, ListRef: a.List.Ref})
		s.publishListRow(a.List.Ref) // the list's rate-limit class (R8) changes with it
	}
	return merged, nil
}

// Audit returns a page of the audit log (owner), oldest first. cursor is
// the NextCursor of the previous page on this list (another list's is
// EINVALID); limit as in ListYaps.
func (s *Service) Audit(ctx context.Context, a *Actor, cursor string, limit int) (*AuditPage, error) {
	if err := a.can(opAudit, ""); err != nil {
		return nil, err
	}
	n, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var after int64
	if cursor != "" {
		if after, err = decodeSeqCursor(a.List.Ref, cursor); err != nil {
			return nil, err
		}
	}
	es, err := s.cfg.Store.Audit(ctx, a.List.Ref, after, n+1)
	if err != nil {
		return nil, internal(err, "could not read the audit log")
	}
	page := &AuditPage{Entries: es}
	if len(es) > n {
		page.Entries = es[:n]
		page.NextCursor = encodeSeqCursor(a.List.Ref, es[n-1].Seq)
	}
	return page, nil
}

// CreateAccount creates a built-in account and returns its key once. Only
// the key's SHA-256 is stored.
func (s *Service) CreateAccount(ctx context.Context) (*Account, string, error) {
	key := NewAccountKey()
	acct := &Account{ID: newID(), CreatedAt: s.now(), KeyHash: HashSecret(key)}
	if err := s.cfg.Store.CreateAccount(ctx, acct); err != nil {
		return nil, "", internal(err, "could not create the account")
	}
	return acct, key, nil
}

// AccountByKey resolves a built-in account key; EUNAUTHORIZED if unknown
// or malformed.
func (s *Service) AccountByKey(ctx context.Context, key string) (*Account, error) {
	if !WellFormedAccountKey(key) {
		return nil, Errorf(EUNAUTHORIZED, "the account key is missing or malformed")
	}
	h := HashSecret(key)
	acct, err := s.cfg.Store.AccountByHash(ctx, h)
	if IsCode(err, ENOTFOUND) || (err == nil && !SameHash(acct.KeyHash, h)) {
		return nil, Errorf(EUNAUTHORIZED, "the account key is not valid")
	}
	if err != nil {
		return nil, internal(err, "could not look up the account")
	}
	return acct, nil
}

// RequestAccount resolves the built-in account key a request carries in its
// X-Account-Key header, or as "Authorization: Bearer yak_..." (an account
// key, which RequestCode passes over): nil, nil when it carries none;
// EUNAUTHORIZED when the key is malformed or unknown.
func (s *Service) RequestAccount(ctx context.Context, authorization, xAccountKey string) (*Account, error) {
	key := strings.TrimSpace(xAccountKey)
	if key == "" {
		if tok, ok := BearerToken(authorization); ok && strings.HasPrefix(tok, AccountKeyPrefix) {
			key = tok
		}
	}
	if key == "" {
		return nil, nil
	}
	if !WellFormedAccountKey(key) {
		return nil, Errorf(EUNAUTHORIZED, "malformed account key")
	}
	return s.AccountByKey(ctx, key)
}

// CheckAccount is what an edge makes of an account resolver's answer (a
// host's own, say): an error that is not an *Error, and an Account without
// an ID, are an invalid credential (EUNAUTHORIZED). An account without an
// ID names no account to own lists or to count requests against, and all
// such callers would share one rate-limit bucket.
func CheckAccount(acct *Account, err error) (*Account, error) {
	if err != nil {
		var e *Error // declared here: errors.As makes it escape to the heap
		if errors.As(err, &e) {
			return nil, err
		}
	}
	if err != nil || (acct != nil && acct.ID == "") {
		return nil, Errorf(EUNAUTHORIZED, "invalid account credential")
	}
	return acct, nil
}

// AccountLists returns a page of the lists rolled up into acct, oldest
// first by (createdAt, ref); EUNAUTHORIZED without an account (nil or an
// empty ID). cursor is the opaque NextCursor of the previous page for this
// account (a bad one, or another account's, is EINVALID); limit 0 means the
// default (50), below 0 or above 200 is EINVALID. Paging keeps an
// account's inventory answer bounded however many lists it holds.
func (s *Service) AccountLists(ctx context.Context, acct *Account, cursor string, limit int) (*ListPage, error) {
	if acct == nil || acct.ID == "" {
		return nil, Errorf(EUNAUTHORIZED, "an account credential is required")
	}
	n, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var after *ListCursor
	if cursor != "" {
		if after, err = decodeListCursor(acct.ID, cursor); err != nil {
			return nil, err
		}
	}
	// One more than the page tells whether another page follows, so the
	// last page has no cursor.
	ls, err := s.cfg.Store.ListsByAccount(ctx, acct.ID, after, n+1)
	if err != nil {
		return nil, internal(err, "could not read the account's lists")
	}
	page := &ListPage{Lists: ls}
	if len(ls) > n {
		page.Lists = ls[:n]
		last := ls[n-1]
		page.NextCursor = encodeListCursor(acct.ID, ListCursor{CreatedAt: last.CreatedAt, Ref: last.Ref})
	}
	return page, nil
}

// wellFormedRef reports whether ref could name a list: 1–128 characters of
// A-Za-z0-9_- (the service makes 22-character refs; embedders may import
// others of that alphabet).
func wellFormedRef(ref string) bool {
	if len(ref) == 0 || len(ref) > 128 {
		return false
	}
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
