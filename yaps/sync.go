package yaps

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Snapshot returns Y.encodeStateAsUpdate of the list document, or only the
// part missing from stateVector when it is not empty, and an ETag derived
// from (ref, docVersion, stateVector). A malformed state vector is EINVALID.
func (s *Service) Snapshot(ctx context.Context, a *Actor, stateVector []byte) ([]byte, string, error) {
	if err := a.can(opRead, ""); err != nil {
		return nil, "", err
	}
	sv, err := parseStateVector(stateVector)
	if err != nil {
		return nil, "", err
	}
	var out []byte
	var etag string
	err = s.withDoc(ctx, a.List.Ref, func(e *docEntry) error {
		var err error
		if out, err = encodeParsedState(e.doc, sv); err != nil {
			return err
		}
		etag = snapshotETag(e.ref, e.seq, stateVector)
		return nil
	})
	return out, etag, err
}

// parseStateVector decodes sv; decode it before taking the document's lock,
// since decoding a large one (which any reader may send) is most of the cost.
func parseStateVector(sv []byte) (yjs.StateVector, error) {
	parsed, err := yjs.ParseStateVector(sv)
	if err != nil {
		return parsed, Errorf(EINVALID, "the state vector is malformed")
	}
	return parsed, nil
}

func encodeParsedState(d *yjs.Doc, sv yjs.StateVector) ([]byte, error) {
	out, err := d.EncodeStateFrom(sv)
	if err != nil {
		return nil, Errorf(EINVALID, "the state vector is malformed")
	}
	return out, nil
}

// StateVector returns the Yjs state vector of the list document (caught up
// with the store).
func (s *Service) StateVector(ctx context.Context, ref string) ([]byte, error) {
	var out []byte
	err := s.withDoc(ctx, ref, func(e *docEntry) error {
		s.docs.watch(ref, s.cfg.DocIdleTimeout) // held: it cannot be evicted first
		out = e.doc.EncodeStateVector()
		return nil
	})
	return out, err
}

// EncodeState returns the document as one update, or only the part missing
// from stateVector when it is not empty (sync step 2).
func (s *Service) EncodeState(ctx context.Context, ref string, stateVector []byte) ([]byte, error) {
	sv, err := parseStateVector(stateVector)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = s.withDoc(ctx, ref, func(e *docEntry) error {
		s.docs.watch(ref, s.cfg.DocIdleTimeout) // held: it cannot be evicted first
		var err error
		out, err = encodeParsedState(e.doc, sv)
		return err
	})
	return out, err
}

// Holds reports whether the list document already has everything update
// holds (yjs Doc.Holds): applying it would change nothing. A malformed
// update is EINVALID.
func (s *Service) Holds(ctx context.Context, ref string, update []byte) (bool, error) {
	// Decoded before the document's lock is taken: a reader may send large
	// updates, and must not hold up the list's writers while they decode.
	u := yjs.DecodeUpdate(update)
	if u.Err() != nil {
		return false, Errorf(EINVALID, "the document update is malformed")
	}
	var held bool
	err := s.withDoc(ctx, ref, func(e *docEntry) error {
		s.docs.watch(ref, s.cfg.DocIdleTimeout) // held: it cannot be evicted first
		held = e.doc.HoldsDecoded(u)
		return nil
	})
	return held, err
}

