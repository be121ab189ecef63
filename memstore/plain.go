package memstore

import (
	"context"
	"errors"
	"weak"

	"github.com/sleeplock/sleeplock/store"
)

// Slot names the lock of a plain lease (AcquirePlain); the lease is its
// lock and its token, and its ref is the token's in the lock's range of
// refs, so that a lease is a small value that the compiler keeps in
// registers, and its release needs no lookup by name. The zero Slot names
// none.
type Slot struct{ lk *lock }

// Name returns the name of the lock ("" for the zero Slot).
func (s Slot) Name() string {
	if s.lk == nil {
		return ""
	}
	return s.lk.name
}

// Ref returns the ref of the plain lease of token t (the zero Ref for the
// zero Slot).
func (s Slot) Ref(t int64) store.Ref {
	if s.lk == nil {
		return store.Ref{}
	}
	return s.lk.plainRef(t)
}

// ErrNotPlain is AcquirePlain's answer when the lock cannot grant a plain
// lease (it has no range of refs left, or its tokens passed the range):
// the caller acquires the general way (Acquire).
var ErrNotPlain = errors.New("memstore: the lock grants no plain lease")

// released is the context of every plain lease that was released by its
// holder before anyone asked for its context: one for all, so asking
// costs nothing however often.
var released = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(store.ErrReleased)
	return ctx
}()

// AcquirePlain is the fast path of package sleeplock: Acquire of one lock
// for a new generated ref, with no kind, no TTL and no notifier. It returns
// the lease's Slot and token (for ReleasePlain, PlainContext and PlainErr).
// A defined lock with a free slot, nobody waiting and few slots grants on
// its fast word (one compare-and-swap, see fast.go); otherwise under the
// lock's mutex. A name that is not a lock the store has is checked
// (store.CheckName) before anything else. ErrNotPlain: see there.
func (s *Store) AcquirePlain(ctx context.Context, name string, wait bool) (Slot, int64, error) {
	if s == nil || ctx == nil {
		return Slot{}, 0, s.usable(ctx)
	}
	if lk := s.load(name); lk != nil {
		if err := ctx.Err(); err != nil {
			return Slot{}, 0, err // an ended context takes nothing, free slot or not
		}
		if t, ok := lk.tryFast(); ok {
			if !s.closed.Load() {
				return Slot{lk}, t, nil
			}
			return s.undoFast(lk, t)
		}
		return s.acquireAt(ctx, lk, name, wait)
	}
	if err := s.usable(ctx); err != nil {
		return Slot{}, 0, err
	}
	if err := store.CheckName(name); err != nil {
		return Slot{}, 0, err
	}
	if err := ctx.Err(); err != nil {
		return Slot{}, 0, err
	}
	return s.acquirePlain(ctx, name, wait)
}

// undoFast gives back the fast grant of token t that found the store
// closed meanwhile (Close froze the lock, or is about to).
func (s *Store) undoFast(lk *lock, t int64) (Slot, int64, error) {
	lk.releaseFast(t)
	return Slot{}, 0, store.ErrClosed
}

// acquireAt is AcquirePlain of lk, the lock named name when it was looked
// up, when its fast word could not grant: under its mutex.
func (s *Store) acquireAt(ctx context.Context, lk *lock, name string, wait bool) (Slot, int64, error) {
	if s.times {
		return s.acquirePlain(ctx, name, wait)
	}
	lk.lockMu()
	if len(lk.waits()) == 0 && int(lk.slots) > len(lk.holders) && !lk.gone && !s.closed.Load() && lk.plainOK() {
		h := lk.newPlainHolder()
		lk.mu.Unlock() // held: no thaw
		return Slot{lk}, h.token, nil
	}
	if lk.gone || lk.multi > 0 || s.closed.Load() {
		s.unlockMu(lk)
		return s.acquirePlain(ctx, name, wait)
	}
	// Go on holding the mutex: a lock no waiter of several locks waits for.
	o := op{s: s, lk: lk}
	return s.acquirePlainLocked(ctx, &o, lk, wait)
}

// acquirePlain is AcquirePlain when a slot is not free at once.
func (s *Store) acquirePlain(ctx context.Context, name string, wait bool) (Slot, int64, error) {
	o := op{s: s}
	lk, err := s.enterName(&o, name)
	if err != nil {
		return Slot{}, 0, err
	}
	return s.acquirePlainLocked(ctx, &o, lk, wait)
}

// acquirePlainLocked is acquirePlain once the op holds lk.
func (s *Store) acquirePlainLocked(ctx context.Context, o *op, lk *lock, wait bool) (Slot, int64, error) {
	if !lk.plainOK() {
		s.forget(lk)
		o.done()
		return Slot{}, 0, ErrNotPlain
	}
	if len(lk.waits()) < s.free(o, lk, len(lk.waits())+1, 0) {
		h := lk.newPlainHolder()
		if stamp := o.stamp(0); !stamp.IsZero() {
			h.ext().acquired = stamp
		}
		o.done()
		return Slot{lk}, h.token, nil
	}
	if !wait {
		err := s.refuse(o, lk)
		s.forget(lk)
		o.done()
		return Slot{}, 0, err
	}
	w := waiters.Get().(*waiter)
	w.ref = store.NewRef()
	w.one[0] = lk
	w.locks = w.one[:]
	err := s.park(ctx, o, w)
	var token int64
	if err == nil {
		token = w.h.token
	}
	*w = waiter{ready: w.ready}
	waiters.Put(w)
	if err != nil {
		return Slot{}, 0, err
	}
	return Slot{lk}, token, nil
}

