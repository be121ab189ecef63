package memstore

import (
	"context"

	"github.com/sleeplock/sleeplock/store"
)

// Slot names the holder record of a plain lease (AcquirePlain), so that
// its release and its context need no lookup by name. The zero Slot names
// none.
type Slot struct {
	lk *lock
	h  *holder
}

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
// the lease's Slot for ReleasePlain and PlainContext, the granted token and
// the ref, which the lock draws from a store.RefSource of its own (under
// its mutex: no write shared with other locks). A name that is not a lock
// the store has is checked (store.CheckName) before anything else.
func (s *Store) AcquirePlain(ctx context.Context, name string, wait bool) (Slot, int64, store.Ref, error) {
	if s == nil || ctx == nil {
		return Slot{}, 0, store.Ref{}, s.usable(ctx)
	}
	if lk := s.load(name); lk != nil {
		if err := ctx.Err(); err != nil {
			return Slot{}, 0, store.Ref{}, err
		}
		return s.acquireAt(ctx, lk, name, wait)
	}
	if err := s.usable(ctx); err != nil {
		return Slot{}, 0, store.Ref{}, err
	}
	if err := store.CheckName(name); err != nil {
		return Slot{}, 0, store.Ref{}, err
	}
	if err := ctx.Err(); err != nil {
		return Slot{}, 0, store.Ref{}, err
	}
	return s.acquirePlain(ctx, name, wait)
}

// acquireAt is AcquirePlain of lk, the lock named name when it was looked
// up.
func (s *Store) acquireAt(ctx context.Context, lk *lock, name string, wait bool) (Slot, int64, store.Ref, error) {
	if s.times {
		return s.acquirePlain(ctx, name, wait)
	}
	lk.mu.Lock()
	if len(lk.waits()) == 0 && int(lk.slots) > len(lk.holders) && !lk.gone && !s.closed.Load() {
		ref := lk.refs.New()
		h := lk.newHolder(ref)
		lk.mu.Unlock()
		return Slot{lk, h}, h.token, ref, nil
	}
	if lk.gone || lk.multi > 0 || s.closed.Load() {
		lk.mu.Unlock()
		return s.acquirePlain(ctx, name, wait)
	}
	// Go on holding the mutex: a lock no waiter of several locks waits for.
	o := op{s: s, lk: lk}
	return s.acquirePlainLocked(ctx, &o, lk, wait)
}

// acquirePlain is AcquirePlain when a slot is not free at once.
func (s *Store) acquirePlain(ctx context.Context, name string, wait bool) (Slot, int64, store.Ref, error) {
	o := op{s: s}
	lk, err := s.enterName(&o, name)
	if err != nil {
		return Slot{}, 0, store.Ref{}, err
	}
	return s.acquirePlainLocked(ctx, &o, lk, wait)
}

// acquirePlainLocked is acquirePlain once the op holds lk.
func (s *Store) acquirePlainLocked(ctx context.Context, o *op, lk *lock, wait bool) (Slot, int64, store.Ref, error) {
	if len(lk.waits()) < s.free(o, lk, len(lk.waits())+1, 0) {
		ref := lk.refs.New()
		h := s.addHolder(o, lk, &store.AcquireRequest{Ref: ref})
		o.done()
		return Slot{lk, h}, h.token, ref, nil
	}
	if !wait {
		err := s.refuse(o, lk)
		s.forget(lk)
		o.done()
		return Slot{}, 0, store.Ref{}, err
	}
	ref := lk.refs.New()
	w := waiters.Get().(*waiter)
	w.ref = ref
	w.one[0] = lk
	w.locks = w.one[:]
	err := s.park(ctx, o, w)
	var slot Slot
	var token int64
	if err == nil {
		slot, token = Slot{lk, w.h}, w.h.token
	} else {
		ref = store.Ref{}
	}
	*w = waiter{ready: w.ready}
	waiters.Put(w)
	return slot, token, ref, err
}

// ReleasePlain releases a lease that AcquirePlain granted: Release of
// that lease without a notifier.
func (s *Store) ReleasePlain(slot Slot, name string, ref store.Ref, token int64) error {
	if s == nil {
		return errNoStore
	}
	h := slot.h
	if h == nil {
		return s.Release(context.Background(), store.Handle{Lock: store.Lock{Name: name, Token: token}, Ref: ref}, nil)
	}
	lk := slot.lk
	lk.mu.Lock()
	if lk.multi == 0 && len(lk.waits()) == 0 && lk.defined && h.x == nil && h.count == 1 && h.token == token && h.idx >= 0 &&
		!s.closed.Load() {
		// Nobody waits and nobody watches: drop the record, nothing else.
		lk.remove(h, true)
		lk.mu.Unlock()
		return nil
	}
	o := op{s: s, lk: lk}
	if lk.multi > 0 {
		lk.mu.Unlock()
		o.lk = nil
		if !o.enter(lk) {
			return store.ErrNotHeld
		}
	}
	if s.closed.Load() {
		o.done()
		return store.ErrClosed
	}
	if h.token != token || h.idx < 0 {
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

// PlainContext returns the context of the plain lease in slot with token:
// cancelled, with the cause of its end, once the lease ends. Every call
// for one lease returns the same context, made on the first call.
func (s *Store) PlainContext(slot Slot, token int64) context.Context {
	h := slot.h
	if h == nil {
		return released
	}
	lk := slot.lk
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if h.token != token {
		return released // its record went to another hold: it was released
	}
	x := h.x
	switch {
	case x != nil && x.ctx != nil:
		return x.ctx
	case h.idx >= 0:
		x = h.ext()
		x.ctx, x.cancel = context.WithCancelCause(context.Background())
		return x.ctx
	case x == nil || x.cause == store.ErrReleased: //nolint:errorlint // the sentinel itself
		return released
	}
	x.ctx, x.cancel = context.WithCancelCause(context.Background())
	x.cancel(x.cause)
	return x.ctx
}

// PlainErr returns nil while the plain lease in slot with token is held,
// and why it ended otherwise: context.Cause of PlainContext.
func (s *Store) PlainErr(slot Slot, token int64) error {
	h := slot.h
	if h == nil {
		return store.ErrReleased
	}
	lk := slot.lk
	lk.mu.Lock()
	defer lk.mu.Unlock()
	switch {
	case h.token != token:
		return store.ErrReleased
	case h.idx >= 0:
		return nil
	case h.x == nil:
		return store.ErrReleased
	}
	return h.x.cause
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
	lk.mu.Lock()
	defined := lk.defined && !lk.gone
	lk.mu.Unlock()
	if !defined {
		return nil
	}
	return &Named{lk}
}

// AcquireNamed is AcquirePlain of the lock n, which Lookup returned for
// name.
func (s *Store) AcquireNamed(ctx context.Context, n *Named, name string, wait bool) (Slot, int64, store.Ref, error) {
	if s == nil || ctx == nil {
		return Slot{}, 0, store.Ref{}, s.usable(ctx)
	}
	if n == nil || n.lk == nil {
		return Slot{}, 0, store.Ref{}, errNoNamed
	}
	if err := ctx.Err(); err != nil {
		return Slot{}, 0, store.Ref{}, err
	}
	return s.acquireAt(ctx, n.lk, name, wait)
}
