package yaps

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// writeOp is the state of one write to a list, inside the store
// transaction and the list's in-process lock.
type writeOp struct {
	s     *Service
	tx    Tx
	e     *docEntry
	doc   *yjs.Doc
	actor *Actor // nil for system work (purge)
	list  List   // the list row as of the transaction start (caught up)

	updates   [][]byte // document updates to append, in order
	origins   []any    // origin of each update, for its Event
	dirty     bool     // the in-memory document was changed
	touched   map[string]bool
	all       bool // re-project every yap, not just touched ones
	audits    []*AuditEntry
	listRow   bool // the list row changed outside the document (rollup, ...)
	pending   pendingView
	listEvent bool       // title, kind or archive state changed
	auditKeys []auditKey // sync edit runs whose entry this write records
	// valid holds yaps read and validated from the document as it is now
	// (a sync update that needed no compensation), so commit projects
	// them without reading and validating them again. Any edit clears it.
	valid map[string]*Yap
	// created is the yap CreateYap created, as the document holds it now:
	// commit projects it as if it were touched and in valid, without a map
	// for each. Any edit clears it.
	created *Yap
	// A scratch map of applyClientUpdate, cleared and reused by the next
	// update of a batch until it becomes valid.
	scratchValid map[string]*Yap
	// What the transactions of the client update being applied did (its
	// maps reused by the next update of a batch), and the observer that
	// records it (observeClientTx, made once per write and attached to
	// the document around each update).
	txs      clientTxs
	observer *yjs.ScopedObserver
	// batch is set when one write applies several clients' updates
	// (ApplyUpdates): each update is validated against the yaps and list
	// fields as the earlier ones left them, so compensating one client's
	// invalid edit never undoes another's valid one.
	batch *batchView

	// Document size limits (Config.MaxDocItems, MaxDocBytes; checkLimits).
	limits      bool   // the limits apply to this write (startLimits)
	clockBefore uint64 // the document's ClockSum before fn
	sync        bool   // client updates: they set grew (not server fixes)
	grew        bool   // a client update inserted something
	shrink      bool   // a removal (DELETE yap, archive): not refused by the limits

	// recorder records an edit's updates (edit); room for the usual
	// write's one update, its origin and one audit entry, so that
	// recording them takes no allocation of its own (edit, auditf).
	recorder  yjs.UpdateRecorder
	editing   bool // in edit's fn: a nested edit joins it
	updateBuf [1][]byte
	originBuf [1]any
	auditBuf  [1]*AuditEntry
}

// batchView holds the yaps (nil: absent) and list fields as the updates
// applied so far in a batch left them; what it lacks is as in the cache.
type batchView struct {
	yaps map[string]*Yap
	list *listFields
}

var errReload = errors.New("yaps: document must be reloaded")

// edit runs fn in one document transaction and records the update it made.
// An edit inside an edit joins the outer one's transaction, which records
// the update (as nested yjs transactions do).
func (w *writeOp) edit(fn func(), origin any) {
	if w.editing {
		fn()
		return
	}
	if w.updates == nil {
		w.updates = w.updateBuf[:0]
	}
	n := len(w.updates)
	// The recorder appends to w.updates itself: no observer, closure or
	// unsubscribe func allocated per edit (yjs.Doc.OnUpdate).
	w.recorder.Updates = w.updates
	w.dirty = true
	w.valid, w.created = nil, nil
	w.e.owners = nil // the edit may add or replace yaps and members
	w.editing = true
	w.doc.TransactRecorded(&w.recorder, fn, origin)
	w.editing = false
	w.updates, w.recorder.Updates = w.recorder.Updates, nil
	if w.origins == nil {
		w.origins = w.originBuf[:0]
	}
	for range w.updates[n:] {
		w.origins = append(w.origins, origin)
	}
}

func (w *writeOp) touch(id string) {
	if w.touched == nil {
		w.touched = map[string]bool{}
	}
	w.touched[id] = true
}

func (w *writeOp) auditf(action, yapID, detail string) {
	if w.actor != nil {
		if w.audits == nil {
			w.audits = w.auditBuf[:0]
		}
		w.audits = append(w.audits, w.s.audit(w.actor, action, yapID, detail))
	}
}

// auditKey names a run of sync edits: one code editing one yap ("" for
// changes outside the yaps and the list's fields).
type auditKey struct{ perm, yap string }

