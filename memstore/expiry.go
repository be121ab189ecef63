package memstore

import (
	"context"
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

// Keep implements store.Store.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	if err := s.usable(ctx); err != nil {
		return time.Time{}, err
	}
	o := op{s: s}
	if err := s.enterHandle(&o, &h); err != nil {
		return time.Time{}, err
	}
	defer o.done()
	held := true
	h.Each(func(l store.Lock) {
		if lk := o.held(l.Name); lk == nil || lk.find(h.Ref, l.Token) == nil {
			held = false
		}
	})
	if !held {
		return time.Time{}, store.ErrNotHeld
	}
	var exp time.Time
	h.Each(func(l store.Lock) {
		lk := o.held(l.Name)
		hd := lk.find(h.Ref, l.Token)
		o.setExpiry(lk, hd, ttl, hold)
		exp = hd.x.expires
		s.arm(&o, lk)
	})
	return exp, nil
}

// Held implements store.Store.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	if err := s.usable(ctx); err != nil {
		return store.Status{}, err
	}
	o := op{s: s}
	if err := s.enterHandle(&o, &h); err != nil {
		return store.Status{}, err
	}
	defer o.done()
	st := store.Status{Held: true, Now: s.clock.Now()}
	first := true
	h.Each(func(l store.Lock) {
		var hd *holder
		if lk := o.held(l.Name); lk != nil {
			hd = lk.find(h.Ref, l.Token)
		}
		if hd == nil {
			st.Held = false
			return
		}
		exp := hd.expires()
		if !exp.IsZero() && !exp.After(st.Now) {
			st.Expired = true // past its expiry, though nobody has taken it over yet
		}
		if first {
			st.Renewed, st.Expires = renewed(hd), exp
			first = false
		} else if !exp.IsZero() && (st.Expires.IsZero() || exp.Before(st.Expires)) {
			st.Expires = exp
		}
	})
	if !st.Held {
		st.Expired, st.Renewed, st.Expires = false, time.Time{}, time.Time{}
	}
	return st, nil
}

// ReleaseStale implements store.Store.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	o := op{s: s, ev: ev}
	if err := s.enterHandle(&o, &h); err != nil {
		return false, err
	}
	defer o.done()
	lk := o.held(h.Name)
	if lk == nil {
		return false, nil
	}
	hd := lk.find(h.Ref, h.Token)
	if hd == nil || hd.expires().IsZero() {
		return false, nil // a lease with no TTL is never stale
	}
	now := o.clock()
	stale := !hd.x.expires.After(now)
	if staleAfter > 0 {
		stale = !renewed(hd).Add(staleAfter).After(now)
	}
	if !stale {
		return false, nil
	}
	h.Token = 0 // the rest go whatever their tokens, as long as the ref holds them
	if len(h.More) > 0 {
		h.More = append([]store.Lock(nil), h.More...)
		for i := range h.More {
			h.More[i].Token = 0
		}
	}
	_ = s.releaseHandle(&o, &h, fmt.Errorf("%w: released as stale", store.ErrLeaseLost))
	return true, nil
}
