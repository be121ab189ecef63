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

// life is what a lease knows of itself beyond its grant, from the grant to
// its end: the context that ends with it, and, for a lease with a TTL, the
// goroutine (or timer) that renews it and declares it lost once its expiry
// passes.
type life struct {
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
	deadline  time.Time      // local expiry: never later than the store's
	failure   error          // the last renewal or release that failed
	known     time.Time      // the store's expiry as last learnt (grant, Keep)
	timer     *time.Timer    // without keep-alive: fires at the local deadline
	poke      chan struct{}  // wakes the loop when the deadline or renew changed, or quitting; nil without a loop (see looping)
	quitting  atomic.Bool    // stop asked the loop to end
	done      sync.WaitGroup // the loop, until it ends (or its start is undone)
	starter   *time.Timer    // starts the loop at the first renewal
	unhook    []func() bool  // context.AfterFunc registrations to undo
}

// newLife returns the life of g, its context derived from parent,
// watching the store (when it can watch) for the end of the hold; or, when
// ended is not nil, with its context ended already with that cause.
func (l *Locks) newLife(g store.Grant, parent context.Context, ended error) *life {
	lf := &life{l: l, g: g}
	lf.ctx, lf.cancel = context.WithCancelCause(parent)
	if ended != nil {
		lf.end(ended)
		return lf
	}
	if l.watcher != nil && !g.Reentered {
		l.watcher.Watch(g.Handle(), func(reason error) {
			if errors.Is(reason, store.ErrReleased) {
				// Released, maybe through another lease of the same ref.
				lf.end(reason)
			} else {
				lf.lose(reason)
			}
		})
	}
	return lf
}

// startLife returns the life of a new grant: bound to an Execute or
// BindTo context, and with a keep-alive loop when the lease has a TTL.
func (l *Locks) startLife(g store.Grant, c *acquireConfig, start time.Time) *life {
	parent := context.Background()
	if c.execute != nil {
		parent = context.WithoutCancel(c.execute)
	}
	lf := l.newLife(g, parent, nil)
	if c.execute != nil {
		ctx := c.execute
		lf.unhook = append(lf.unhook, context.AfterFunc(ctx, func() { lf.cancel(context.Cause(ctx)) }))
	}
	if c.bind != nil {
		ctx := c.bind
		lf.unhook = append(lf.unhook, context.AfterFunc(ctx, func() {
			_ = newLease(l, lf.g, lf, false).Release(context.WithoutCancel(ctx)) // lf.g, not g: g stays on the stack
		}))
	}
	if g.TTL > 0 && !g.Reentered {
		lf.length = g.TTL
		if g.Hold > 0 && g.Hold < lf.length {
			lf.length = g.Hold
		}
		lf.known = g.Expires
		if c.keepAlive {
			start = lf.renewLate(start)
		}
		lf.deadline = start.Add(lf.length)
		if c.keepAlive { // before track: Close waits for what it tracks
			lf.done.Add(1)
			lf.poke = make(chan struct{}, 1)
		}
		l.track(lf)
		if c.keepAlive {
			lf.renew.Store(true)
			// The loop has nothing to do before the first renewal: it
			// starts then, on the timer's goroutine, so that a lease
			// released sooner costs a timer, not a goroutine.
			lf.mu.Lock()
			lf.starter = time.AfterFunc(lf.length/3-time.Since(start), func() { lf.loop(start) })
			lf.mu.Unlock()
			if lf.ctx.Err() != nil {
				lf.unstart() // ended meanwhile (its watcher): no loop to wait for
			}
		} else {
			// No goroutine for a lease nobody renews: a timer at its expiry.
			lf.mu.Lock()
			lf.timer = time.AfterFunc(time.Until(lf.deadline), lf.expire)
			lf.mu.Unlock()
		}
	}
	return lf
}

