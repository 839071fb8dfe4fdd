package yaps

import (
	"bytes"
	"context"
	"net/url"
	"time"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Idempotency scopes (RULINGS R6): POST /lists retries are matched per
// account when an account credential is sent, else per client IP;
// POST /lists/{ref}/yaps retries per list.
func createListScope(in *CreateListInput) string {
	if in.Account != nil {
		return "lists:acct:" + in.Account.ID
	}
	return "lists:ip:" + in.ClientIP
}

func yapScope(ref string) string { return "yaps:" + ref }

// replay looks up an idempotency record: the stored record when key and
// request hash match, EINVALID when the key was used with another body,
// nil when the key is new or its record expired (IdempotencyRetention).
func (s *Service) replay(ctx context.Context, scope, key string, hash []byte) (*IdempotencyRecord, error) {
	rec, err := s.cfg.Store.Idempotency(ctx, scope, sealedKey(scope, key))
	if IsCode(err, ENOTFOUND) {
		return nil, nil
	}
	if err != nil {
		return nil, internal(err, "could not read the idempotency record")
	}
	if s.idemExpired(rec) {
		return nil, nil
	}
	if !bytes.Equal(rec.RequestHash, hash) {
		return nil, Errorf(EINVALID, "the Idempotency-Key was already used with a different request")
	}
	return openRecord(rec, scope, key)
}

// CreateList creates an anonymous list, or one in in.Account when an
// account credential was sent (it is then rolled up from the start; an
// Account with an empty ID is EUNAUTHORIZED). The answer carries the owner
// code once. With in.IdempotencyKey, a retry with the same key and request
// hash returns only CreatedList.Replay (the stored first answer, rendered
// by Config.Render); the same key with another hash is EINVALID. The
// stored answer contains the owner code, so it is sealed with the
// client's Idempotency-Key (see sealRecord): the store holds no usable
// secret.
func (s *Service) CreateList(ctx context.Context, in CreateListInput) (*CreatedList, error) {
	// An account without an ID would stamp rolledUpAt on a list no account
	// holds (a later rollup would merge it again) and share the idempotency
	// scope "lists:acct:" with every such caller: refuse it as Rollup does.
	if in.Account != nil && in.Account.ID == "" {
		return nil, Errorf(EUNAUTHORIZED, "the account credential is not valid (no account ID)")
	}
	scope := createListScope(&in)
	if in.IdempotencyKey != "" {
		rec, err := s.replay(ctx, scope, in.IdempotencyKey, in.RequestHash)
		if err != nil || rec != nil {
			return &CreatedList{Replay: rec}, err
		}
	}
	title := ""
	if in.Title.Present && !in.Title.Null {
		title = in.Title.Value
	}
	if err := CheckListTitle(title); err != nil {
		return nil, err
	}
	kind := KindTask
	if in.Kind.Present && !in.Kind.Null {
		k, err := ParseKind(in.Kind.Value, true)
		if err != nil {
			return nil, err
		}
		kind = k
	}
	now := s.now()
	l := &List{Ref: newRef(), Title: title, Kind: kind, CreatedAt: now, UpdatedAt: now, DocVersion: 1}
	if in.Account != nil {
		l.AccountID, l.RolledUpAt = in.Account.ID, &now
	}
	d := yjs.NewDoc()
	var first []byte
	unsub := d.OnUpdate(func(u []byte, _ any) { first = u })
	d.Transact(func(*yjs.Transaction) { writeList(d, listFields{Title: title, Kind: kind}) }, nil)
	unsub()
	code := NewCode()
	owner := &Permission{ID: newID(), ListRef: l.Ref, Role: RoleOwner, Label: "owner",
		CreatedAt: now, CodeHash: HashSecret(code)}
	out := &CreatedList{List: l, OwnerCode: code,
		SliceURL: s.apiBase(l.Ref) + "?k=" + url.QueryEscape(code), APIBase: s.apiBase(l.Ref)}
	var rec *IdempotencyRecord
	if in.IdempotencyKey != "" {
		body, err := s.cfg.Render(out)
		if err != nil {
			return nil, internal(err, "could not render the answer")
		}
		rec = sealRecord(&IdempotencyRecord{Scope: scope, Key: in.IdempotencyKey, RequestHash: in.RequestHash,
			Status: 201, Body: body, ETag: ListETag(l), CreatedAt: now, ReplaceBefore: s.idemCutoff(now)})
	}
	if err := s.cfg.Store.CreateList(ctx, l, owner, first, rec); err != nil {
		if rec != nil {
			// A concurrent retry may have won the key: replay it.
			if r, err2 := s.replay(ctx, scope, in.IdempotencyKey, in.RequestHash); err2 != nil || r != nil {
				return &CreatedList{Replay: r}, err2
			}
		}
		return nil, internal(err, "could not create the list")
	}
	e := s.docs.acquire(l.Ref)
	if e.doc == nil {
		e.doc, e.seq, e.sinceState, e.sinceBytes, e.stateBytes = d, 1, 1, int64(len(first)), 0
		e.view, e.list = map[string]*Yap{}, listFields{Title: title, Kind: kind}
	}
	s.docs.release(e)
	return out, nil
}

func (s *Service) apiBase(ref string) string {
	return s.cfg.PublicURL + s.cfg.Prefix + "/lists/" + url.PathEscape(ref)
}

// UpdateList patches title, kind and archivedAt (owner or editor). ifMatch,
// when not "", must match the list's current ETag (else EPRECONDITION). A
// title null clears it; kind accepts plural spellings; archivedAt set to any
// date-time archives the list at the server's current time (an already
// archived list keeps its time), null unarchives it. An archived list
// accepts only a patch that unarchives it (EFORBIDDEN otherwise).
func (s *Service) UpdateList(ctx context.Context, a *Actor, p ListPatch, ifMatch string) (*List, error) {
	if err := a.can(opEditList, ""); err != nil {
		return nil, err
	}
	validate := func() (Kind, error) {
		if p.Title.Present && !p.Title.Null {
			if err := CheckListTitle(p.Title.Value); err != nil {
				return "", err
			}
		}
		if !p.Kind.Present {
			return "", nil
		}
		if p.Kind.Null {
			return "", Errorf(EINVALID, "kind cannot be null")
		}
		return ParseKind(string(p.Kind.Value), true)
	}
	unarchive := p.ArchivedAt.Present && p.ArchivedAt.Null
	if a.List.Archived() && !unarchive {
		return nil, writable(a.List) // 403 before 400 (RULINGS R3)
	}
	if _, err := validate(); err != nil {
		return nil, err
	}
	var out *List
	archiving := false // the archive state changes
	err := s.write(ctx, a.List.Ref, a, func(w *writeOp) error {
		archiving = false
		if w.list.Archived() && !unarchive {
			return writable(&w.list)
		}
		if err := checkIfMatch(ifMatch, ListETag(&w.list)); err != nil {
			return err
		}
		kind, _ := validate()
		lf := w.e.list
		if p.Title.Present {
			lf.Title = p.Title.Value // "" when null
		}
		if kind != "" {
			lf.Kind = kind
		}
		if p.ArchivedAt.Present {
			switch {
			case p.ArchivedAt.Null:
				lf.ArchivedAt = nil
			case lf.ArchivedAt == nil:
				now := s.now()
				lf.ArchivedAt = &now
			}
		}
		if !listFieldsChanged(lf, w.e.list) {
			out = &w.list
			return nil
		}
		if only := w.e.list; lf.ArchivedAt != nil && only.ArchivedAt == nil {
			// Archiving alone is never refused by the document limits
			// (checkLimits), by PATCH as by DELETE.
			only.ArchivedAt = lf.ArchivedAt
			w.shrink = !listFieldsChanged(lf, only)
		}
		w.edit(func() { writeList(w.doc, lf) }, nil)
		archiving = auditListChange(w.e.list, lf, func(action string) { w.auditf(action, "", "") })
		out = &w.list
		return nil
	})
	if err != nil {
		return nil, err
	}
	if archiving {
		s.publishListRow(a.List.Ref)
	}
	cp := *out
	return &cp, nil
}

// auditListChange records the change of the list's fields from old to lf
// as the separate requests making it would be (R5: every change has its
// entry): list.update for the title or kind, and list.archive after it or
// list.unarchive before it, since each is allowed only while the list is
// writable. It reports whether the archive state changed.
func auditListChange(old, lf listFields, audit func(action string)) (archiving bool) {
	archive := lf.ArchivedAt != nil && old.ArchivedAt == nil
	unarchive := lf.ArchivedAt == nil && old.ArchivedAt != nil
	if unarchive {
		audit("list.unarchive")
	}
	// (A new time on a list that stays archived is an update too.)
	if lf.Title != old.Title || lf.Kind != old.Kind || (!archive && !unarchive && listFieldsChanged(lf, old)) {
		audit("list.update")
	}
	if archive {
		audit("list.archive")
	}
	return archive || unarchive
}

// publishListRow has every other process forget what its auth cache holds
// of the list, whose row was just changed (archive, unarchive, rollup),
// before the call answers: their readers see the new row at once, as the
// caller does (their writers re-check it in the transaction anyway).
func (s *Service) publishListRow(ref string) {
	s.publishConfirmed(Notice{Kind: NoticeList, ListRef: ref}, time.Now())
}

// ArchiveList archives the list (owner); archiving an archived list
// succeeds without change. A non-empty ifMatch must match the list's ETag
// (else EPRECONDITION).
func (s *Service) ArchiveList(ctx context.Context, a *Actor, ifMatch string) error {
	if err := a.can(opArchiveList, ""); err != nil {
		return err
	}
	archived := false
	err := s.write(ctx, a.List.Ref, a, func(w *writeOp) error {
		archived = false
		if err := checkIfMatch(ifMatch, ListETag(&w.list)); err != nil {
			return err
		}
		if w.e.list.ArchivedAt != nil {
			return nil
		}
		archived = true
		lf := w.e.list
		now := s.now()
		lf.ArchivedAt = &now
		w.shrink = true // not refused by the document limits (checkLimits)
		w.edit(func() { writeList(w.doc, lf) }, nil)
		w.auditf("list.archive", "", "")
		return nil
	})
	if err == nil && archived {
		s.publishListRow(a.List.Ref)
	}
	return err
}