// ApplyUpdate applies a client's Yjs update (RULINGS R9, R10): the actor
// must be able to write (EFORBIDDEN otherwise, nothing applied; also on an
// archived list). The update is applied to the list document; every yap it
// changed is validated (schema, kind unchanged, the actor's scope for the
// old and the new kind) and so is the root map "list" (owner or editor
// only). What an agent inserts where its scope does not reach (a root type
// outside the schema, the list map, a yap of a kind outside its scope) is
// deleted again by a compensating update; an agent's update that deletes or
// overwrites anything there is EFORBIDDEN and changes nothing. When
// something is invalid or not permitted the service makes a compensating
// update: it restores the previous valid yap (or list members), or removes
// an invalid new yap. A new yap missing only the server members (id,
// createdAt, updatedAt) has them filled in instead, and server times set
// further than clockSkew from the server's clock are rewritten
// (serverTimes). The client's update is stored as sent, then the
// compensating update, each emitted as an EventDocUpdate (the client's with
// origin, the compensation with origin nil), and only valid yaps reach the
// projection. A duplicate update changes nothing and stores nothing; a
// malformed one is EINVALID. An update that depends on changes the document
// does not have (Yjs would keep it pending, yjs Doc.Pending) is EFORBIDDEN
// and changes nothing; the client sends it again with what it depends on at
// its next sync. An update that adds structs under a Yjs client ID another
// (non-owner) code owns is EFORBIDDEN and changes nothing (clients.go). A
// write that would take the document over Config.MaxDocBytes or MaxDocItems
// is ETOOLARGE and changes nothing (see Config). An actor with a ClientIP or
// an Account is charged a yap mutation (RULINGS R8) per yap the update
// creates, deletes, restores or removes; while its budget is spent such an
// update is ERATELIMITED, with RetryAfter, and changes nothing
// (syncbudget.go).
func (s *Service) ApplyUpdate(ctx context.Context, a *Actor, update []byte, origin any) error {
	if err := checkClientWrite(a); err != nil {
		return err
	}
	u := yjs.DecodeUpdate(update)
	foreign, err := s.foreignClients(ctx, a, u)
	if err != nil {
		return err
	}
	return s.applyOne(ctx, a, u, origin, foreign)
}

// applyOne is ApplyUpdate once the actor may write and the update's
// foreign clients are known.
func (s *Service) applyOne(ctx context.Context, a *Actor, u *yjs.Update, origin any, foreign map[uint64]uint64) error {
	var mutations int
	err := s.write(ctx, a.List.Ref, a, func(w *writeOp) error {
		s.docs.watch(a.List.Ref, s.cfg.DocIdleTimeout) // held: it cannot be evicted first
		if err := writable(&w.list); err != nil {
			return err
		}
		var err error
		mutations, err = w.applyClientUpdate(u, origin, foreign)
		return err
	})
	if err == nil {
		s.chargeMutations(ctx, a, mutations)
	}
	return err
}

// keepDecoded is the largest update whose decoded form ApplyUpdates keeps
// from reading its clients to applying it. A batch holds up to 64 updates
// of up to a megabyte each (ysync), and a large update decoded is several
// times its size: those are decoded again, one at a time, when applied.
const keepDecoded = 4 << 10

// ClientUpdate is one Yjs update a sync client sent, for ApplyUpdates.
type ClientUpdate struct {
	Actor  *Actor
	Update []byte
	Origin any
}