// auditSyncEdit records a sync edit (of yap id, or action "doc.update"
// with no yap) unless an entry recorded by this process for the same code
// and yap less than Config.AuditCoalesce ago already stands for it (see
// Config). The time is noted in finish, once the entry is committed.
func (w *writeOp) auditSyncEdit(action, id string) {
	win := w.s.cfg.AuditCoalesce
	if w.actor == nil {
		return
	}
	if win < 0 {
		w.auditf(action, id, "sync")
		return
	}
	k := auditKey{w.actor.Permission.ID, id}
	now := w.s.now()
	if at, ok := w.e.auditAt[k]; ok && now.Sub(at) < win && !now.Before(at) {
		return
	}
	w.auditf(action, id, w.s.coalesceDetail)
	w.auditKeys = append(w.auditKeys, k)
}

// write is the single write path of every mutation of a list document, by
// HTTP and sync alike: lock the list in this process, open the store
// transaction (which serializes writers across processes), catch the cached
// document up with updates other processes stored, run fn (which edits the
// document through w.edit and validates), append the updates, project the
// changed yaps and the list row, append audit entries, commit, then emit
// events. If anything fails after the document was changed in memory, the
// cached document is dropped so memory never diverges from the store.
func (s *Service) write(ctx context.Context, ref string, a *Actor, fn func(w *writeOp) error) error {
	var actors []*Actor
	if a != nil {
		actors = []*Actor{a}
	}
	return s.writeAs(ctx, ref, actors, fn)
}

// firstActor is the actor a write op starts as: actors[0], nil for none.
func firstActor(actors []*Actor) *Actor {
	if len(actors) == 0 {
		return nil
	}
	return actors[0]
}

// writeAs is write on behalf of several actors (a batch of sync updates):
// every actor's code must still be active, and the write op starts as the
// first one (fn may switch w.actor between its edits).
func (s *Service) writeAs(ctx context.Context, ref string, actors []*Actor, fn func(w *writeOp) error) error {
	a := firstActor(actors)
	e := s.docs.acquire(ref)
	defer s.docs.release(e)
	defer func() {
		// A panic in fn or in the store (a host's Render, a bug) rolls the
		// transaction back, and a host may recover it and carry on: the
		// document may hold edits the store never got, which the next
		// write would build on. Drop it; the next write reloads.
		if p := recover(); p != nil {
			e.drop()
			panic(p)
		}
	}()
	if e.doc != nil && e.row != nil && e.row.DocVersion == e.seq {
		if err := s.writeAhead(ctx, e, actors, fn); !errors.Is(err, errWriteAhead) {
			return err
		}
	}
	var err error
	const attempts = 3
	for attempt := range attempts {
		if e.doc == nil {
			if err = s.load(ctx, e); err != nil {
				return err
			}
		}
		var w *writeOp
		err = s.cfg.Store.Update(ctx, ref, func(tx Tx) error {
			w = &writeOp{s: s, tx: tx, e: e, doc: e.doc, actor: a, list: *tx.List()}
			err := s.catchUp(tx, e, w.list.DocVersion)
			if dt, ok := tx.(DocTx); ok && errors.Is(err, errReload) && attempt == attempts-1 {
				// Other processes wrote and compacted the list between each
				// reload and its transaction. Reload under the list's lock,
				// where they cannot (slower, so only as the last try).
				err = s.reloadIn(dt, e, w.list.DocVersion)
				w.doc = e.doc
			}
			if err != nil {
				return err
			}
			if err := s.allActive(tx, actors); err != nil {
				return err
			}
			w.startLimits()
			if err := fn(w); err != nil {
				return err
			}
			return w.commit()
		})
		if errors.Is(err, errReload) {
			e.drop()
			continue
		}
		if err != nil {
			if w != nil && w.dirty {
				e.drop()
			}
			return err
		}
		w.finish()
		return nil
	}
	return internal(err, "could not write the list")
}

// catchUp brings e's document to the list's version, applying what other
// processes logged since; errReload when it cannot (the log was compacted
// past it, or the store holds less than it).
func (s *Service) catchUp(tx Tx, e *docEntry, version int64) error {
	if version < e.seq {
		return errReload
	}
	if version == e.seq {
		return nil
	}
	ups, err := tx.UpdatesSince(e.seq)
	if IsCode(err, ENOTFOUND) {
		return errReload
	}
	if err != nil {
		return err
	}
	if err := s.applyLogged(e, ups); err != nil {
		s.log.Error("yaps: catching up a list document failed; reloading", "list", e.ref, "err", err)
		return errReload // the document may be half caught up
	}
	return nil
}

// reloadIn loads e's document through the transaction, at the list's
// version. The copy it replaces is dropped first, also when this fails.
func (s *Service) reloadIn(dt DocTx, e *docEntry, version int64) error {
	e.drop()
	dl, err := dt.Doc()
	if err != nil {
		return err
	}
	if dl.LastSeq != version {
		return Errorf(EINTERNAL, "the list's document is at %d inside its transaction, its row at %d", dl.LastSeq, version)
	}
	return s.loadLog(e, dl)
}

