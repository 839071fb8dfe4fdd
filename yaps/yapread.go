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
// whether a's role and scope let it write that yap, by the yap's kind,
// soft-deleted yaps included (RULINGS R3: the scope check comes before the
// body check): EFORBIDDEN when not; nil when it may, or when the yap is
// unknown (the write itself then answers 404). Only agent codes read the
// yap: the other roles write every kind or none.
func (s *Service) CheckYapScope(ctx context.Context, a *Actor, id string) error {
	if err := a.can(opWriteYap, ""); err != nil || a.Permission.Role != RoleAgent {
		return err
	}
	y, err := s.cfg.Store.Yap(ctx, a.List.Ref, id)
	if err != nil {
		return nil
	}
	return a.can(opWriteYap, y.Kind)
}

// CanWrite reports whether the actor may write the list document over sync:
// its role and scope allow writing some yaps and the list (as of
// Authenticate) is not archived. Each write is still checked per yap.
func (s *Service) CanWrite(a *Actor) bool {
	return a != nil && a.can(opWriteYap, "") == nil && !a.List.Archived()
}
