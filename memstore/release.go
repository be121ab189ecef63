package memstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sleeplock/sleeplock/store"

	"time"
)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	o := op{s: s, ev: ev}
	if err := s.enterHandle(ctx, &o, &h); err != nil {
		return err
	}
	reason := store.ErrReleased
	if h.Token == 0 {
		reason = fmt.Errorf("%w: released by another caller naming its ref", store.ErrLeaseLost)
	}
	err := s.releaseHandle(&o, &h, reason)
	o.done()
	return err
}

// releaseHandle frees what h still holds, then grants waiters; the op
// holds the mutexes of h's locks.
func (s *Store) releaseHandle(o *op, h *store.Handle, reason error) error {
	if len(h.More) == 0 {
		lk := o.held(h.Name)
		if lk == nil || !s.releaseOne(o, lk, h.Ref, h.Token, reason) {
			return store.ErrNotHeld
		}
		s.pump(o, lk)
		s.forget(lk)
		return nil
	}
	var missing []string
	var touched []*lock
	h.Each(func(l store.Lock) {
		lk := o.held(l.Name)
		if lk == nil || !s.releaseOne(o, lk, h.Ref, l.Token, reason) {
			missing = append(missing, strconv.Quote(l.Name))
			return
		}
		touched = append(touched, lk)
	})
	for _, lk := range touched {
		s.pump(o, lk)
	}
	for _, lk := range touched {
		s.forget(lk)
	}
	if len(touched) == 0 {
		return store.ErrNotHeld
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(missing, ", "))
	}
	return nil
}

func (s *Store) releaseOne(o *op, lk *lock, ref store.Ref, token int64, reason error) bool {
	h := lk.find(ref, token)
	if h == nil {
		return false
	}
	if h.unhold() {
		return true
	}
	s.releaseHolder(o, lk, h, reason)
	return true
}

// releaseHolder ends h for reason and says so.
func (s *Store) releaseHolder(o *op, lk *lock, h *holder, reason error) {
	ref, kind, token, acquired, weight := h.ref, h.kind(), h.token, h.acquired(), h.weight()
	o.end(lk, h, reason)
	if o.ev != nil {
		o.emit(store.Event{Type: store.EventReleased, Lock: lk.name, Slots: int(lk.slots), Running: lk.used(),
			Waiting: len(lk.waits()), Ref: ref.String(), Kind: kind, Token: token, Weight: weight, Held: since(o.clock(), acquired)})
	}
}

// ReleaseStale implements store.Store.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	o := op{s: s, ev: ev}
	if err := s.enterHandle(ctx, &o, &h); err != nil {
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