// pending holds what finish applies to the cache after the commit.
type pendingView struct {
	last int64 // the seq of the last of w.updates (those before: last-1, last-2...)
	view map[string]*Yap
	list listFields
}

// commit appends the updates and projects the changes (inside the tx).
func (w *writeOp) commit() error {
	e, s := w.e, w.s
	if err := w.checkLimits(); err != nil {
		return err
	}
	var last int64 // the seq of the last update
	if len(w.updates) > 0 {
		var err error
		if last, err = w.tx.AppendUpdates(w.updates); err != nil {
			return err
		}
	}
	// The view is updated in place: if the transaction fails after this,
	// the entry is dropped (w.dirty) and the view with it.
	view := e.view
	if w.dirty {
		if view == nil {
			view = map[string]*Yap{}
			e.view = view
		}
		ids := w.touched
		if w.all {
			ids = map[string]bool{}
			for id := range e.view {
				ids[id] = true
			}
			for _, id := range w.doc.GetMap(rootYaps).Keys() {
				ids[id] = true
			}
		}
		ym := w.doc.GetMap(rootYaps)
		var idBuf [8]string // a batch touches few yaps: sorted on the stack
		sorted := idBuf[:0]
		for id := range ids {
			sorted = append(sorted, id)
		}
		if c := w.created; c != nil && !ids[c.ID] {
			sorted = append(sorted, c.ID)
		}
		slices.Sort(sorted)
		for _, id := range sorted {
			y := w.valid[id]
			if c := w.created; c != nil && c.ID == id {
				y = c
			}
			if v, ok := ym.Get(id); ok && y == nil {
				if yy, err := readYap(e.ref, id, v); err == nil && ValidateYap(yy) == nil {
					y = yy
				} else {
					s.log.Error("yaps: invalid yap left in a document after validation", "list", e.ref, "yap", id)
				}
			}
			old := view[id]
			switch {
			case y == nil && old != nil:
				if err := w.tx.DeleteYap(id); err != nil && !IsCode(err, ENOTFOUND) {
					return err
				}
				delete(view, id)
			case y != nil && !sameYap(y, old):
				var err error
				if p, ok := w.tx.(newYapPutter); ok && old == nil {
					err = p.PutNewYap(y) // the view is the projection: no row
				} else {
					err = w.tx.PutYap(y)
				}
				if err != nil {
					return err
				}
				view[id] = y
			}
		}
	}
	lf := e.list
	if w.dirty {
		nl, err := readList(w.doc)
		if err != nil {
			s.log.Error("yaps: invalid list root left in a document after validation", "list", e.ref, "err", err)
		} else {
			lf = nl
		}
	}
	if lf.Title != e.list.Title || lf.Kind != e.list.Kind || !sameTime(lf.ArchivedAt, e.list.ArchivedAt) {
		w.listEvent = true
	}
	if len(w.updates) > 0 || w.listRow {
		l := w.list
		l.Title, l.Kind, l.ArchivedAt = lf.Title, lf.Kind, lf.ArchivedAt
		l.UpdatedAt = s.now()
		if len(w.updates) > 0 {
			l.DocVersion = last
		}
		if err := w.tx.SaveList(&l); err != nil {
			return err
		}
		w.list = l
	}
	for _, a := range w.audits {
		if err := w.tx.AppendAudit(a); err != nil {
			return err
		}
	}
	w.pending = pendingView{last: last, view: view, list: lf}
	return nil
}

// finish updates the cache and emits events after the commit.
func (w *writeOp) finish() {
	e, p := w.e, w.pending
	if len(w.updates) > 0 {
		e.seq = p.last
		e.sinceState += int64(len(w.updates))
		for _, u := range w.updates {
			e.sinceBytes += int64(len(u))
		}
	}
	e.view, e.list = p.view, p.list
	e.row = w.list.Clone()
	if len(w.updates) > 0 || w.listRow {
		w.s.auth.listWritten(&w.list)
	}
	if len(w.auditKeys) > 0 {
		now := w.s.now()
		if e.auditAt == nil {
			e.auditAt = map[auditKey]time.Time{}
		} else if len(e.auditAt) >= 1024 {
			for k, at := range e.auditAt {
				if now.Sub(at) >= w.s.cfg.AuditCoalesce {
					delete(e.auditAt, k)
				}
			}
		}
		for _, k := range w.auditKeys {
			e.auditAt[k] = now
		}
	}
	for i, u := range w.updates {
		w.s.emit(Event{Kind: EventDocUpdate, ListRef: e.ref, Seq: p.last - int64(len(w.updates)-1-i), Update: u, Origin: w.origins[i], More: i < len(w.updates)-1})
	}
	if w.listRow || w.listEvent {
		w.s.emit(Event{Kind: EventListChanged, ListRef: e.ref})
	}
	// Other processes: the document notice makes them catch up (and see
	// title, kind or archive changes in the document); a list row change
	// outside the document needs its own notice.
	if len(w.updates) > 0 {
		w.s.notify(Notice{Kind: NoticeDoc, ListRef: e.ref, Seq: e.seq})
	}
	if w.listRow {
		w.s.notify(Notice{Kind: NoticeList, ListRef: e.ref})
	}
	if w.s.compactDue(e) {
		w.s.compactLater(e)
	}
}