// ReleasePlain releases a lease that AcquirePlain granted: Release of
// that lease without a notifier. A grant on a lock still on its fast word
// is one compare-and-swap.
func (s *Store) ReleasePlain(slot Slot, token int64) error {
	if s == nil {
		return errNoStore
	}
	lk := slot.lk
	if lk == nil {
		return store.ErrNotHeld
	}
	if lk.releaseFast(token) {
		return nil
	}
	lk.lockMu()
	h := lk.byToken(token)
	if h != nil && lk.multi == 0 && len(lk.waits()) == 0 && lk.defined && h.x == nil && h.count == 1 && !s.closed.Load() {
		// Nobody waits and nobody watches: drop the record, nothing else.
		lk.remove(h)
		s.unlockMu(lk)
		return nil
	}
	o := op{s: s, lk: lk}
	if lk.multi > 0 {
		lk.mu.Unlock() // no thaw with a waiter of several locks
		o.lk = nil
		if !o.enter(lk) {
			return store.ErrNotHeld
		}
		h = lk.byToken(token)
	}
	if s.closed.Load() {
		o.done()
		return store.ErrClosed
	}
	if h == nil {
		o.done()
		return store.ErrNotHeld
	}
	if h.count > 1 {
		h.count--
		o.done()
		return nil
	}
	o.end(lk, h, store.ErrReleased)
	if len(lk.waits()) > 0 {
		s.pump(&o, lk)
	} else if !lk.defined {
		s.forget(lk)
	}
	o.done()
	return nil
}

// PlainContext returns the context of the plain lease of slot and token:
// cancelled, with the cause of its end, once the lease ends. Every call
// for one lease returns the same context, made on the first call (once
// the lease has ended: for as long as anyone holds that context).
func (s *Store) PlainContext(slot Slot, token int64) context.Context {
	lk := slot.lk
	if lk == nil {
		return released
	}
	lk.lockMu()
	defer s.unlockMu(lk)
	if h := lk.byToken(token); h != nil {
		x := h.ext()
		if x.ctx == nil {
			c, cancel := newPlainCtx()
			x.ctx, x.cancel = c, cancel
		}
		return x.ctx
	}
	e := s.lostOf(lk, token)
	if e == nil {
		return released
	}
	if c := e.ctx.Value(); c != nil {
		return c
	}
	if e.cause == nil {
		return released
	}
	c, cancel := newPlainCtx()
	cancel(e.cause)
	e.ctx = weak.Make(c)
	return c
}

// newPlainCtx makes a plain lease's context.
func newPlainCtx() (*plainCtx, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &plainCtx{ctx}, cancel
}

// PlainErr returns nil while the plain lease of slot and token is held,
// and why it ended otherwise: context.Cause of PlainContext.
func (s *Store) PlainErr(slot Slot, token int64) error {
	lk := slot.lk
	if lk == nil {
		return store.ErrReleased
	}
	if lk.heldFast(token) {
		return nil
	}
	lk.lockMu()
	defer s.unlockMu(lk)
	if lk.byToken(token) != nil {
		return nil
	}
	if e := s.lostOf(lk, token); e != nil && e.cause != nil {
		return e.cause
	}
	return store.ErrReleased
}

// Named is a defined lock looked up once (Lookup), for callers that
// acquire it often: AcquireNamed needs no lookup by name.
type Named struct{ lk *lock }

// Lookup returns the defined lock name, or nil when name is not a lock
// defined by name (a family member comes and goes: it is looked up by name
// on every call).
func (s *Store) Lookup(name string) *Named {
	if s == nil {
		return nil
	}
	lk := s.load(name)
	if lk == nil {
		return nil
	}
	lk.lockMu()
	defined := lk.defined && !lk.gone
	s.unlockMu(lk)
	if !defined {
		return nil
	}
	return &Named{lk}
}

// AcquireNamed is AcquirePlain of the lock n, which Lookup returned for
// name.
func (s *Store) AcquireNamed(ctx context.Context, n *Named, name string, wait bool) (Slot, int64, error) {
	if s == nil || ctx == nil {
		return Slot{}, 0, s.usable(ctx)
	}
	if n == nil || n.lk == nil {
		return Slot{}, 0, errNoNamed
	}
	if err := ctx.Err(); err != nil {
		return Slot{}, 0, err
	}
	if t, ok := n.lk.tryFast(); ok {
		if !s.closed.Load() {
			return Slot{n.lk}, t, nil
		}
		return s.undoFast(n.lk, t)
	}
	return s.acquireAt(ctx, n.lk, name, wait)
}