// renewLate renews at once a lease whose acquisition, sent at start, took
// more than a third of its length (it waited in the queue): the store
// granted it at some moment after start, unknown here, so the local
// deadline measured from start may be near or past while the store holds
// the lease for longer. It returns when the renewal that succeeded was
// sent, or start when it failed (the loop then judges the lease by start).
func (lf *life) renewLate(start time.Time) time.Time {
	if time.Since(start) <= lf.length/3 {
		return start
	}
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), lf.length)
	defer cancel()
	exp, err := lf.l.store.Keep(ctx, lf.g.Handle(), lf.g.TTL, lf.g.Hold)
	if err != nil {
		lf.fail(err)
		return start
	}
	lf.known = exp
	return now
}

// expire runs when the local deadline of a lease without keep-alive
// passes. The lease may have been kept meanwhile through another handle of
// its ref (LeaseOf(ref).Keep, turns.KeepUser): the store says so by an
// expiry later than the last one this lease knew of, and the timer is set
// again for the difference. Otherwise the lease has expired: it is lost.
func (lf *life) expire() {
	if lf.ctx.Err() != nil {
		return
	}
	if left := time.Until(lf.expiry()); left > 0 {
		lf.rearm(left) // Keep moved it on
		return
	}
	asked := time.Now() // the store's expiry is measured from no earlier
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	st, err := lf.l.store.Held(ctx, lf.g.Handle())
	cancel()
	lf.mu.Lock()
	known := lf.known
	lf.mu.Unlock()
	if err == nil && st.Held && !st.Expires.IsZero() && st.Expires.After(known) && st.Expires.After(st.Now) {
		left := st.Expires.Sub(st.Now)
		lf.mu.Lock()
		lf.known = st.Expires
		lf.mu.Unlock()
		lf.extend(asked.Add(left))
		lf.rearm(left)
		return
	}
	if err != nil {
		lf.fail(err)
	}
	lf.lose(lf.expiredReason())
}

func (lf *life) rearm(d time.Duration) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.timer != nil && lf.ctx.Err() == nil {
		lf.timer.Reset(d)
	}
}

// kept records a renewal by this lease that started at start and gave the
// store's expiry exp.
func (lf *life) kept(start, exp time.Time) {
	lf.mu.Lock()
	if exp.After(lf.known) {
		lf.known = exp
	}
	lf.mu.Unlock()
	lf.extend(start.Add(lf.length))
}

// loop renews the lease every third of its length (Hold, or TTL) while
// renew is on, and declares it lost when its local deadline passes: when
// renewals failed until then, when it was never renewed (NoKeepAlive
// without Keep), or when a release failed and left it to expire. The
// deadline is measured from before the call that last renewed, so it is
// never later than the store's expiry.
func (lf *life) loop(start time.Time) {
	defer lf.done.Done()
	defer lf.l.untrack(lf)
	interval := lf.length / 3
	next := start.Add(interval)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		if lf.quitting.Load() {
			return
		}
		deadline := lf.expiry()
		wake := deadline
		if lf.renew.Load() && next.Before(wake) {
			wake = next
		}
		t.Reset(time.Until(wake))
		select {
		case <-lf.ctx.Done():
			return // lost, released, or the Execute call ended
		case <-lf.poke: // the deadline or renew changed, or quitting
			continue
		case <-t.C:
		}
		now := time.Now()
		if deadline = lf.expiry(); !now.Before(deadline) {
			lf.lose(lf.expiredReason())
			return
		}
		if !lf.renew.Load() || now.Before(next) {
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		// The deadline holds while the renewal is under way: a store that
		// answers late, or never, cannot keep Done open past it.
		late := time.AfterFunc(deadline.Sub(now), func() { lf.lose(lf.unansweredReason()) })
		_, err := lf.l.store.Keep(ctx, lf.g.Handle(), lf.g.TTL, lf.g.Hold)
		cancel()
		if !late.Stop() {
			return // lost at the deadline, whatever the renewal said
		}
		switch {
		case err == nil:
			lf.extend(now.Add(lf.length))
			next = now.Add(interval)
		case errors.Is(err, store.ErrNotHeld) && lf.releasing.Load():
			return // the release decides how the lease ended
		case errors.Is(err, store.ErrNotHeld):
			lf.lose(fmt.Errorf("%w: taken over or released by another holder", store.ErrLeaseLost))
			return
		case errors.Is(err, store.ErrNotFound):
			lf.lose(store.DeletedHold(lf.g.Name)) // a forced Delete
			return
		default:
			// A passing fault: try again soon, inside the safe window.
			lf.fail(err)
			next = now.Add(min(interval/4, time.Second))
		}
	}
}

