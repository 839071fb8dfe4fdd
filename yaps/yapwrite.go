package yaps

import (
	"context"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

func copyYap(y *Yap) *Yap {
	c := *y
	c.Tags = append([]string(nil), y.Tags...)
	if len(c.Tags) == 0 {
		c.Tags = nil
	}
	return &c
}

// CreateYap adds a yap of the given kind; the server assigns id, listId,
// createdAt and updatedAt (client values for them are not part of
// YapFields). idemKey/requestHash enable replay: a repeated key with the
// same hash returns the stored record (Config.Render of the first answer)
// in replay and a nil yap; the same key with another hash is EINVALID.
func (s *Service) CreateYap(ctx context.Context, a *Actor, kind Kind, f YapFields, idemKey string, requestHash []byte) (y *Yap, replay *IdempotencyRecord, err error) {
	if err := a.can(opWriteYap, ""); err != nil {
		return nil, nil, err
	}
	if k, err := ParseKind(string(kind), false); err != nil {
		return nil, nil, err
	} else {
		kind = k
	}
	if err := a.can(opWriteYap, kind); err != nil {
		return nil, nil, err
	}
	ref := a.List.Ref
	if a.List.Archived() {
		return nil, nil, writable(a.List)
	}
	if idemKey != "" {
		rec, err := s.replay(ctx, yapScope(ref), idemKey, requestHash)
		if err != nil || rec != nil {
			return nil, rec, err
		}
	}
	now := s.now()
	// A local, not the result y: the closure below would move y to the
	// heap, as the returns assign it after.
	ny := &Yap{ID: newID(), ListRef: ref, Kind: kind, CreatedAt: now, UpdatedAt: now}
	if err := applyFields(ny, &f, true); err != nil {
		return nil, nil, err
	}
	if err := ValidateYap(ny); err != nil {
		return nil, nil, err
	}
	err = s.write(ctx, ref, a, func(w *writeOp) error {
		if err := writable(&w.list); err != nil {
			return err
		}
		if err := w.refuseAtItemLimit(ny); err != nil {
			return err
		}
		ym := w.doc.GetMap(rootYaps)
		w.edit(func() { setNewYap(ym, ny) }, nil)
		// The document holds ny now, as readYap would read it back (a
		// validated yap, times at the millisecond): commit need not.
		w.created = projected(ny)
		w.auditf("yap.create", ny.ID, string(kind))
		if idemKey != "" {
			body, err := s.cfg.Render(ny)
			if err != nil {
				return internal(err, "could not render the answer")
			}
			return w.tx.PutIdempotency(sealRecord(&IdempotencyRecord{Scope: yapScope(ref), Key: idemKey,
				RequestHash: requestHash, Status: 201, Body: body, ETag: YapETag(ny), CreatedAt: now, ReplaceBefore: s.idemCutoff(now)}))
		}
		return nil
	})
	if err != nil {
		if idemKey != "" && !IsCode(err, EFORBIDDEN) && !IsCode(err, EUNAUTHORIZED) {
			if rec, err2 := s.replay(ctx, yapScope(ref), idemKey, requestHash); err2 != nil || rec != nil {
				return nil, rec, err2
			}
		}
		return nil, nil, err
	}
	// ny is the caller's: nothing kept it or its members (the view holds
	// projected(ny), the store its own copy).
	return ny, nil, nil
}

// projected is y as readYap reads it back from newYapMap(y) (or
// setNewYap): a copy sharing no memory with y, with no tags as nil.
func projected(y *Yap) *Yap {
	p := copyYap(y)
	if len(p.Tags) == 0 {
		p.Tags = nil
	}
	p.Title, p.Location = clonePtr(y.Title), clonePtr(y.Location)
	p.Priority = clonePtr(y.Priority)
	p.DueAt, p.StartsAt, p.EndsAt, p.DeletedAt = clonePtr(y.DueAt), clonePtr(y.StartsAt), clonePtr(y.EndsAt), clonePtr(y.DeletedAt)
	return p
}

// clonePtr returns a pointer to a copy of *v, nil for nil.
func clonePtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

// current returns the yap id as the document holds it, or ENOTFOUND (also
// for yaps deleted longer ago than the retention).
func (w *writeOp) current(id string) (*Yap, error) {
	y := w.e.view[id]
	if y == nil || w.s.expired(y) {
		return nil, Errorf(ENOTFOUND, "yap not found")
	}
	return y, nil
}

// UpdateYap merge-patches a yap (RULINGS R6): absent fields stay, null
// clears an optional field, text fields are changed with a minimal edit;
// DeletedAt null restores a soft-deleted yap within the retention. A
// deleted yap is ENOTFOUND unless the patch restores it. ifMatch, when not
// "", must match YapETag of the current yap (else EPRECONDITION).
func (s *Service) UpdateYap(ctx context.Context, a *Actor, id string, f YapFields, ifMatch string) (*Yap, error) {
	if err := a.can(opWriteYap, ""); err != nil {
		return nil, err
	}
	var out *Yap
	err := s.write(ctx, a.List.Ref, a, func(w *writeOp) error {
		cur, err := w.current(id)
		if err != nil {
			return err
		}
		restore := f.DeletedAt.Present && f.DeletedAt.Null
		if cur.DeletedAt != nil && !restore {
			return Errorf(ENOTFOUND, "yap not found")
		}
		if err := a.can(opWriteYap, cur.Kind); err != nil {
			return err
		}
		if err := writable(&w.list); err != nil {
			return err
		}
		if err := checkIfMatch(ifMatch, YapETag(cur)); err != nil {
			return err
		}
		y := copyYap(cur)
		if err := applyFields(y, &f, false); err != nil {
			return err
		}
		if restore {
			y.DeletedAt = nil
		}
		if sameYap(y, cur) {
			// Nothing changes (a client sent back what it read): no
			// write, and updatedAt and the ETag stay as other clients'
			// If-Match knows them.
			out = cur
			return nil
		}
		y.UpdatedAt = s.now()
		if err := ValidateYap(y); err != nil {
			return err
		}
		m, ok := mustGet(w.doc.GetMap(rootYaps), id).(*yjs.Map)
		if !ok {
			return Errorf(EINTERNAL, "yap %s is not a map", id)
		}
		w.edit(func() { writeYap(m, y) }, nil)
		w.touch(id)
		action := "yap.update"
		if restore && cur.DeletedAt != nil {
			action = "yap.restore"
		}
		w.auditf(action, id, "")
		out = y
		return nil
	})
	if err != nil {
		return nil, err
	}
	return copyYap(out), nil
}

// DeleteYap soft-deletes a yap (sets deletedAt); a yap already deleted is
// ENOTFOUND. It can be restored for Config.DeletedRetention. A non-empty
// ifMatch must match the yap's ETag (else EPRECONDITION).
func (s *Service) DeleteYap(ctx context.Context, a *Actor, id, ifMatch string) error {
	if err := a.can(opWriteYap, ""); err != nil {
		return err
	}
	return s.write(ctx, a.List.Ref, a, func(w *writeOp) error {
		cur, err := w.current(id)
		if err != nil {
			return err
		}
		if cur.DeletedAt != nil {
			return Errorf(ENOTFOUND, "yap not found")
		}
		if err := a.can(opWriteYap, cur.Kind); err != nil {
			return err
		}
		if err := writable(&w.list); err != nil {
			return err
		}
		if err := checkIfMatch(ifMatch, YapETag(cur)); err != nil {
			return err
		}
		y := copyYap(cur)
		now := s.now()
		y.DeletedAt, y.UpdatedAt = &now, now
		m, ok := mustGet(w.doc.GetMap(rootYaps), id).(*yjs.Map)
		if !ok {
			return Errorf(EINTERNAL, "yap %s is not a map", id)
		}
		w.shrink = true // not refused by the document limits (checkLimits)
		w.edit(func() { writeYap(m, y) }, nil)
		w.touch(id)
		w.auditf("yap.delete", id, "")
		return nil
	})
}
