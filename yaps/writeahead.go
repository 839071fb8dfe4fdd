package yaps

import (
	"context"
	"errors"
	"time"
)

// Writing ahead. A store may serialize all writers (SQLite has one writer
// per database), so whatever a write does inside its transaction delays
// every other list's writes too. When this process already holds the
// list's document and the list row it last wrote, a write is prepared
// before the transaction: fn edits the document and validates, commit
// projects the yaps, and the store writes they ask for are recorded
// (writeAheadTx). The transaction then only checks that the list row is
// still the one the preparation assumed (no other process wrote the list
// meanwhile: its DocVersion would differ) and that the actor's code is
// still active, and replays the recorded writes. The list's lock is held
// throughout, so nothing in this process writes the list in between.
//
// A store that implements PreparedWriter (Postgres) takes the recorded
// writes as data instead, and applies them with the same two checks in one
// statement pipeline, batched with other lists' writes (bunstore's
// prepared.go): one round trip instead of one per statement. A write that
// also stores an idempotency record goes through Update, whose conflict
// must roll the write back.
//
// Anything unexpected (fn fails, the row changed, fn needs a store read)
// abandons the preparation: the document, which may hold its edits, is
// dropped, and the write runs the ordinary way, inside the transaction,
// which also gives any error its authoritative form.

// errWriteAhead abandons a write-ahead attempt for the ordinary path.
var errWriteAhead = errors.New("yaps: write ahead not possible")

// writeAhead tries the write described above. It returns errWriteAhead
// when the caller must run the ordinary path. e.mu is held.
func (s *Service) writeAhead(ctx context.Context, e *docEntry, actors []*Actor, fn func(w *writeOp) error) error {
	a := firstActor(actors)
	// ops: room for the usual write (an update, a yap, an audit entry)
	// without growing.
	rec := &writeAheadTx{list: *e.row.Clone(), seq: e.row.DocVersion, ops: make([]PreparedOp, 0, 4)}
	row := &rec.list // the row the preparation assumes; nothing changes it
	w := &writeOp{s: s, tx: rec, e: e, doc: e.doc, actor: a, list: *row.Clone()}
	w.startLimits()
	if err := fn(w); err != nil {
		if w.dirty {
			e.drop()
		}
		return errWriteAhead
	}
	if err := w.commit(); err != nil {
		if w.dirty {
			e.drop()
		}
		return errWriteAhead
	}
	// A PreparedWrite checks one permission.
	if pw, ok := s.cfg.Store.(PreparedWriter); ok && rec.preparable() && len(actors) <= 1 {
		p := rec.prepared(row, a)
		applied, err := pw.WritePrepared(ctx, p)
		switch {
		case errors.Is(err, ErrPreparedUnsupported):
			// Replayed through Update below.
		case err != nil:
			e.drop()
			return err
		case !applied:
			e.drop()
			return errWriteAhead
		default:
			w.finish()
			s.writeAheads.Add(1)
			s.prepared.Add(1)
			return nil
		}
	}
	// The replay reads through tx and writes what rec holds: it may run
	// again (ReplayableUpdater).
	update := s.cfg.Store.Update
	if ru, ok := s.cfg.Store.(ReplayableUpdater); ok {
		update = ru.UpdateReplayable
	}
	err := update(ctx, e.ref, func(tx Tx) error {
		rec.stale = false
		if !sameListRow(tx.List(), row) {
			rec.stale = true
			return errWriteAhead
		}
		if err := s.allActive(tx, actors); err != nil {
			return err
		}
		return rec.replay(tx)
	})
	if err != nil {
		if w.dirty || rec.stale {
			e.drop()
		}
		if rec.stale {
			return errWriteAhead
		}
		return err
	}
	w.finish()
	s.writeAheads.Add(1)
	return nil
}

// sameListRow reports whether two list rows hold the same values.
func sameListRow(a, b *List) bool {
	return a.Ref == b.Ref && a.Title == b.Title && a.Kind == b.Kind && a.AccountID == b.AccountID &&
		a.DocVersion == b.DocVersion && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		sameTime(a.ArchivedAt, b.ArchivedAt) && sameTime(a.RolledUpAt, b.RolledUpAt)
}

// writeAheadTx is the Tx of a prepared write: it records the writes the
// write path makes, as the PreparedWrite a PreparedWriter store takes, and
// replays them inside the real transaction for the other stores. Reads are
// not available (errWriteAhead).
type writeAheadTx struct {
	list  List         // the list row as the write starts (a copy of the cache's)
	stale bool         // the replay found another row in the store (writeAhead)
	seq   int64        // last seq handed out
	ops   []PreparedOp // in order
	saved *List        // the last SaveList
	idem  []*IdempotencyRecord
}

