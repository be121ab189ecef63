package memstore

import (
	"context"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Keep implements store.Store.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	o := op{s: s}
	if err := s.enterHandle(ctx, &o, &h); err != nil {
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
	o := op{s: s}
	if err := s.enterHandle(ctx, &o, &h); err != nil {
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
