package yaps

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Sync writes and the yap-mutation limit (RULINGS R8). Over HTTP every
// mutation is one request, counted before it runs. A sync client sends
// document updates, and most are typing: charging each would stop a
// collaborative edit within a second at 60 a minute. So a sync update is
// charged one mutation per yap it creates, deletes, restores or removes
// (what the audit log records as yap.create, yap.delete, yap.restore and
// yap.remove), against the same budget as the sender's HTTP requests, and
// edits within yaps are free.
//
// What an update does is known only once it is applied, so it is charged
// after it is stored. When that finds the budget spent, the sender's key is
// held until the window resets: its next update that creates, deletes,
// restores or removes a yap is refused untouched with ERATELIMITED and its
// RetryAfter (ysync holds it and applies it then; nothing is lost). One
// update per window may so go over the budget, by the yaps it holds; the
// document limits (Config.MaxDocItems, MaxDocBytes) bound that too. Holds
// are kept in this process: another process learns of a spent budget with
// the first update it charges there.
//
// Only actors with a ClientIP or an Account are charged (the sync endpoint
// sets both): a Go program applying its own updates with ApplyUpdate is
// not a client of the limits.

// maxMutationHolds bounds the keys held at once (about 100 bytes each).
// Past it, expired holds are dropped, and then one live hold, chosen at
// random, makes room: that key may get one more update over its budget
// before its next charge holds it again.
const maxMutationHolds = 100_000

// mutationHolds maps a limit key to when its hold ends.
type mutationHolds struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// chargedActor reports whether a's sync writes count against the limits.
func chargedActor(a *Actor) bool {
	return a != nil && (a.ClientIP != "" || a.Account != nil)
}

// mutationsHeld returns how long a's yap mutations are still held, if they
// are.
func (s *Service) mutationsHeld(a *Actor) (time.Duration, bool) {
	if !chargedActor(a) {
		return 0, false
	}
	k := holdKey(a)
	h := &s.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	end, ok := h.until[k]
	if !ok {
		return 0, false
	}
	left := end.Sub(s.cfg.Now())
	if left <= 0 {
		delete(h.until, k)
		return 0, false
	}
	return left, true
}

// holdKey is a's limit class and key, the key of its hold.
func holdKey(a *Actor) string {
	class, key := limitKey(a.ClientIP, a.Account, a)
	return string(class) + " " + key
}

// errMutationsHeld is the refusal of an update while its sender is held.
func errMutationsHeld(wait time.Duration) error {
	return &Error{Code: ERATELIMITED, Message: "rate limit exceeded: no more yaps may be created or deleted for now",
		RetryAfter: max((wait + time.Second - 1).Truncate(time.Second), time.Second)} // rounded up: never released early
}

// chargeMutations charges n yap mutations of a stored sync update to a's
// budget, and holds a's key once it is spent (see above).
func (s *Service) chargeMutations(ctx context.Context, a *Actor, n int) {
	if n == 0 || !chargedActor(a) {
		return
	}
	for range n {
		_, err := s.Limit(ctx, LimitMutation, a.ClientIP, a.Account, a)
		var e *Error
		if err == nil || !errors.As(err, &e) || e.Code != ERATELIMITED {
			continue // allowed, or the limiter failed (Limit lets it through)
		}
		s.hold(holdKey(a), s.cfg.Now().Add(e.RetryAfter))
		return
	}
}

func (s *Service) hold(key string, end time.Time) {
	h := &s.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until == nil {
		h.until = map[string]time.Time{}
	}
	if _, ok := h.until[key]; !ok && len(h.until) >= maxMutationHolds {
		now := s.cfg.Now()
		for k, t := range h.until {
			if !t.After(now) {
				delete(h.until, k)
			}
		}
		for k := range h.until {
			if len(h.until) < maxMutationHolds {
				break
			}
			delete(h.until, k)
		}
	}
	h.until[key] = end
}