// checkLimits refuses, as ETOOLARGE, a write by a client (HTTP or sync)
// that inserts anything (the document's state vector advances) and leaves
// the document over Config.MaxDocItems structs or MaxDocBytes encoded
// bytes. For sync writes only the clients' updates count, not the server's
// fixes and updatedAt stamps that follow them. A write that only deletes is accepted at any size (even when it
// splits structs), so a list stored before the limits existed, or at
// them, can still be read and shrunk. Removals (w.shrink: an HTTP soft
// delete, which sets deletedAt and updatedAt, and archiving) are never
// refused: each needs a live yap or an unarchived list, which no refused
// write can make, so what they add is bounded. System writes (the purge)
// only remove. It runs in commit, before anything is stored; the caller
// drops the cached document, which holds the refused edit, when fn
// changed it (w.dirty).
//
// The byte size is the cheap upper bound the cache keeps (compacted state
// plus the update log since). Only when that is over the limit is the
// document encoded to measure it exactly, and a compaction is started when
// the log, not the document, was over: the next writes measure cheaply
// again.
func (w *writeOp) checkLimits() error {
	cfg := &w.s.cfg
	if !w.limits || w.shrink || len(w.updates) == 0 {
		return nil
	}
	if !w.sync && w.doc.ClockSum() > w.clockBefore {
		w.grew = true
	}
	if !w.grew {
		return nil
	}
	if max := cfg.MaxDocItems; max > 0 && w.doc.StructCount() > max {
		return errItemLimit(max)
	}
	if max := cfg.MaxDocBytes; max > 0 {
		est := w.e.stateBytes + w.e.sinceBytes
		for _, u := range w.updates {
			est += int64(len(u))
		}
		if est > max {
			full, err := w.doc.EncodeStateAsUpdate(nil)
			if err != nil {
				return internal(err, "could not measure the list document")
			}
			if int64(len(full)) > max {
				return Errorf(ETOOLARGE, "the list document is over its size limit (%d bytes)", max)
			}
			w.s.compactLater(w.e)
		}
	}
	return nil
}

// refuseAtItemLimit refuses, before anything is edited, a new yap y that
// would take the document over Config.MaxDocItems structs. checkLimits
// would refuse it after the edit, and the edited document would then be
// dropped and loaded again: a whole load for every refused request of a
// client that keeps trying (a list at its limit cost about ten times a
// normal create in the create-yap-shared benchmark). Near the limit, the
// structs y adds are counted on a scratch document: its map and members
// are new items of a new parent, so they add as many to the list's.
func (w *writeOp) refuseAtItemLimit(y *Yap) error {
	max := w.s.cfg.MaxDocItems
	if !w.limits || max <= 0 {
		return nil
	}
	have := w.doc.StructCount()
	if have+yapStructsBound <= max {
		return nil
	}
	scratch := yjs.NewDoc()
	scratch.GetMap(rootYaps).Set(y.ID, newYapMap(y))
	if have+scratch.StructCount() > max {
		return errItemLimit(max)
	}
	return nil
}

// errItemLimit refuses a write that would take the document over max
// structs (Config.MaxDocItems).
func errItemLimit(max int) error {
	return Errorf(ETOOLARGE, "the list document is over its size limit (%d items)", max)
}

// yapStructsBound is more structs than one new yap adds to a document: its
// map and about a dozen members, at most MaxTags tags.
const yapStructsBound = 256

// startLimits notes what checkLimits compares with, before fn runs.
func (w *writeOp) startLimits() {
	if w.actor == nil || (w.s.cfg.MaxDocItems <= 0 && w.s.cfg.MaxDocBytes <= 0) {
		return
	}
	w.limits = true
	w.clockBefore = w.doc.ClockSum()
}
