package ratelimit

import (
	"sync/atomic"
	"time"
)

// breaker is the circuit breaker of Config.BreakerCoolDown, one atomic
// word: 0 while closed (the store is used), otherwise the instant (Unix
// nanoseconds) until which the store is skipped.
type breaker struct {
	coolDown  time.Duration // <= 0: the breaker is off
	openUntil atomic.Int64
}

// expired is a non-zero instant in the past: open, cool-down over, so the
// next enter probes.
const expired = 1

// enter decides whether a Take uses the store. It returns use false to
// skip it (open and cooling down, or another Take is probing). With use
// true, tok is what that Take passes to succeeded, failed or abandoned.
func (b *breaker) enter(now time.Time) (tok int64, use bool) {
	if b.coolDown <= 0 {
		return 0, true
	}
	until := b.openUntil.Load()
	if until == 0 {
		return 0, true
	}
	if now.UnixNano() < until {
		return 0, false
	}
	// Cool-down over: one Take probes, holding the breaker open meanwhile.
	probe := now.Add(b.coolDown).UnixNano()
	if !b.openUntil.CompareAndSwap(until, probe) {
		return 0, false
	}
	return probe, true
}

// succeeded closes the breaker after a successful probe. A success while
// closed (tok 0) changes nothing.
func (b *breaker) succeeded(tok int64) {
	if tok != 0 {
		b.openUntil.CompareAndSwap(tok, 0)
	}
}

// failed opens the breaker for a cool-down from now. It reports whether
// this failure opened it (or the breaker is off): only that Take should
// report its error; a Take that failed after another had already opened
// the breaker lets its request through quietly.
func (b *breaker) failed(tok int64, now time.Time) (report bool) {
	if b.coolDown <= 0 {
		return true
	}
	return b.openUntil.CompareAndSwap(tok, now.Add(b.coolDown).UnixNano())
}

// abandoned records that a Take stopped because its own context ended: no
// verdict on the store. A probe hands over to the next Take.
func (b *breaker) abandoned(tok int64) {
	if tok != 0 {
		b.openUntil.CompareAndSwap(tok, expired)
	}
}
