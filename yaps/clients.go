package yaps

import (
	"context"
	"slices"
	"sync"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Yjs names every struct of a document by the client ID of the Y.Doc that
// made it and a clock. A writer that sent structs under another client's ID
// at that client's next clocks would make the real client's own edits look
// like duplicates, dropped when it next syncs. So each client ID of a list
// is claimed by the first code whose update holds structs under it
// (Store.ClaimClients), and no other code may add structs under it. Owner
// codes may: an owner can change anything anyway, and rotating the owner
// code gives the same person a new permission whose offline edits still
// carry the old code's client IDs. Structs the document already has
// (another client's changes relayed back in a step 2) are not new and are
// allowed under any ID.

// claimCache remembers claims, which never change, so an update from a
// client ID seen before costs no store round trip.
type claimCache struct {
	mu sync.Mutex
	m  map[claimKey]string
}

type claimKey struct {
	ref    string
	client uint64
}

// maxCachedClaims bounds the cache; past it the cache starts over.
const maxCachedClaims = 1 << 16

// maxNewClients is how many client IDs no code has claimed one update may
// write new structs under. A Y.Doc writes under one ID per session; a step
// 2 after a long offline spell holds a few.
const maxNewClients = 64

const msgForeignClient = "the update writes under a Yjs client ID another code uses; start from a new Y.Doc"

// foreignClients claims for a's permission the client IDs no code has
// claimed under which update adds structs the document does not have, and
// returns the IDs another code owns with the end clock of the update's
// structs under each: the write refuses the update if it adds structs past
// the document's state for any of them (foreignStructs). Nil for owners,
// for updates without structs, and for malformed updates (the write
// refuses those itself).
func (s *Service) foreignClients(ctx context.Context, a *Actor, u *yjs.Update) (map[uint64]uint64, error) {
	ends := u.Ends()
	if len(ends) == 0 {
		return nil, nil
	}
	ref, me := a.List.Ref, a.Permission.ID
	owners := make(map[uint64]string, len(ends))
	var buf [8]uint64
	missing := buf[:0]
	for _, e := range ends {
		missing = append(missing, e.Client)
	}
	missing = s.claims.lookup(ref, missing, owners)
	if len(missing) > 0 {
		// Claim only the IDs under which the update adds structs the
		// document does not have: structs it has (relayed back in a step
		// 2) say nothing about who writes under an ID. An update that is
		// refused later may still have claimed its IDs, so their number
		// per update is bounded.
		var freshBuf [8]uint64
		fresh := freshBuf[:0]
		err := s.withDoc(ctx, ref, func(e *docEntry) error {
			for _, c := range ends {
				if slices.Contains(missing, c.Client) && c.Clock > e.doc.ClientState(c.Client) {
					fresh = append(fresh, c.Client)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if err := s.claim(ctx, ref, me, fresh, owners); err != nil {
			return nil, err
		}
	}
	if a.Permission.Role == RoleOwner {
		return nil, nil
	}
	var foreign map[uint64]uint64
	for _, c := range ends {
		if p, claimed := owners[c.Client]; claimed && p != me {
			if foreign == nil {
				foreign = map[uint64]uint64{}
			}
			foreign[c.Client] = c.Clock
		}
	}
	return foreign, nil
}

// ClaimClientIDs claims for a's permission the Yjs client IDs among ids
// that no code has claimed yet. The sync endpoint calls it when a
// connection that may write first announces an ID in awareness: a
// y-websocket client shows its ID there once the app sets a state, usually
// before it writes, and a writer who saw it there could otherwise write
// under it first and own it. Actors that may not write claim nothing; more than
// maxNewClients unclaimed IDs at once is EINVALID and claims none.
func (s *Service) ClaimClientIDs(ctx context.Context, a *Actor, ids []uint64) error {
	if len(ids) == 0 || !s.CanWrite(a) {
		return nil
	}
	missing := s.claims.lookup(a.List.Ref, slices.Clone(ids), nil)
	return s.claim(ctx, a.List.Ref, a.Permission.ID, missing, nil)
}

// lookup moves the owners of the cached IDs among ids into owners (when
// not nil) and returns the others, reusing ids.
func (c *claimCache) lookup(ref string, ids []uint64, owners map[uint64]string) []uint64 {
	missing := ids[:0]
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if p, ok := c.m[claimKey{ref, id}]; ok {
			if owners != nil {
				owners[id] = p
			}
		} else {
			missing = append(missing, id)
		}
	}
	return missing
}

// claim claims ids, none of them cached, for permission me, and caches and
// adds to owners (when not nil) the owner of each: me, or the code that
// claimed it first.
func (s *Service) claim(ctx context.Context, ref, me string, ids []uint64, owners map[uint64]string) error {
	if len(ids) == 0 {
		return nil
	}
	if len(ids) > maxNewClients {
		return Errorf(EINVALID, "the update writes under more than %d new Yjs client IDs", maxNewClients)
	}
	slices.Sort(ids) // one lock order for concurrent claims (Postgres)
	got, err := s.cfg.Store.ClaimClients(ctx, ref, me, ids)
	if err != nil {
		return err
	}
	c := &s.claims
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(got) > maxCachedClaims {
		c.m = make(map[claimKey]string, len(got))
	}
	for id, p := range got {
		c.m[claimKey{ref, id}] = p
		if owners != nil {
			owners[id] = p
		}
	}
	return nil
}

// foreignStructs reports whether an update adds structs past d's state
// under a client ID another code owns (foreign, from foreignClients).
func foreignStructs(d *yjs.Doc, foreign map[uint64]uint64) bool {
	for id, end := range foreign {
		if end > d.ClientState(id) {
			return true
		}
	}
	return false
}
