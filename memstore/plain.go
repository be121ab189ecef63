package memstore

import (
	"context"
	"weak"

	"github.com/sleeplock/sleeplock/internal/plain"
	"github.com/sleeplock/sleeplock/store"
)

// Plain returns the store's plain path: the allocation-free acquisitions
// that package sleeplock makes when a call asks for nothing a plain lease
// lacks (no ref, kind, TTL or notifier). It is there for package
// sleeplock, which finds it with a type assertion when its Locks are made;
// its type is internal. A nil Store has none.
func (s *Store) Plain() plain.Store {
	if s == nil {
		return nil
	}
	return (*plainStore)(s)
}

// plainStore is a Store's plain path (package internal/plain): the plain
// path of package sleeplock, kept out of the Store's own methods.
type plainStore Store

var (
	_ plain.Provider = (*Store)(nil)
	_ plain.Store    = (*plainStore)(nil)
	_ plain.Lock     = (*lock)(nil)
	_ plain.Lock     = (*weightedLock)(nil)
)

// Name implements plain.Lock.
func (lk *lock) Name() string { return lk.name }

// Store implements plain.Lock.
func (lk *lock) Store() store.Store { return lk.store() }

// Ref implements plain.Lock: the ref of the plain lease of token t.
func (lk *lock) Ref(t int64) store.Ref { return lk.plainRef(t) }

// Weight implements plain.Lock: a plain lease through lk takes one slot.
func (lk *lock) Weight() int { return 1 }

// weightedLock is lk as the plain leases of weight w see it (their Lock):
// the lease of a weighted grant is a Lock and a token, as a plain lease
// is, with its weight in the view. Everything else is lk's.
type weightedLock struct {
	*lock
	w int
}

// Weight implements plain.Lock.
func (v *weightedLock) Weight() int { return v.w }

// Release implements plain.Lock: the grant of token is of v.w slots.
func (v *weightedLock) Release(token int64) error {
	if v.releaseFast(token, v.w) {
		return nil
	}
	return v.releaseLocked(token)
}

// keptViews bounds the weights whose views a lock keeps (see view): a
// heavier grant makes a view of its own.
const keptViews = 64

// view returns lk as a plain lease of need slots sees it: lk itself for
// one slot, else a view of lk kept with its token-weight table (a defined lock
// that may grant the weight on its fast word) or its queue. lk.mu is held.
func (lk *lock) view(need int) plain.Lock {
	if need == 1 {
		return lk
	}
	if lk.defined && need <= fastMaxSlots {
		return lk.st.tokenWeights().view(lk, need)
	}
	if need > keptViews {
		return &weightedLock{lk, need}
	}
	q := lk.waitQueue()
	if len(q.views) < need-1 {
		q.views = append(q.views, make([]*weightedLock, need-1-len(q.views))...)
	}
	v := q.views[need-2]
	if v == nil {
		v = &weightedLock{lk, need}
		q.views[need-2] = v
	}
	return v
}

// released is the context of every plain lease that was released by its
// holder before anyone asked for its context: one for all, so asking
// costs nothing however often.
var released = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(store.ErrReleased)
	return ctx
}()

// Acquire implements plain.Store. A defined lock with a free slot, nobody
// waiting and few slots grants on its fast word (one compare-and-swap, see
// fast.go); otherwise under the lock's mutex.
func (p *plainStore) Acquire(ctx context.Context, name string, wait bool) (plain.Lock, int64, error) {
	s := (*Store)(p)
	if s == nil || ctx == nil {
		return nil, 0, s.usable(ctx)
	}
	if lk := s.load(name); lk != nil {
		if err := ctx.Err(); err != nil {
			return nil, 0, err // an ended context takes nothing, free slot or not
		}
		if t, ok := lk.tryFast(); ok {
			lk.sampled(t)
			if !s.closed.Load() {
				return lk, t, nil
			}
			return s.undoFast(lk, t)
		}
		return s.acquireAt(ctx, lk, wait)
	}
	if err := s.usable(ctx); err != nil {
		return nil, 0, err
	}
	if err := store.CheckName(name); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return s.acquirePlain(ctx, name, wait)
}