// ApplyUpdates applies several clients' updates to the list ref, in order,
// as ApplyUpdate would one by one, but in a single write: one store
// transaction and one list row update for all of them. Each update is
// validated (and compensated) on its own, against the document as the
// earlier ones left it. It returns one error per update, nil for those
// applied. When the batch as a whole fails (a malformed update, a revoked
// code, an archive meanwhile, an update over a document limit), nothing of
// it is written and each update is applied alone, so every error is that
// update's own. An update refused because it depends on changes the
// document does not have is refused alone: nothing of it was applied.
func (s *Service) ApplyUpdates(ctx context.Context, ref string, ups []ClientUpdate) []error {
	errs := make([]error, len(ups))
	foreign := make([]map[uint64]uint64, len(ups))
	decoded := make([]*yjs.Update, len(ups))
	var ok []int
	for i, u := range ups {
		errs[i] = checkClientWrite(u.Actor)
		if errs[i] == nil && u.Actor.List.Ref != ref {
			errs[i] = Errorf(EFORBIDDEN, "the permission is for another list")
		}
		if errs[i] == nil {
			decoded[i] = yjs.DecodeUpdate(u.Update)
			foreign[i], errs[i] = s.foreignClients(ctx, u.Actor, decoded[i])
			if len(u.Update) > keepDecoded {
				decoded[i].Release()
			}
		}
		if errs[i] == nil {
			ok = append(ok, i)
		}
	}
	switch len(ok) {
	case 0:
		return errs
	case 1:
		i := ok[0]
		errs[i] = s.applyOne(ctx, ups[i].Actor, decoded[i], ups[i].Origin, foreign[i])
		return errs
	}
	actors := make([]*Actor, len(ok))
	for j, i := range ok {
		actors[j] = ups[i].Actor
	}
	mutations := make([]int, len(ups))
	err := s.writeAs(ctx, ref, actors, func(w *writeOp) error {
		s.docs.watch(ref, s.cfg.DocIdleTimeout) // held: it cannot be evicted first
		if err := writable(&w.list); err != nil {
			return err
		}
		w.batch = &batchView{yaps: map[string]*Yap{}}
		// fn may run again (write ahead, then in the transaction): each
		// run sets every errs[i] of ok, or fails and the loop below does.
		for _, i := range ok {
			if l := w.batch.list; l != nil && l.ArchivedAt != nil {
				// Archived by an earlier update of the batch: refused
				// untouched, as it would be alone.
				errs[i] = errArchived
				continue
			}
			w.actor = ups[i].Actor
			mutations[i], errs[i] = w.applyClientUpdate(decoded[i], ups[i].Origin, foreign[i])
			if errs[i] == errDependsOnMissing || errs[i] == errForeignClient {
				continue // untouched: the others still stand
			}
			if errs[i] != nil {
				return errs[i]
			}
		}
		return nil
	})
	if err != nil {
		for _, i := range ok {
			u := ups[i]
			errs[i] = s.ApplyUpdate(ctx, u.Actor, u.Update, u.Origin)
		}
		return errs
	}
	for _, i := range ok {
		if errs[i] == nil {
			s.chargeMutations(ctx, ups[i].Actor, mutations[i])
		}
	}
	return errs
}

// checkClientWrite is what a sync write checks before it writes: a code
// that may write to a list that is not archived.
func checkClientWrite(a *Actor) error {
	if a == nil || a.Permission == nil || a.List == nil {
		return Errorf(EUNAUTHORIZED, "a permission code is required")
	}
	if err := a.can(opWriteYap, ""); err != nil {
		return err
	}
	return writable(a.List)
}

// errDependsOnMissing refuses an update that would not integrate whole;
// nothing of it was applied (ApplyUpdates goes on with the rest).
var errDependsOnMissing = Errorf(EFORBIDDEN, msgDependsOnMissing)

const msgDependsOnMissing = "the update depends on changes the server does not have; sync again"

// DependsOnMissing reports whether err refused a sync update because it
// builds on changes the document does not have (see ApplyUpdate): nothing
// of it was applied, and the client's next sync step 2 carries it with
// what it depends on.
func DependsOnMissing(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == EFORBIDDEN && e.Message == msgDependsOnMissing
}

// errForeignClient refuses an update that adds structs under a client ID
// another code owns (clients.go); nothing of it was applied.
var errForeignClient = Errorf(EFORBIDDEN, msgForeignClient)

