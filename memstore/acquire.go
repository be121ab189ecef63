package memstore

import (
	"context"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	if err := s.usable(ctx); err != nil {
		return store.Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Grant{}, err
	}
	if len(req.More) > 0 {
		return s.acquireAll(ctx, &req)
	}
	o := op{s: s, ev: req.Events}
	lk, err := s.enterName(&o, req.Name)
	if err != nil {
		return store.Grant{}, err
	}
	if h := lk.find(req.Ref, 0); h != nil {
		g := s.reenter(&o, lk, h, &req)
		o.done()
		return g, nil
	}
	need := 1
	if req.Weighted() {
		need = store.Need(req.WeightOf(0), int(lk.slots))
		if need > int(lk.slots) {
			err := &store.WeightError{Lock: lk.name, Weight: need, Slots: int(lk.slots)}
			s.forget(lk)
			o.done()
			return store.Grant{}, err
		}
	}
	if n := lk.ahead(len(lk.waits())) + need; n <= s.free(&o, lk, n, req.StaleAfter) {
		h := s.addHolder(&o, lk, &req, need)
		g := store.Grant{Lock: store.Lock{Name: lk.name, Token: h.token}, Ref: req.Ref, Kind: req.Kind, TTL: req.TTL, Hold: req.Hold,
			Acquired: h.acquired(), Expires: h.expires(), Weight: need}
		if o.ev != nil {
			o.emit(store.Event{Type: store.EventAcquired, Lock: lk.name, Slots: int(lk.slots), Running: lk.used(),
				Waiting: len(lk.waits()), Ref: o.refText(req.Ref), Kind: req.Kind, Token: g.Token, Weight: need})
		}
		o.done()
		return g, nil
	}
	if !req.Wait {
		err := s.refuse(&o, lk, req.WeightOf(0))
		s.forget(lk)
		o.done()
		return store.Grant{}, err
	}
	w := &waiter{ref: req.Ref, req: &req, ready: make(chan struct{}, 1), heavy: req.Weighted()}
	w.one[0] = lk
	w.locks = w.one[:]
	return s.wait(ctx, &o, w)
}

// enterName looks up (or makes, for a family member) the lock name and
// enters it, checking that the store is open.
func (s *Store) enterName(o *op, name string) (*lock, error) {
	for {
		lk, err := s.get(name, true, false)
		if err != nil {
			if s.closed.Load() {
				return nil, store.ErrClosed
			}
			return nil, err
		}
		if !o.enter(lk) {
			continue
		}
		if s.closed.Load() {
			o.done()
			return nil, store.ErrClosed
		}
		return lk, nil
	}
}

// enterHandle checks that the store and ctx are usable, then enters the
// locks of h: the one lock alone (nothing when it is a family member not
// in use), several under the store's mutex. It reports ErrClosed and, for
// a name nothing covers, NotFound.
func (s *Store) enterHandle(ctx context.Context, o *op, h *store.Handle) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if len(h.More) == 0 {
		for {
			lk, err := s.get(h.Name, false, false)
			switch {
			case s.closed.Load():
				return store.ErrClosed
			case err != nil:
				return err
			case lk == nil:
				return nil
			}
			if !o.enter(lk) {
				continue
			}
			if s.closed.Load() {
				o.done()
				return store.ErrClosed
			}
			return nil
		}
	}
	if err := o.enterOpen(); err != nil {
		return err
	}
	if err := s.covered(h); err != nil {
		o.done()
		return err
	}
	h.Each(func(l store.Lock) {
		_, _ = o.lockName(l.Name, false) // covered: no error
	})
	return nil
}

// held returns the lock named name if the op holds its mutex, else nil.
func (o *op) held(name string) *lock {
	if o.lk != nil && o.lk.name == name {
		return o.lk
	}
	for _, l := range o.more {
		if l.name == name {
			return l
		}
	}
	return nil
}

// addHolder records a new hold of lk for req, of weight slots.
func (s *Store) addHolder(o *op, lk *lock, req *store.AcquireRequest, weight int) *holder {
	now := o.stamp(req.TTL)
	wait := time.Duration(-1)
	if o.hasWait {
		wait = o.wait
	}
	h := lk.newHolder(req.Ref, wait)
	if weight != 1 {
		lk.setWeight(h, weight)
	}
	if req.Kind != "" || req.TTL > 0 || req.Hold > 0 || !now.IsZero() {
		x := h.ext()
		x.kind, x.ttl, x.hold, x.acquired = req.Kind, req.TTL, req.Hold, now
		if req.TTL > 0 {
			x.expires = now.Add(lease(req.TTL, req.Hold))
			lk.nexp++
		}
	}
	return h
}

func (s *Store) reenter(o *op, lk *lock, h *holder, req *store.AcquireRequest) store.Grant {
	if req.Counted {
		h.ext().more++
	}
	if req.TTL > 0 {
		o.setExpiry(lk, h, req.TTL, req.Hold)
	}
	g := store.Grant{Lock: store.Lock{Name: lk.name, Token: h.token}, Ref: h.ref, Reentered: true, Weight: h.weight()}
	if x := h.x; x != nil {
		g.Kind, g.TTL, g.Hold, g.Acquired, g.Expires = x.kind, x.ttl, x.hold, x.acquired, x.expires
	}
	return g
}

