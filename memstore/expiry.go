package memstore

import (
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// lockTimer takes over expired leases of a lock while callers wait for it.
type lockTimer struct {
	stop func() bool
	at   time.Time
}

// timer returns lk's timer, nil when it has none; lk's mutex is held.
func (s *Store) timer(lk *lock) *lockTimer {
	if !lk.timed {
		return nil
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	return s.timers[lk]
}

// setTimer records lk's timer (nil: none); lk's mutex is held.
func (s *Store) setTimer(lk *lock, t *lockTimer) {
	if !lk.timed && t == nil {
		return
	}
	s.tmu.Lock()
	if t == nil {
		delete(s.timers, lk)
	} else {
		if s.timers == nil {
			s.timers = make(map[*lock]*lockTimer)
		}
		s.timers[lk] = t
	}
	s.tmu.Unlock()
	lk.timed = t != nil
}

// stopTimer stops lk's timer; lk's mutex is held.
func (s *Store) stopTimer(lk *lock) {
	if t := s.timer(lk); t != nil {
		t.stop()
		s.setTimer(lk, nil)
	}
}

// lease is how long a grant or renewal lasts: hold when shorter than ttl.
func lease(ttl, hold time.Duration) time.Duration {
	if hold > 0 && hold < ttl {
		return hold
	}
	return ttl
}

// renewed is when h was taken or last kept, dated back by ttl-hold.
func renewed(h *holder) time.Time {
	if h.x == nil {
		return time.Time{}
	}
	if h.x.expires.IsZero() {
		return h.x.acquired
	}
	return h.x.expires.Add(-h.x.ttl)
}

// holdOf returns h's hold (store.Holder.Hold).
func holdOf(h *holder) time.Duration {
	if h.x == nil {
		return 0
	}
	return h.x.hold
}

// takeover is when h may be taken over by a request with staleAfter: at its
// expiry or, when staleAfter is not 0, staleAfter after its last renewal
// whatever its expiry says (sooner or later). A lease with no TTL is never
// taken over (zero).
func takeover(h *holder, staleAfter time.Duration) time.Time {
	exp := h.expires()
	if exp.IsZero() || staleAfter <= 0 {
		return exp
	}
	return renewed(h).Add(staleAfter)
}

// free returns the free slots of lk, first taking over leases that may be
// taken over (see takeover) when need slots are wanted and fewer are free.
func (s *Store) free(o *op, lk *lock, need int, staleAfter time.Duration) int {
	free := int(lk.slots) - lk.used()
	if free >= need || lk.nexp == 0 {
		return free
	}
	now := o.clock()
	for i := 0; i < len(lk.holders); {
		h := lk.holders[i]
		if at := takeover(h, staleAfter); !at.IsZero() && !at.After(now) {
			why := "taken over after its TTL"
			if h.x.expires.After(now) {
				why = "taken over as stale"
			}
			ref, kind, token, acquired, weight := h.ref, h.x.kind, h.token, h.x.acquired, h.weight()
			o.expiring = true
			o.end(lk, h, fmt.Errorf("%w: %s", store.ErrLeaseLost, why))
			o.expiring = false
			o.emit(store.Event{Type: store.EventExpired, Lock: lk.name, Slots: int(lk.slots), Running: lk.used(),
				Waiting: len(lk.waits()), Ref: o.refText(ref), Kind: kind, Token: token, Weight: weight, Held: since(now, acquired)})
			continue
		}
		i++
	}
	return int(lk.slots) - lk.used()
}

// setExpiry dates h as taken or kept now with ttl and hold.
func (o *op) setExpiry(lk *lock, h *holder, ttl, hold time.Duration) {
	x := h.ext()
	if !x.expires.IsZero() {
		lk.nexp--
	}
	x.ttl, x.hold, x.expires = ttl, hold, time.Time{}
	if ttl > 0 {
		x.expires = o.clock().Add(lease(ttl, hold))
		lk.nexp++
	}
}

// arm sets a timer for the earliest time a holder of lk may be taken over
// by the head of its queue, so a lease that is not renewed is taken over
// on time.
func (s *Store) arm(o *op, lk *lock) {
	if len(lk.waits()) == 0 || lk.nexp == 0 {
		s.stopTimer(lk)
		return
	}
	// A time already past is not armed: pump has just judged it (nobody
	// needed the slot).
	now := o.clock()
	stale := lk.waits()[0].staleAfter()
	var at time.Time
	for _, h := range lk.holders {
		if e := takeover(h, stale); !e.IsZero() && e.After(now) && (at.IsZero() || e.Before(at)) {
			at = e
		}
	}
	if at.IsZero() {
		s.stopTimer(lk)
		return
	}
	if t := s.timer(lk); t != nil && t.at.Equal(at) {
		return
	}
	s.stopTimer(lk)
	t := &lockTimer{at: at}
	t.stop = s.clock.AfterFunc(at.Sub(now), func() { s.expire(lk, t) })
	s.setTimer(lk, t)
}

// expire is lk's timer: it grants what expired leases free.
func (s *Store) expire(lk *lock, t *lockTimer) {
	o := op{s: s}
	if !o.enter(lk) {
		return
	}
	if s.closed.Load() {
		o.done()
		return
	}
	if s.timer(lk) != t {
		o.done() // stopped meanwhile, or another timer took its place
		return
	}
	s.setTimer(lk, nil)
	if len(lk.waits()) > 0 && lk.waits()[0].req != nil {
		o.ev = lk.waits()[0].req.Events
	}
	s.pump(&o, lk)
	s.forget(lk)
	o.done()
}