// applyClientUpdate applies and validates one client's update, and returns
// how many yaps it created, deleted, restored or removed (the mutations it
// is charged, see syncbudget.go).
func (w *writeOp) applyClientUpdate(u *yjs.Update, origin any, foreign map[uint64]uint64) (mutations int, err error) {
	a, d, e := w.actor, w.doc, w.e
	if foreign != nil && foreignStructs(d, foreign) {
		return 0, errForeignClient // checked on the caught-up document, before anything is applied
	}
	beforeList := e.list
	if b := w.batch; b != nil && b.list != nil {
		beforeList = *b.list
	}
	before := w.yapBefore
	// left records what a yap is once this update is validated (nil:
	// absent), for the next update of a batch.
	left := func(id string, y *Yap) {
		if w.batch != nil {
			w.batch.yaps[id] = y
		}
	}
	ym := d.GetMap(rootYaps)
	// The observer and what it records live in w, so an update allocates
	// no closure and no captured variables for them.
	w.txs.reset(!allowed(a.Permission, opWriteOther, ""), ym)
	changed := w.txs.changed
	ymKeys := w.txs.ymKeys // changed keys of the root map "yaps"
	if w.observer == nil {
		w.observer = yjs.NewScopedObserver(w.observeClientTx)
	}
	d.Attach(w.observer)
	wasDirty := w.dirty // an earlier update of a batch may have changed d
	w.dirty = true
	var clock0 uint64
	if w.limits {
		w.sync = true // checkLimits: growth is what the clients' updates insert
		clock0 = d.ClockSum()
	}
	// An update that depends on changes this document does not have (Yjs
	// would integrate what it can and keep the rest pending) is refused
	// before anything of it is applied. It is refused, not kept: its
	// effect would only be known, and checked, when someone else's update
	// completed it, under that update's role (an agent could plant an edit
	// of a note), and data that never integrates could fill the document
	// to its size limit for good. Clients of this server only depend on
	// what it relayed them; one that lost an update sends it again with the
	// rest when it next syncs (step 2 holds all the server lacks). Refusing
	// it untouched keeps the cached document: a client whose earlier update
	// was refused sends only such updates until it resyncs, and each would
	// otherwise cost a reload of the document.
	pendS, pendD := d.Pending()
	applied, err := d.ApplyWhole(u, origin)
	d.Detach(w.observer)
	if err != nil {
		return 0, Errorf(EINVALID, "the document update is malformed")
	}
	if !applied {
		w.dirty = wasDirty
		return 0, errDependsOnMissing
	}
	if nowS, nowD := d.Pending(); len(pendS)+len(pendD) == 0 && len(nowS)+len(nowD) > 0 {
		// Applied, yet something went pending after all (the check and
		// Yjs's integration never disagreed in tests and fuzzing): refused
		// the same way, and the document, which holds it, is dropped. Only
		// judged on a document with nothing pending before: one stored
		// before pending updates were refused may hold some, which a whole
		// update can partly resolve, changing the pending set.
		w.s.log.Error("yaps: an update judged whole left pending data; refused", "list", e.ref)
		return 0, Errorf(EFORBIDDEN, msgDependsOnMissing) // not errDependsOnMissing: the document changed
	}
	if !w.txs.got {
		w.dirty = wasDirty // a duplicate: nothing integrated
		return 0, nil
	}
	// An agent's scope names yap kinds: it may not write root types outside
	// the schema (R9 keeps and relays them), the list, or a yap of a kind
	// outside its scope, members outside the schema, formatting and embeds
	// included. What it inserted there is deleted again below, like an
	// invalid yap is compensated, so its Y.Doc stays in step with the list.
	// What it deleted there (a text's characters, a member's old value, a
	// yap removed or replaced) cannot be put back in general: putting back
	// a yap would take a new map, and an edit another client makes to the
	// old one at the same time would be lost. So such an update is refused
	// whole. (Set for agents only.)
	if w.txs.foreignDel {
		return 0, Errorf(EFORBIDDEN, "an agent code may only change yaps within its scope")
	}
	if w.limits && d.ClockSum() > clock0 {
		w.grew = true // for checkLimits
	}
	w.updates = append(w.updates, u.Bytes())
	w.origins = append(w.origins, origin)

	ids := ymKeys
	var rootKeys []string // the yaps the update added, removed or replaced
	if len(ymKeys) > 0 {
		e.owners = nil
		for id := range ymKeys {
			rootKeys = append(rootKeys, id)
		}
	}
	owners := e.ownerIndex() // as of after the update: new members of changed maps are found too
	// The changed types below each yap, for rereadYap.
	type ownedType struct {
		id string
		t  any
	}
	var inYaps []ownedType
	for t := range changed {
		if id, ok := owners[t]; ok {
			ids[id] = true
			inYaps = append(inYaps, ownedType{id, t})
			if _, isMap := t.(*yjs.Map); isMap {
				e.owners = nil // members may have been added or replaced
			}
		}
	}
	// readChanged reads the yap id from v: only the members the update
	// changed when it edited nothing but shared types of a yap it did not
	// replace (typing), else all of it.
	readChanged := func(id string, v any, old *Yap) (*Yap, error) {
		if m, isMap := v.(*yjs.Map); isMap && old != nil && !slices.Contains(rootKeys, id) {
			var types []any
			for _, o := range inYaps {
				if o.id == id {
					types = append(types, o.t)
				}
			}
			if y, ok, err := rereadYap(old, m, types); ok {
				return y, err
			}
		}
		return readYap(e.ref, id, v)
	}

	now := w.s.now()
	var fixes []func()
	// A scratch map, handed over when it becomes w.valid (see below).
	if w.scratchValid == nil {
		w.scratchValid = map[string]*Yap{}
	}
	valid := w.scratchValid
	clear(valid)
	// Every stored change is audited (R5); audited notes that one was, or
	// that an earlier entry of the same code stands for it.
	audited := false
	audit := func(action, id string) { audited = true; w.auditf(action, id, "sync") }
	// mutate audits a yap's creation, deletion, restore or removal: the
	// changes a sync update is charged for (syncbudget.go).
	mutate := func(action, id string) { mutations++; audit(action, id) }
	for id := range ids {
		old := before(id)
		v, inDoc := ym.Get(id)
		if !inDoc {
			if old != nil { // removed; refused above when outside the actor's scope
				w.touch(id)
				mutate("yap.remove", id)
				left(id, nil)
			}
			continue
		}
		y, err := readChanged(id, v, old)
		filled := false
		if err == nil && old == nil && ValidYapID(id) {
			// Fill in server members a client may leave out.
			if y.CreatedAt.IsZero() {
				y.CreatedAt, filled = now, true
			}
			if y.UpdatedAt.IsZero() {
				y.UpdatedAt, filled = now, true
			}
		}
		if err == nil {
			err = ValidateYap(y)
		}
		if err == nil && old != nil && w.s.expired(old) {
			err = Errorf(ENOTFOUND, "yap was purged") // past the retention: read-only until the purge
		}
		if err == nil && old != nil && y.Kind != old.Kind {
			err = Errorf(EINVALID, "a yap's kind cannot change")
		}
		if err == nil && old != nil && !y.CreatedAt.Equal(old.CreatedAt) {
			err = Errorf(EINVALID, "a yap's createdAt is set by the server")
		}
		if err == nil && old != nil {
			err = a.can(opWriteYap, old.Kind)
		}
		if err == nil {
			err = a.can(opWriteYap, y.Kind)
		}
		switch {
		case err == nil:
			retimed := serverTimes(y, old, now)
			left(id, y)
			m, isMap := v.(*yjs.Map)
			// A filled-in member the map holds as a zero time is written too.
			// An update that changed only types inside the yap's map (typing)
			// left the map's members as they were when last validated.
			membersKept := isMap && old != nil && !changed[m] && !slices.Contains(rootKeys, id)
			rewrite := isMap && (filled || retimed || !membersKept && needsFill(m, y.Kind))
			same := sameYap(y, old)
			if same && !rewrite {
				continue
			}
			if !same {
				w.touch(id)
				switch {
				case old == nil:
					mutate("yap.create", id)
					if y.DeletedAt != nil {
						// Created deleted: both, as creating it and
						// deleting it over HTTP would be.
						mutate("yap.delete", id)
					}
				case y.DeletedAt != nil && old.DeletedAt == nil:
					mutate("yap.delete", id) // as over HTTP, never merged with edits
				case y.DeletedAt == nil && old.DeletedAt != nil:
					mutate("yap.restore", id)
				default:
					audited = true
					w.auditSyncEdit("yap.update", id)
				}
			}
			// A sync edit that leaves updatedAt alone: stamp it, at most
			// once per touchGrain, so HTTP readers see the change.
			stamp := !same && isMap && old != nil && y.UpdatedAt.Equal(old.UpdatedAt) && now.Sub(old.UpdatedAt) >= touchGrain
			if stamp {
				y.UpdatedAt = now
			}
			switch {
			case rewrite: // the stamp, if any, goes with it
				fixes = append(fixes, func() { writeYap(m, y) })
			case stamp:
				fixes = append(fixes, func() { m.Set("updatedAt", FormatTime(now)) })
			default:
				valid[id] = y // exactly what commit would read
			}
		case old != nil:
			w.touch(id)
			o := old
			if m, isMap := v.(*yjs.Map); isMap {
				fixes = append(fixes, func() { writeYap(m, o) })
			} else {
				fixes = append(fixes, func() { ym.Set(id, newYapMap(o)) })
			}
		default:
			w.touch(id)
			left(id, nil)
			fixes = append(fixes, func() { ym.Delete(id) })
		}
	}

	if mutations > 0 {
		if wait, held := w.s.mutationsHeld(a); held {
			return 0, errMutationsHeld(wait) // the document is reloaded: nothing of it stays
		}
	}

	lm := d.GetMap(rootList)
	if changed[lm] {
		lf, err := readList(d)
		if err == nil && (!lm.Has("title") || !lm.Has("kind")) {
			err = Errorf(EINVALID, "the list's title and kind cannot be removed")
		}
		if err == nil {
			err = a.can(opEditList, "")
		}
		if err != nil {
			fixes = append(fixes, func() { writeList(d, beforeList) })
		} else {
			auditListChange(beforeList, lf, func(action string) { audit(action, "") }) // as over HTTP
			if w.batch != nil {
				w.batch.list = &lf
			}
		}
	}
	if !w.txs.foreignIns.Empty() {
		foreignIns := w.txs.foreignIns
		fixes = append(fixes, func() { d.DeleteIDs(foreignIns, nil) })
	}
	if len(fixes) == 0 {
		if w.valid == nil {
			w.valid = valid
			w.scratchValid = nil // w.valid's now
		} else {
			// An earlier update of the batch validated yaps too: what this
			// one touched is as it says now (read again if it did not
			// validate it, e.g. removed or unchanged).
			for id := range ids {
				if y, ok := valid[id]; ok {
					w.valid[id] = y
				} else {
					delete(w.valid, id)
				}
			}
		}
		if !audited {
			// Stored, yet no yap or list field changed: a root outside the
			// schema, a member beside it, or a value set again. Recorded
			// too, and merged per code like typing.
			w.auditSyncEdit("doc.update", "")
		}
	}
	if len(fixes) > 0 {
		w.edit(func() {
			for _, f := range fixes {
				f()
			}
		}, nil)
	}
	return mutations, nil
}

