package sleeplock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// Lease is a held slot (or, from AcquireAll, a slot of each of several
// locks). It is a small value: copy it freely; every copy names the same
// hold. The zero Lease holds nothing.
//
// A lease with a TTL is renewed automatically every third of its TTL (or
// hold) while it is held, unless acquired with NoKeepAlive. When the lease
// is lost — taken over after its TTL, released by someone else naming its
// ref, or not renewed before it expired because the store could not be
// reached — Done is closed, Context is cancelled with a cause matching
// ErrLeaseLost, and an EventLost is sent.
type Lease struct {
	l     *Locks
	name  string // the first lock
	token int64
	ref   store.Ref
	slot  memstore.Slot // the lock of a plain lease, when the memory store says
	x     *leaseExt     // nil for a plain lease from the memory store's fast path
}

// leaseExt is what a lease has beyond one lock, a ref and a token.
type leaseExt struct {
	g     store.Grant
	rt    *runtime
	byRef bool // made by LeaseOf
}

func newLease(l *Locks, g store.Grant, rt *runtime, byRef bool) Lease {
	return Lease{l: l, name: g.Name, token: g.Token, ref: g.Ref, x: &leaseExt{g: g, rt: rt, byRef: byRef}}
}

func (x Lease) grant() store.Grant {
	if x.x != nil {
		return x.x.g
	}
	return store.Grant{Lock: store.Lock{Name: x.name, Token: x.token}, Ref: x.ref}
}

func (x Lease) handle() store.Handle {
	if x.x != nil {
		return x.x.g.Handle()
	}
	return store.Handle{Lock: store.Lock{Name: x.name, Token: x.token}, Ref: x.ref}
}

func (x Lease) rt() *runtime {
	if x.x != nil {
		return x.x.rt
	}
	return nil
}

// LeaseStatus is what Status reports: whether the lease is held, the
// store's clock, when the lease was taken or last kept (dated back for a
// hold shorter than the TTL) and when it expires (zero: never).
type LeaseStatus = store.Status

// Name returns the (first) lock of the lease.
func (x Lease) Name() string { return x.name }

// Names returns every lock of the lease, in the order they were asked for.
func (x Lease) Names() []string {
	g := x.grant()
	out := make([]string, 0, 1+len(g.More))
	out = append(out, g.Name)
	for _, m := range g.More {
		out = append(out, m.Name)
	}
	return out
}

// Ref returns the holder's ref.
func (x Lease) Ref() string { return x.ref.String() }

// Kind returns the holder's kind.
func (x Lease) Kind() string { return x.grant().Kind }

// Token returns the fencing token of the (first) lock: a number that grows
// with every grant of that lock and is never reused. A resource that
// remembers the highest token it has seen and refuses lower ones cannot be
// written by a holder whose lease was taken over. 0 for LeaseOf handles.
func (x Lease) Token() int64 { return x.token }

// Tokens returns the fencing token of each lock, in Names' order.
func (x Lease) Tokens() []int64 {
	g := x.grant()
	out := make([]int64, 0, 1+len(g.More))
	out = append(out, g.Token)
	for _, m := range g.More {
		out = append(out, m.Token)
	}
	return out
}

// Acquired returns when the lease was granted, on the store's clock (zero
// when the store did not record it; see package memstore).
func (x Lease) Acquired() time.Time { return x.grant().Acquired }

// Expires returns when the lease expired at the grant, on the store's
// clock; zero when it never expires. Renewals move it on: see Status.
func (x Lease) Expires() time.Time { return x.grant().Expires }

// Reentered reports whether the acquisition found the lease held by its ref
// already (and so took no new slot).
func (x Lease) Reentered() bool { return x.grant().Reentered }

func (x Lease) ok() error {
	if x.l == nil {
		return store.ErrNotHeld
	}
	return nil
}

// Release gives the slots back; waiters get them. Releasing a lease that is
// no longer held (released already, or taken over) changes nothing and
// returns ErrNotHeld, which callers may ignore: it can never free another
// holder's slot.
func (x Lease) Release(ctx context.Context) error {
	if err := x.ok(); err != nil {
		return err
	}
	if x.x == nil && x.l.mem != nil {
		return x.l.mem.ReleasePlain(x.slot, x.name, x.ref, x.token)
	}
	rt := x.rt()
	if rt != nil {
		rt.stop()
	}
	err := x.l.store.Release(ctx, x.handle(), x.l.emitter)
	if rt != nil {
		if errors.Is(err, store.ErrNotHeld) {
			// It was gone before this release: lost, not released.
			rt.lose(fmt.Errorf("%w: no longer held when released", store.ErrLeaseLost))
		} else {
			rt.end(store.ErrReleased)
		}
	}
	return err
}

// Keep renews the lease now, as the keep-alive does: it expires a TTL (or
// hold) from now on the store's clock, only while its ref still holds every
// lock; otherwise nothing changes and Keep returns ErrNotHeld.
func (x Lease) Keep(ctx context.Context) error {
	if err := x.ok(); err != nil {
		return err
	}
	g := x.grant()
	_, err := x.l.store.Keep(ctx, g.Handle(), g.TTL, g.Hold)
	return err
}

// Held reports whether the lease's ref still holds every lock of the lease,
// asking the store.
func (x Lease) Held(ctx context.Context) (bool, error) {
	st, err := x.Status(ctx)
	return st.Held, err
}

// Status reports whether the lease is held, with its times on the store's
// clock.
func (x Lease) Status(ctx context.Context) (LeaseStatus, error) {
	if err := x.ok(); err != nil {
		return LeaseStatus{}, err
	}
	return x.l.store.Held(ctx, x.handle())
}

