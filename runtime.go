package sleeplock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// runtime is what a lease knows of itself beyond its grant: the context
// that ends with it, and, for a lease with a TTL, the goroutine that renews
// it and declares it lost once its expiry passes.
type runtime struct {
	l      *Locks
	g      store.Grant
	ctx    context.Context
	cancel context.CancelCauseFunc
	once   sync.Once

	// With a TTL: the keep-alive loop, or a timer at the expiry of a lease
	// nobody renews.
	length    time.Duration // how long a grant or renewal holds: Hold when shorter than TTL
	renew     atomic.Bool   // the loop renews (false: it only watches the expiry)
	releasing atomic.Bool   // a Release is under way: a renewal refused is no loss
	mu        sync.Mutex
	deadline  time.Time     // local expiry: never later than the store's
	failure   error         // the last renewal or release that failed
	known     time.Time     // the store's expiry as last learnt (grant, Keep)
	timer     *time.Timer   // without keep-alive: fires at the local deadline
	poke      chan struct{} // wakes the loop when the deadline or renew changed
	quit      chan struct{} // closed to stop the loop
	quitOnce  sync.Once
	exited    chan struct{} // closed when the loop ends; nil without a loop
	unhook    []func() bool // context.AfterFunc registrations to undo
}

// newRuntime returns the runtime of g, its context derived from parent,
// watching the store (when it can watch) for the end of the hold; or, when
// ended is not nil, with its context ended already with that cause.
func (l *Locks) newRuntime(g store.Grant, parent context.Context, ended error) *runtime {
	rt := &runtime{l: l, g: g}
	rt.ctx, rt.cancel = context.WithCancelCause(parent)
	if ended != nil {
		rt.end(ended)
		return rt
	}
	if l.watcher != nil && !g.Reentered {
		l.watcher.Watch(g.Handle(), func(reason error) {
			if errors.Is(reason, store.ErrReleased) {
				// Released, maybe through another lease of the same ref.
				rt.end(reason)
			} else {
				rt.lose(reason)
			}
		})
	}
	return rt
}

// startRuntime returns the runtime of a new grant: bound to an Execute or
// BindTo context, and with a keep-alive loop when the lease has a TTL.
func (l *Locks) startRuntime(g store.Grant, c *acquireConfig, start time.Time) *runtime {
	parent := context.Background()
	if c.execute != nil {
		parent = context.WithoutCancel(c.execute)
	}
	rt := l.newRuntime(g, parent, nil)
	if c.execute != nil {
		ctx := c.execute
		rt.unhook = append(rt.unhook, context.AfterFunc(ctx, func() { rt.cancel(context.Cause(ctx)) }))
	}
	if c.bind != nil {
		ctx := c.bind
		rt.unhook = append(rt.unhook, context.AfterFunc(ctx, func() {
			_ = newLease(l, g, rt, false).Release(context.WithoutCancel(ctx))
		}))
	}
	if g.TTL > 0 && !g.Reentered {
		rt.length = g.TTL
		if g.Hold > 0 && g.Hold < rt.length {
			rt.length = g.Hold
		}
		rt.deadline = start.Add(rt.length)
		rt.known = g.Expires
		l.track(rt)
		if c.keepAlive {
			rt.renew.Store(true)
			rt.poke = make(chan struct{}, 1)
			rt.quit = make(chan struct{})
			rt.exited = make(chan struct{})
			go rt.loop(start)
		} else {
			// No goroutine for a lease nobody renews: a timer at its expiry.
			rt.mu.Lock()
			rt.timer = time.AfterFunc(time.Until(rt.deadline), rt.expire)
			rt.mu.Unlock()
		}
	}
	return rt
}

// expire runs when the local deadline of a lease without keep-alive
// passes. The lease may have been kept meanwhile through another handle of
// its ref (LeaseOf(ref).Keep, turns.KeepUser): the store says so by an
// expiry later than the last one this lease knew of, and the timer is set
// again for the difference. Otherwise the lease has expired: it is lost.
func (rt *runtime) expire() {
	if rt.ctx.Err() != nil {
		return
	}
	if left := time.Until(rt.expiry()); left > 0 {
		rt.rearm(left) // Keep moved it on
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	st, err := rt.l.store.Held(ctx, rt.g.Handle())
	cancel()
	rt.mu.Lock()
	known := rt.known
	rt.mu.Unlock()
	if err == nil && st.Held && !st.Expires.IsZero() && st.Expires.After(known) && st.Expires.After(st.Now) {
		left := st.Expires.Sub(st.Now)
		rt.mu.Lock()
		rt.known = st.Expires
		rt.mu.Unlock()
		rt.extend(time.Now().Add(left))
		rt.rearm(left)
		return
	}
	if err != nil {
		rt.fail(err)
	}
	rt.lose(rt.expiredReason())
}

func (rt *runtime) rearm(d time.Duration) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.timer != nil && rt.ctx.Err() == nil {
		rt.timer.Reset(d)
	}
}