// clientTxs is what observeClientTx records of the transactions one
// client update makes (applyClientUpdate sets it up for each update).
type clientTxs struct {
	got        bool // a transaction changed the document
	first      bool // the next transaction is the client's own
	agent      bool // the writer is an agent: note what it does outside its scope
	foreignIns yjs.IDSet
	foreignDel bool
	changed    map[any]bool    // the types changed
	ymKeys     map[string]bool // the changed keys of the root map "yaps"
	ym         *yjs.Map
}

// reset starts the record of the next client update of a write (agent:
// its writer is one; ym: the root map "yaps"), keeping the maps of the
// updates before it for reuse.
func (c *clientTxs) reset(agent bool, ym *yjs.Map) {
	changed, ymKeys := c.changed, c.ymKeys
	if changed == nil {
		changed, ymKeys = map[any]bool{}, map[string]bool{}
	}
	clear(changed)
	clear(ymKeys)
	*c = clientTxs{first: true, agent: agent, changed: changed, ymKeys: ymKeys, ym: ym}
}

// observeClientTx records one transaction of a client update in w.txs.
func (w *writeOp) observeClientTx(tx *yjs.Transaction) {
	c := &w.txs
	if tx.HasChanges() {
		c.got = true
	}
	// An agent's changes outside what it may write: what it inserted
	// there, and whether it deleted anything that was there before. Only
	// the client's own transaction, the first: applying it to a formatted
	// text runs a clean-up transaction after it, whose (server-made)
	// changes must not replace what the client did.
	if c.agent && c.first {
		c.foreignIns = tx.InsertedUnder(w.outsideScope)
		c.foreignDel = tx.DeletedUnder(w.outsideScope)
	}
	c.first = false
	for _, t := range tx.ChangedTypes() {
		c.changed[t] = true
		if t == any(c.ym) {
			for _, k := range tx.ChangedKeys(c.ym) {
				if ks, ok := k.(string); ok {
					c.ymKeys[ks] = true
				}
			}
		}
	}
}