// preparable reports whether the recorded writes fit a PreparedWrite: an
// idempotency record's conflict must roll the write back, Update's job.
func (r *writeAheadTx) preparable() bool { return len(r.idem) == 0 && r.seq > r.list.DocVersion }

// prepared returns the recorded writes as a PreparedWrite against row.
func (r *writeAheadTx) prepared(row *List, a *Actor) *PreparedWrite {
	src := &r.list
	if r.saved != nil {
		src = r.saved
	}
	l := src.Clone()
	l.DocVersion = r.seq
	p := &PreparedWrite{Expect: row, List: l, Ops: r.ops}
	if a != nil {
		p.PermissionID = a.Permission.ID
	}
	return p
}

func (r *writeAheadTx) List() *List { return r.list.Clone() }

func (r *writeAheadTx) SaveList(l *List) error {
	r.saved = l.Clone()
	return nil
}

func (r *writeAheadTx) AppendUpdate(u []byte) (int64, error) {
	if u == nil {
		u = []byte{} // a nil Update would be an empty PreparedOp
	}
	r.seq++
	r.ops = append(r.ops, PreparedOp{Update: u})
	return r.seq, nil
}

func (r *writeAheadTx) AppendUpdates(us [][]byte) (int64, error) {
	for _, u := range us {
		_, _ = r.AppendUpdate(u)
	}
	return r.seq, nil
}

func (r *writeAheadTx) PutYap(y *Yap) error {
	r.ops = append(r.ops, PreparedOp{PutYap: copyYap(y)})
	return nil
}

// PutNewYap is PutYap for a yap the projection has no row for (see
// PreparedOp.NewYap).
func (r *writeAheadTx) PutNewYap(y *Yap) error {
	r.ops = append(r.ops, PreparedOp{PutYap: copyYap(y), NewYap: true})
	return nil
}

// newYapPutter is a Tx that takes PutNewYap.
type newYapPutter interface{ PutNewYap(y *Yap) error }

func (r *writeAheadTx) DeleteYap(id string) error {
	r.ops = append(r.ops, PreparedOp{DeleteYapID: id})
	return nil
}

// AppendAudit records e; its Seq is assigned by the replay, before the
// write returns.
func (r *writeAheadTx) AppendAudit(e *AuditEntry) error {
	r.ops = append(r.ops, PreparedOp{Audit: e})
	return nil
}

func (r *writeAheadTx) PutIdempotency(rec *IdempotencyRecord) error {
	r.idem = append(r.idem, rec)
	return nil
}

func (r *writeAheadTx) UpdatesSince(int64) ([][]byte, error)   { return nil, errWriteAhead }
func (r *writeAheadTx) Permission(string) (*Permission, error) { return nil, errWriteAhead }
func (r *writeAheadTx) CreatePermission(*Permission) error     { return errWriteAhead }
func (r *writeAheadTx) RevokePermission(string, time.Time) error {
	return errWriteAhead
}
func (r *writeAheadTx) ActiveOwners() (int, error) { return 0, errWriteAhead }

// replay makes the recorded writes through tx. A store's SaveList only
// records the row, so it can come last.
func (r *writeAheadTx) replay(tx Tx) error {
	seq := r.list.DocVersion
	var run [][]byte // consecutive updates, appended together
	for i, op := range r.ops {
		var err error
		switch {
		case op.Update != nil:
			run = append(run, op.Update)
			if i+1 < len(r.ops) && r.ops[i+1].Update != nil {
				continue
			}
			seq += int64(len(run))
			var got int64
			got, err = tx.AppendUpdates(run)
			run = run[:0]
			if err == nil && got != seq {
				// The row check makes this impossible; never store a
				// document whose seqs the cache disagrees with.
				err = Errorf(EINTERNAL, "update seq %d, prepared as %d", got, seq)
			}
		case op.PutYap != nil:
			err = tx.PutYap(op.PutYap)
		case op.DeleteYapID != "":
			// Both callers ignore a missing projection; so does the replay.
			if err = tx.DeleteYap(op.DeleteYapID); IsCode(err, ENOTFOUND) {
				err = nil
			}
		case op.Audit != nil:
			err = tx.AppendAudit(op.Audit)
		}
		if err != nil {
			return err
		}
	}
	if r.saved != nil {
		if err := tx.SaveList(r.saved); err != nil {
			return err
		}
	}
	for _, rec := range r.idem {
		if err := tx.PutIdempotency(rec); err != nil {
			return err
		}
	}
	return nil
}