// Guard fences a write made in the caller's own transaction: inside tx (a
// pgx.Tx or *sql.Tx of the database the PostgreSQL store uses) it checks
// that the lease is still held and locks it until tx ends, so no takeover
// can commit before tx does. It returns an error matching ErrLeaseLost when
// the lease is no longer held, and ErrUnsupported on stores without
// transactions.
func (x Lease) Guard(ctx context.Context, tx any) error {
	if err := x.ok(); err != nil {
		return err
	}
	g, ok := x.l.store.(store.Guarder)
	if !ok {
		return fmt.Errorf("%w: Guard needs a database store", store.ErrUnsupported)
	}
	return g.Guard(ctx, tx, x.handle())
}

// Done returns a channel that is closed when the lease ends: lost, or
// released through this lease. Every call returns the same channel.
func (x Lease) Done() <-chan struct{} {
	if rt := x.rt(); rt != nil {
		return rt.ctx.Done()
	}
	return x.Context().Done()
}

// Context returns a context that is cancelled when the lease ends; its
// cause (context.Cause) matches ErrLeaseLost when the lease was lost and is
// ErrReleased after a release. A lease from Execute (or BindTo) has a
// context derived from that call's context.
func (x Lease) Context() context.Context {
	if rt := x.rt(); rt != nil {
		return rt.ctx
	}
	if x.l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(store.ErrNotHeld)
		return ctx
	}
	if x.x == nil && x.l.mem != nil {
		// A plain lease: its context is made once, in its holder record.
		return x.l.mem.PlainContext(x.slot, x.token)
	}
	if x.l.watcher == nil || (x.x != nil && x.x.byRef) {
		// A LeaseOf handle (or a lease on a store that cannot watch, which
		// always has a runtime) has nothing to end its context.
		return context.Background()
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	x.l.watcher.Watch(x.handle(), func(reason error) { cancel(reason) })
	return ctx
}

// Err returns nil while the lease is believed held, and why it ended
// otherwise (as context.Cause of Context).
func (x Lease) Err() error {
	if rt := x.rt(); rt != nil {
		return context.Cause(rt.ctx)
	}
	if x.l == nil {
		return store.ErrNotHeld
	}
	if x.x == nil && x.l.mem != nil {
		return x.l.mem.PlainErr(x.slot, x.token)
	}
	return nil
}

// runtime is the keep-alive and loss signalling of a lease.
type runtime struct {
	l        *Locks
	g        store.Grant
	ctx      context.Context
	cancel   context.CancelCauseFunc
	once     sync.Once
	quit     chan struct{} // closed to stop the keep-alive
	quitOnce sync.Once
	exited   chan struct{} // closed when the keep-alive goroutine ends
	unhook   []func() bool // context.AfterFunc registrations to undo
}

func (l *Locks) startRuntime(g store.Grant, c *acquireConfig, start time.Time) *runtime {
	parent := context.Background()
	if c.execute != nil {
		parent = context.WithoutCancel(c.execute)
	}
	rt := &runtime{l: l, g: g, quit: make(chan struct{})}
	rt.ctx, rt.cancel = context.WithCancelCause(parent)
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
	if g.TTL > 0 && !g.Reentered {
		rt.exited = make(chan struct{})
		l.track(rt)
		go rt.keepAlive(c.keepAlive, start)
	}
	return rt
}

// keepAlive renews the lease every third of its length; without renewal it
// only waits for the lease to expire. It declares the lease lost when the
// store says it is no longer held, or when renewals fail until the lease's
// expiry (measured from before the call that last succeeded, so the local
// deadline is never later than the store's).
func (rt *runtime) keepAlive(renew bool, start time.Time) {
	defer close(rt.exited)
	defer rt.l.untrack(rt)
	length := rt.g.TTL
	if rt.g.Hold > 0 && rt.g.Hold < length {
		length = rt.g.Hold
	}
	deadline := start.Add(length)
	interval := length / 3
	if !renew {
		interval = length
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-rt.quit:
			return
		case <-rt.ctx.Done():
			return // lost, or the Execute call ended
		case <-t.C:
		}
		if !renew {
			rt.lose(fmt.Errorf("%w: expired without renewal", store.ErrLeaseLost))
			return
		}
		now := time.Now()
		if !now.Before(deadline) {
			rt.lose(fmt.Errorf("%w: not renewed before it expired", store.ErrLeaseLost))
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, err := rt.l.store.Keep(ctx, rt.g.Handle(), rt.g.TTL, rt.g.Hold)
		cancel()
		switch {
		case err == nil:
			deadline = now.Add(length)
			t.Reset(interval)
		case errors.Is(err, store.ErrNotHeld):
			rt.lose(fmt.Errorf("%w: taken over or released by another holder", store.ErrLeaseLost))
			return
		default:
			// A passing fault: try again soon, inside the safe window.
			retry := min(interval/4, time.Second, time.Until(deadline))
			if retry <= 0 {
				rt.lose(fmt.Errorf("%w: renewal failed until it expired: %w", store.ErrLeaseLost, err))
				return
			}
			t.Reset(retry)
		}
	}
}

// lose marks the lease lost: once, and not after a release.
func (rt *runtime) lose(reason error) {
	rt.once.Do(func() {
		rt.cancel(reason)
		if rt.l.ev != nil {
			rt.l.ev.Emit(store.Event{Type: store.EventLost, Lock: rt.g.Name, Ref: rt.g.Ref.String(), Kind: rt.g.Kind,
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

// stop ends the keep-alive and waits for it.
func (rt *runtime) stop() {
	rt.quitOnce.Do(func() { close(rt.quit) })
	if rt.exited != nil {
		<-rt.exited
	}
	for _, f := range rt.unhook {
		f()
	}
}

// end closes the lease with reason after a release.
func (rt *runtime) end(reason error) {
	rt.once.Do(func() { rt.cancel(reason) })
}