func (lf *life) expiry() time.Time {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	return lf.deadline
}

// extend moves the local deadline on to d (never back) after a renewal
// that started before d-length.
func (lf *life) extend(d time.Time) {
	if lf.length == 0 {
		return
	}
	lf.mu.Lock()
	if d.After(lf.deadline) {
		lf.deadline = d
	}
	lf.failure = nil
	lf.mu.Unlock()
	lf.wake()
}

func (lf *life) fail(err error) {
	lf.mu.Lock()
	lf.failure = err
	lf.mu.Unlock()
}

func (lf *life) wake() {
	if lf.poke == nil {
		return // a timer reads the deadline when it fires
	}
	select {
	case lf.poke <- struct{}{}:
	default:
	}
}

func (lf *life) expiredReason() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	switch {
	case lf.failure != nil && lf.renew.Load():
		return fmt.Errorf("%w: renewal failed until it expired: %w", store.ErrLeaseLost, lf.failure)
	case lf.failure != nil:
		return fmt.Errorf("%w: expired after a release that failed: %w", store.ErrLeaseLost, lf.failure)
	default:
		return fmt.Errorf("%w: expired without renewal", store.ErrLeaseLost)
	}
}

// unansweredReason is why a lease was lost at its deadline while a renewal
// was under way.
func (lf *life) unansweredReason() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.failure != nil {
		return fmt.Errorf("%w: renewal failed until it expired: %w", store.ErrLeaseLost, lf.failure)
	}
	return fmt.Errorf("%w: expired while a renewal got no answer", store.ErrLeaseLost)
}

// releaseFailed stops the renewals after a release that did not reach the
// store: the lease stays held there until it expires, and the loop
// declares it lost then.
func (lf *life) releaseFailed(err error) {
	if lf.length == 0 {
		return
	}
	lf.fail(err)
	lf.renew.Store(false)
	lf.wake()
}

// lose marks the lease lost: once, and not after a release.
func (lf *life) lose(reason error) {
	lf.once.Do(func() {
		lf.cancel(reason)
		lf.stopTimer()
		if lf.l.emitter != nil {
			lf.l.emitter.Emit(store.Event{Type: store.EventLost, Lock: lf.g.Name, Ref: lf.g.Ref.String(), Kind: lf.g.Kind, Weight: max(lf.g.Weight, 1),
				Token: lf.g.Token, Held: heldFor(lf.g.Acquired), Reason: reason})
		}
	})
}

func heldFor(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}

// looping reports whether lf has a keep-alive loop, to start or started:
// done counts it. Set before the life is tracked, never changed.
func (lf *life) looping() bool { return lf.poke != nil }

// stop ends the keep-alive loop and waits for it.
func (lf *life) stop() {
	if lf.looping() {
		lf.unstart()
		lf.quitting.Store(true)
		lf.wake()
		lf.done.Wait()
	}
	for _, f := range lf.unhook {
		f()
	}
}

// end closes the lease with reason after a release.
func (lf *life) end(reason error) {
	lf.once.Do(func() {
		lf.cancel(reason)
		lf.stopTimer()
	})
}

// unstart ends a keep-alive loop that has not started (its timer had not
// fired) as the loop would have ended.
func (lf *life) unstart() {
	lf.mu.Lock()
	t := lf.starter
	lf.mu.Unlock()
	if t != nil && t.Stop() {
		lf.l.untrack(lf)
		lf.done.Done()
	}
}

// stopTimer stops the expiry timer of a lease without keep-alive, once
// the lease has ended, and the start of a keep-alive loop not yet started.
func (lf *life) stopTimer() {
	lf.unstart()
	lf.mu.Lock()
	t := lf.timer
	lf.mu.Unlock()
	if t != nil {
		t.Stop()
		lf.l.untrack(lf)
	}
}