// AcquireWeighted implements plain.Store: a weighted plain lease is
// granted on the fast word when the lock is on it (tryFastWeighted), else
// under the lock's mutex.
func (p *plainStore) AcquireWeighted(ctx context.Context, name string, weight int, wait bool) (plain.Lock, int64, error) {
	s := (*Store)(p)
	if weight == 1 || s == nil || ctx == nil {
		return p.Acquire(ctx, name, wait)
	}
	if err := s.usable(ctx); err != nil {
		return nil, 0, err
	}
	lk := s.load(name)
	if lk == nil {
		if err := store.CheckName(name); err != nil {
			return nil, 0, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var w *waiter
	if lk != nil {
		if need, t, ok := lk.tryFastWeighted(weight); ok {
			if need == 1 {
				if !s.closed.Load() {
					return lk, t, nil
				}
				return s.undoFast(lk, t)
			}
			if !s.closed.Load() {
				return lk.st.tokenWeights().view(lk, need), t, nil
			}
			lk.releaseFast(t, need)
			return nil, 0, store.ErrClosed
		}
		w = s.queuedWaiter(lk, wait)
	}
	o := op{s: s}
	if lk == nil || !o.enter(lk) {
		var err error
		if lk, err = s.enterName(&o, name); err != nil {
			putWaiter(w)
			return nil, 0, err
		}
	} else if s.closed.Load() {
		o.done()
		putWaiter(w)
		return nil, 0, store.ErrClosed
	}
	return s.acquirePlainLocked(ctx, &o, lk, weight, wait, w)
}

// undoFast gives back the fast grant of token t that found the store
// closed meanwhile (Close froze the lock, or is about to).
func (s *Store) undoFast(lk *lock, t int64) (plain.Lock, int64, error) {
	lk.releaseFast(t, 1)
	return nil, 0, store.ErrClosed
}

// acquireAt is the plain acquisition of lk, when its fast word could not
// grant: under its mutex.
func (s *Store) acquireAt(ctx context.Context, lk *lock, wait bool) (plain.Lock, int64, error) {
	if s.times {
		return s.acquirePlain(ctx, lk.name, wait)
	}
	w := s.queuedWaiter(lk, wait)
	lk.lockMu()
	if len(lk.waits()) == 0 && int(lk.slots) > lk.used() && !lk.gone && !s.closed.Load() && lk.plainOK() {
		h := lk.newPlainHolder(-1)
		s.unlockMu(lk) // the word again for the other slots, h a record beside it (see thaw)
		putWaiter(w)
		return lk, h.token, nil
	}
	if lk.gone || lk.multi() || s.closed.Load() {
		s.unlockMu(lk)
		putWaiter(w)
		return s.acquirePlain(ctx, lk.name, wait)
	}
	// Go on holding the mutex: a lock no waiter of several locks waits for.
	o := op{s: s, lk: lk}
	return s.acquirePlainLocked(ctx, &o, lk, 1, wait, w)
}

// acquirePlain is the plain acquisition of name when a slot is not free
// at once.
func (s *Store) acquirePlain(ctx context.Context, name string, wait bool) (plain.Lock, int64, error) {
	o := op{s: s}
	lk, err := s.enterName(&o, name)
	if err != nil {
		return nil, 0, err
	}
	return s.acquirePlainLocked(ctx, &o, lk, 1, wait, nil)
}

// acquirePlainLocked is acquirePlain of weight once the op holds lk; the
// Lock it returns is lk's view for the slots granted (view). w is the
// caller's waiter when it was taken and dated before the mutex
// (queuedWaiter), else nil.
func (s *Store) acquirePlainLocked(ctx context.Context, o *op, lk *lock, weight int, wait bool, w *waiter) (plain.Lock, int64, error) {
	if !lk.plainOK() {
		s.forget(lk)
		o.done()
		putWaiter(w)
		return nil, 0, plain.ErrNotPlain
	}
	need := 1
	if weight != 1 {
		if need = store.Need(weight, int(lk.slots)); need > int(lk.slots) {
			s.forget(lk)
			o.done()
			putWaiter(w)
			return nil, 0, &store.WeightError{Lock: lk.name, Weight: need, Slots: int(lk.slots)}
		}
	}
	var pl plain.Lock = lk
	if need != 1 {
		pl = lk.view(need)
	}
	if n := lk.ahead(len(lk.waits())) + need; n <= s.free(o, lk, n, 0) {
		h := lk.newPlainHolder(-1)
		if need != 1 {
			lk.setWeight(h, need)
		}
		if stamp := o.stamp(0); !stamp.IsZero() {
			h.ext().acquired = stamp
		}
		o.done()
		putWaiter(w)
		return pl, h.token, nil
	}
	if !wait {
		err := s.refuse(o, lk, weight)
		s.forget(lk)
		o.done()
		putWaiter(w)
		return nil, 0, err
	}
	if w == nil {
		w = waiters.Get().(*waiter)
	}
	w.ref = lk.waitQueue().refs.New()
	if weight != 1 {
		w.heavy, w.pw = true, int32(weight)
	}
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
		return nil, 0, err
	}
	return pl, token, nil
}

// Release implements plain.Lock. A grant on a lock still on its fast word
// is one compare-and-swap (releaseFast1, inlined here).
func (lk *lock) Release(token int64) error {
	if lk.releaseFast1(token) {
		return nil
	}
	return lk.releaseSlow(token)
}

// releaseSlow is Release of a sampled grant (see HoldSampling), or of one
// the fast word does not hold.
func (lk *lock) releaseSlow(token int64) error {
	if lk.fast.Load()&fastFrozen == 0 && lk.releaseFast(token, 1) {
		return nil
	}
	return lk.releaseLocked(token)
}

// releaseLocked is Release of a plain lease that is not on the fast word
// (of any weight: its record knows it): under lk's mutex.
func (lk *lock) releaseLocked(token int64) error {
	s := lk.store()
	lk.lockMu()
	h := lk.byToken(token)
	if h != nil && !lk.multi() && len(lk.waits()) == 0 && lk.defined && h.x == nil && !s.closed.Load() {
		// Nobody waits and nobody watches: drop the record, nothing else.
		lk.remove(h)
		s.unlockMu(lk)
		return nil
	}
	o := op{s: s, lk: lk}
	if lk.multi() {
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
	if h.unhold() {
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

// Context implements plain.Lock. The context is made on the first call
// (once the lease has ended: kept for as long as anyone holds it).
func (lk *lock) Context(token int64) context.Context {
	s := lk.store()
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

// Err implements plain.Lock.
func (lk *lock) Err(token int64) error {
	s := lk.store()
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

// Lookup implements plain.Store.
func (p *plainStore) Lookup(name string) plain.Lock {
	s := (*Store)(p)
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
	return lk
}

// Acquire implements plain.Lock. A grant on the fast word does not look
// at the store (lk.store() is one more record to read, one that a lock
// handle's caller does not otherwise touch): Close freezes every lock
// before it returns, so the word grants nothing once Close has returned,
// and a call that races with Close may be granted as one just before it.
func (lk *lock) Acquire(ctx context.Context, wait bool) (int64, error) {
	if ctx == nil {
		return 0, lk.store().usable(ctx)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if t, ok := lk.tryFast(); ok {
		lk.sampled(t)
		return t, nil
	}
	pl, t, err := lk.store().acquireAt(ctx, lk, wait)
	if err == nil && pl != plain.Lock(lk) {
		// lk was deleted, and the name granted by another record (a lock
		// defined again): that grant is not this handle's to keep.
		_ = pl.Release(t)
		return 0, plain.ErrNotPlain
	}
	return t, err
}