// outsideScope says where an agent may not write: the roots outside the
// schema, the list map, and the yaps outside its scope (by their kind
// before this update; a new yap out of scope is removed by
// applyClientUpdate).
func (w *writeOp) outsideScope(root, key string) bool {
	if root != rootYaps {
		return true
	}
	old := w.yapBefore(key)
	return old != nil && w.actor.can(opWriteYap, old.Kind) != nil
}

// yapBefore returns yap id as the updates applied so far left it (nil:
// absent): in a batch, as the earlier updates left it; else as cached.
func (w *writeOp) yapBefore(id string) *Yap {
	if b := w.batch; b != nil {
		if y, ok := b.yaps[id]; ok {
			return y
		}
	}
	return w.e.view[id]
}

// clockSkew is how far from the server's clock a time a sync client sets
// in a server member may be (createdAt of a new yap, updatedAt, deletedAt)
// and still be kept: clients stamp them with their own clocks, which are
// off by seconds, sometimes minutes.
const clockSkew = 5 * time.Minute

// serverTimes keeps the members the server's clock owns honest, and reports
// whether it changed y. A time a client set further than clockSkew from now
// becomes now: a new yap's createdAt, a deletedAt the update set (one in
// the past would make the yap purgeable at once, R7), and an updatedAt the
// update set (else one client's clock in the future would freeze the yap's
// updatedAt for the others). An updatedAt is never before createdAt, nor
// before the yap's last one: it then becomes the later of now and that. The
// edit itself stands either way; only the time is rewritten.
func serverTimes(y, old *Yap, now time.Time) (changed bool) {
	far := func(t time.Time) bool { return t.Before(now.Add(-clockSkew)) || t.After(now.Add(clockSkew)) }
	if old == nil && far(y.CreatedAt) {
		y.CreatedAt, changed = now, true
	}
	if old == nil || !y.UpdatedAt.Equal(old.UpdatedAt) {
		floor := y.CreatedAt
		if old != nil {
			floor = old.UpdatedAt
		}
		if y.UpdatedAt.Before(floor) || far(y.UpdatedAt) {
			y.UpdatedAt, changed = now, true
			if now.Before(floor) {
				y.UpdatedAt = floor
			}
		}
	}
	if y.DeletedAt != nil && (old == nil || !sameTime(old.DeletedAt, y.DeletedAt)) && far(*y.DeletedAt) {
		t := now
		y.DeletedAt, changed = &t, true
	}
	return changed
}

// touchGrain is how stale a yap's updatedAt may get under sync edits that
// do not set it: the server stamps it on the first such edit after
// touchGrain, so a stream of keystrokes costs one server update per yap per
// touchGrain, not one per keystroke.
const touchGrain = 10 * time.Second

// textKeys are the members of each kind that R9 makes Y.Text.
var textKeys = map[Kind][]string{KindTask: {"content"}, KindNote: {"title", "body"}, KindEvent: {"title"}}

// needsFill reports whether a valid yap's map lacks a server member or holds
// a member in another shape than R9's (a plain string for a Y.Text, a plain
// array for tags): writeYap then puts it in the layout every peer expects.
func needsFill(m *yjs.Map, kind Kind) bool {
	for _, k := range []string{"id", "createdAt", "updatedAt"} {
		if v, ok := m.Get(k); !ok || v == nil {
			return true
		}
	}
	for _, k := range textKeys[kind] {
		if v, ok := m.Get(k); ok && v != nil {
			if _, isText := v.(*yjs.Text); !isText {
				return true
			}
		}
	}
	if v, ok := m.Get("tags"); ok && v != nil {
		if _, isArray := v.(*yjs.Array); !isArray {
			return true
		}
	}
	return false
}