// kept records a renewal by this lease that started at start and gave the
// store's expiry exp.
func (rt *runtime) kept(start, exp time.Time) {
	rt.mu.Lock()
	if exp.After(rt.known) {
		rt.known = exp
	}
	rt.mu.Unlock()
	rt.extend(start.Add(rt.length))
}

// loop renews the lease every third of its length (Hold, or TTL) while
// renew is on, and declares it lost when its local deadline passes: when
// renewals failed until then, when it was never renewed (NoKeepAlive
// without Keep), or when a release failed and left it to expire. The
// deadline is measured from before the call that last renewed, so it is
// never later than the store's expiry.
func (rt *runtime) loop(start time.Time) {
	defer close(rt.exited)
	defer rt.l.untrack(rt)
	interval := rt.length / 3
	next := start.Add(interval)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		deadline := rt.expiry()
		wake := deadline
		if rt.renew.Load() && next.Before(wake) {
			wake = next
		}
		t.Reset(time.Until(wake))
		select {
		case <-rt.quit:
			return
		case <-rt.ctx.Done():
			return // lost, released, or the Execute call ended
		case <-rt.poke:
			continue
		case <-t.C:
		}
		now := time.Now()
		if deadline = rt.expiry(); !now.Before(deadline) {
			rt.lose(rt.expiredReason())
			return
		}
		if !rt.renew.Load() || now.Before(next) {
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, err := rt.l.store.Keep(ctx, rt.g.Handle(), rt.g.TTL, rt.g.Hold)
		cancel()
		switch {
		case err == nil:
			rt.extend(now.Add(rt.length))
			next = now.Add(interval)
		case errors.Is(err, store.ErrNotHeld) && rt.releasing.Load():
			return // the release decides how the lease ended
		case errors.Is(err, store.ErrNotHeld):
			rt.lose(fmt.Errorf("%w: taken over or released by another holder", store.ErrLeaseLost))
			return
		default:
			// A passing fault: try again soon, inside the safe window.
			rt.fail(err)
			next = now.Add(min(interval/4, time.Second))
		}
	}
}

func (rt *runtime) expiry() time.Time {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.deadline
}

// extend moves the local deadline on to d (never back) after a renewal
// that started before d-length.
func (rt *runtime) extend(d time.Time) {
	if rt.length == 0 {
		return
	}
	rt.mu.Lock()
	if d.After(rt.deadline) {
		rt.deadline = d
	}
	rt.failure = nil
	rt.mu.Unlock()
	rt.wake()
}

func (rt *runtime) fail(err error) {
	rt.mu.Lock()
	rt.failure = err
	rt.mu.Unlock()
}

func (rt *runtime) wake() {
	if rt.poke == nil {
		return // a timer reads the deadline when it fires
	}
	select {
	case rt.poke <- struct{}{}:
	default:
	}
}

func (rt *runtime) expiredReason() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.failure != nil && rt.renew.Load():
		return fmt.Errorf("%w: renewal failed until it expired: %w", store.ErrLeaseLost, rt.failure)
	case rt.failure != nil:
		return fmt.Errorf("%w: expired after a release that failed: %w", store.ErrLeaseLost, rt.failure)
	default:
		return fmt.Errorf("%w: expired without renewal", store.ErrLeaseLost)
	}
}

// releaseFailed stops the renewals after a release that did not reach the
// store: the lease stays held there until it expires, and the loop
// declares it lost then.
func (rt *runtime) releaseFailed(err error) {
	if rt.length == 0 {
		return
	}
	rt.fail(err)
	rt.renew.Store(false)
	rt.wake()
}

// lose marks the lease lost: once, and not after a release.
func (rt *runtime) lose(reason error) {
	rt.once.Do(func() {
		rt.cancel(reason)
		rt.stopTimer()
		if rt.l.emitter != nil {
			rt.l.emitter.Emit(store.Event{Type: store.EventLost, Lock: rt.g.Name, Ref: rt.g.Ref.String(), Kind: rt.g.Kind,
				Token: rt.g.Token, Held: heldFor(rt.g.Acquired), Reason: reason})
		}
	})
}

func heldFor(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}

// stop ends the keep-alive loop and waits for it.
func (rt *runtime) stop() {
	if rt.exited != nil {
		rt.quitOnce.Do(func() { close(rt.quit) })
		<-rt.exited
	}
	for _, f := range rt.unhook {
		f()
	}
}

// end closes the lease with reason after a release.
func (rt *runtime) end(reason error) {
	rt.once.Do(func() {
		rt.cancel(reason)
		rt.stopTimer()
	})
}

// stopTimer stops the expiry timer of a lease without keep-alive, once
// the lease has ended.
func (rt *runtime) stopTimer() {
	rt.mu.Lock()
	t := rt.timer
	rt.mu.Unlock()
	if t != nil {
		t.Stop()
		rt.l.untrack(rt)
	}
}