// refuse builds the refusal of a request of weight for lk.
func (s *Store) refuse(o *op, lk *lock, weight int) error {
	e := store.Busy(lk.name, weight, int(lk.slots), lk.used())
	if lk.used() < int(lk.slots) && len(lk.waits()) > 0 {
		e.Queued = true
	}
	if len(lk.holders) > 0 && !e.Queued {
		h := lk.holders[0]
		for _, x := range lk.holders {
			if x.token < h.token {
				h = x // the oldest, as State lists it first
			}
		}
		e.Kind, e.Ref, e.Expires = h.kind(), h.ref.String(), h.expires()
	}
	lk.st.refusal()
	o.emit(store.Event{Type: store.EventRefused, Lock: lk.name, Slots: int(lk.slots), Running: lk.used(), Waiting: len(lk.waits()), Holder: e.Kind, Weight: weight})
	return e
}

func (s *Store) acquireAll(ctx context.Context, req *store.AcquireRequest) (store.Grant, error) {
	o := op{s: s, ev: req.Events}
	if err := o.enterOpen(); err != nil {
		return store.Grant{}, err
	}
	locks := make([]*lock, 0, 1+len(req.More))
	var firstErr error
	for _, name := range req.Names() {
		lk, err := o.lockName(name, true)
		if err != nil {
			firstErr = err
			break
		}
		locks = append(locks, lk)
	}
	if firstErr != nil {
		for _, lk := range locks {
			s.forget(lk)
		}
		o.done()
		return store.Grant{}, firstErr
	}
	if req.ReenterAll {
		if err := s.partly(&o, req, locks); err != nil {
			for _, l := range locks {
				s.forget(l)
			}
			o.done()
			return store.Grant{}, err
		}
	}
	heavy := req.Weighted()
	if heavy {
		for i, lk := range locks {
			if need := store.Need(req.WeightOf(i), int(lk.slots)); need > int(lk.slots) && lk.find(req.Ref, 0) == nil {
				for _, l := range locks {
					s.forget(l)
				}
				o.done()
				return store.Grant{}, &store.WeightError{Lock: lk.name, Weight: need, Slots: int(lk.slots)}
			}
		}
	}
	ok := true
	for i, lk := range locks {
		if lk.find(req.Ref, 0) != nil {
			continue
		}
		if n := lk.ahead(len(lk.waits())) + store.Need(req.WeightOf(i), int(lk.slots)); n > s.free(&o, lk, n, req.StaleAfter) {
			ok = false
			if !req.Wait {
				err := s.refuse(&o, lk, req.WeightOf(i))
				for _, l := range locks {
					s.forget(l)
				}
				o.done()
				return store.Grant{}, err
			}
		}
	}
	if ok {
		g := s.grantAll(&o, req, locks, time.Time{})
		o.done()
		return g, nil
	}
	w := &waiter{ref: req.Ref, req: req, locks: locks, ready: make(chan struct{}, 1), heavy: heavy}
	return s.wait(ctx, &o, w)
}

// partly refuses req when its ref holds some of locks but not all (see
// store.AcquireRequest.ReenterAll), naming the first it holds.
func (s *Store) partly(o *op, req *store.AcquireRequest, locks []*lock) error {
	var first *holder
	var at *lock
	n := 0
	for _, lk := range locks {
		if h := lk.find(req.Ref, 0); h != nil {
			if n++; first == nil {
				first, at = h, lk
			}
		}
	}
	if n == 0 || n == len(locks) {
		return nil
	}
	e := &store.BusyError{Lock: at.name, Kind: first.kind(), Ref: first.ref.String(), Expires: first.expires()}
	at.st.refusal()
	o.emit(store.Event{Type: store.EventRefused, Lock: at.name, Slots: int(at.slots), Running: at.used(), Waiting: len(at.waits()), Holder: e.Kind})
	return e
}

// grantAll gives req a slot of every lock (its existing hold where it has
// one) and returns the grant; every lock's mutex is held.
func (s *Store) grantAll(o *op, req *store.AcquireRequest, locks []*lock, queued time.Time) store.Grant {
	g := store.Grant{Ref: req.Ref, Kind: req.Kind, TTL: req.TTL, Hold: req.Hold, Reentered: true}
	if !queued.IsZero() {
		o.wait, o.hasWait = o.waited(queued), true
	}
	if len(locks) > 1 {
		g.More = make([]store.Lock, 0, len(locks)-1)
	}
	for n, lk := range locks {
		var l store.Lock
		h := lk.find(req.Ref, 0)
		if h != nil {
			l = s.reenter(o, lk, h, req).Lock
		} else {
			g.Reentered = false
			need := store.Need(req.WeightOf(n), int(lk.slots))
			h = s.addHolder(o, lk, req, need)
			l = store.Lock{Name: lk.name, Token: h.token}
			o.emit(store.Event{Type: store.EventAcquired, Lock: lk.name, Slots: int(lk.slots), Running: lk.used(),
				Waiting: len(lk.waits()), Ref: o.refText(req.Ref), Kind: req.Kind, Token: l.Token, Weight: need, Waited: since(h.acquired(), queued)})
		}
		exp := h.expires()
		if n == 0 {
			g.Lock, g.Acquired, g.Expires, g.Weight = l, h.acquired(), exp, h.weight()
		} else {
			g.More = append(g.More, l)
			if !exp.IsZero() && (g.Expires.IsZero() || exp.Before(g.Expires)) {
				g.Expires = exp
			}
		}
	}
	o.hasWait = false
	return g
}
