package yaps

import (
	"context"
)

// expired reports whether y was deleted longer ago than the retention: it
// answers ENOTFOUND everywhere, even before the purge removed it.
func (s *Service) expired(y *Yap) bool {
	return y.DeletedAt != nil && !y.DeletedAt.After(s.now().Add(-s.cfg.DeletedRetention))
}

// ListYaps returns a page of yaps in (createdAt, id) order; cursor is the
// opaque NextCursor of the previous page on this list (a bad one, or one
// issued for another list, is EINVALID); limit 0 means the default (50),
// below 0 or above 200 is EINVALID. Soft-deleted yaps are included only
// with includeDeleted, and never once past the retention. A page can be
// shorter than limit when expired yaps were skipped; only an empty
// NextCursor marks the end.
func (s *Service) ListYaps(ctx context.Context, a *Actor, cursor string, limit int, includeDeleted bool) (*YapPage, error) {
	if err := a.can(opRead, ""); err != nil {
		return nil, err
	}
	n, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	q := YapQuery{Limit: n + 1, IncludeDeleted: includeDeleted}
	if cursor != "" {
		if q.After, err = decodeYapCursor(a.List.Ref, cursor); err != nil {
			return nil, err
		}
	}
	raw, err := s.cfg.Store.Yaps(ctx, a.List.Ref, q)
	if err != nil {
		return nil, internal(err, "could not read the yaps")
	}
	page := &YapPage{Yaps: make([]*Yap, 0, min(len(raw), n))}
	for i, y := range raw {
		if i == n {
			last := raw[n-1]
			page.NextCursor = encodeYapCursor(a.List.Ref, YapCursor{CreatedAt: last.CreatedAt, ID: last.ID})
			break
		}
		if y.DeletedAt != nil && (!includeDeleted || s.expired(y)) {
			continue
		}
		page.Yaps = append(page.Yaps, y)
	}
	return page, nil
}

// GetYap returns one yap that is not deleted (ENOTFOUND otherwise).
func (s *Service) GetYap(ctx context.Context, a *Actor, id string) (*Yap, error) {
	if err := a.can(opRead, ""); err != nil {
		return nil, err
	}
	y, err := s.cfg.Store.Yap(ctx, a.List.Ref, id)
	if err != nil {
		return nil, err
	}
	if y.DeletedAt != nil {
		return nil, Errorf(ENOTFOUND, "yap not found")
	}
	return y, nil
}

// CheckYapScope answers, before the body of a write to yap id is read,
// what RULINGS R3 checks before the body: whether a's role lets it write
// yaps (EFORBIDDEN), whether the yap exists (ENOTFOUND; soft-deleted yaps
// exist, and deleted reports them, whose writes other than a restore are
// 404 too), and whether an agent's scope reaches the yap's kind
// (EFORBIDDEN). The write checks all of it again.
func (s *Service) CheckYapScope(ctx context.Context, a *Actor, id string) (deleted bool, err error) {
	if err := a.can(opWriteYap, ""); err != nil {
		return false, err
	}
	y, err := s.cfg.Store.Yap(ctx, a.List.Ref, id)
	if IsCode(err, ENOTFOUND) {
		return false, Errorf(ENOTFOUND, "yap not found")
	}
	if err != nil {
		return false, nil // the write reports it
	}
	return y.DeletedAt != nil, a.can(opWriteYap, y.Kind)
}

// CheckKindScope answers, before a new yap's body is judged, whether a's
// role and scope let it create a yap of kind (RULINGS R3: the scope check
// comes before the body check): EFORBIDDEN when not. An unknown kind is
// left to the body check.
func (s *Service) CheckKindScope(a *Actor, kind Kind) error {
	if _, err := ParseKind(string(kind), false); err != nil {
		return a.can(opWriteYap, "")
	}
	return a.can(opWriteYap, kind)
}

// CreateYapReplay returns the first answer to a yap create that carried
// idemKey and a request of hash requestHash, or nil when there is none
// (RULINGS R6). It lets a retry be answered where a new create would be
// refused before its body is judged: a list archived since the first
// request took the yap.
func (s *Service) CreateYapReplay(ctx context.Context, a *Actor, idemKey string, requestHash []byte) (*IdempotencyRecord, error) {
	if err := a.can(opWriteYap, ""); err != nil {
		return nil, err
	}
	if idemKey == "" {
		return nil, nil
	}
	return s.replay(ctx, yapScope(a.List.Ref), idemKey, requestHash)
}

// CanWrite reports whether the actor may write the list document over sync:
// its role and scope allow writing some yaps and the list (as of
// Authenticate) is not archived. Each write is still checked per yap.
func (s *Service) CanWrite(a *Actor) bool {
	return a != nil && a.can(opWriteYap, "") == nil && !a.List.Archived()
}
