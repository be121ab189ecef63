package sleeplock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sleeplock/sleeplock/internal/plain"
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
//
// A plain lease of the memory store (no options, no TTL, no notifier) is
// its lock (an interface value, two words) and its token, with a nil
// extension: four words, which the compiler passes and returns in
// registers, so the plain path allocates nothing.
type Lease struct {
	plk   plain.Lock // a plain lease of the memory store: its lock (nil otherwise)
	token int64      // of the first lock
	x     *leaseExt  // nil for a plain lease of the memory store
}

// leaseExt is what a lease has beyond one lock, a ref and a token. Every
// copy of a Lease shares it.
type leaseExt struct {
	l     *Locks
	g     store.Grant
	byRef bool // made by LeaseOf
	// lf is set at the grant when the lease needs a keep-alive or a bound
	// context, and otherwise on the first call of Done, Context or Err.
	lf       atomic.Pointer[life]
	mu       sync.Mutex // serialises the lazy life with a release
	released bool       // released through a Lease before lf was made
}

func newLease(l *Locks, g store.Grant, lf *life, byRef bool) Lease {
	x := &leaseExt{l: l, g: g, byRef: byRef}
	if lf != nil {
		x.lf.Store(lf)
	}
	return Lease{token: g.Token, x: x}
}

// store is the store the lease is held in (nil for the zero Lease).
func (x Lease) store() store.Store {
	switch {
	case x.x != nil:
		return x.x.l.store
	case x.plk != nil:
		return x.plk.Store()
	}
	return nil
}

func (x Lease) grant() store.Grant {
	if x.x != nil {
		return x.x.g
	}
	return store.Grant{Lock: store.Lock{Name: x.plainName(), Token: x.token}, Ref: x.plainRef()}
}

func (x Lease) handle() store.Handle {
	if x.x != nil {
		return x.x.g.Handle()
	}
	return store.Handle{Lock: store.Lock{Name: x.plainName(), Token: x.token}, Ref: x.plainRef()}
}

// plainName is the lock of a plain lease ("" for the zero Lease).
func (x Lease) plainName() string {
	if x.plk == nil {
		return ""
	}
	return x.plk.Name()
}

// plainRef is the ref of a plain lease (the zero Ref for the zero Lease).
func (x Lease) plainRef() store.Ref {
	if x.plk == nil {
		return store.Ref{}
	}
	return x.plk.Ref(x.token)
}

// loadLife returns the lease's life if it has been made, and nil
// otherwise; unlike ensureLife it never makes one.
func (x Lease) loadLife() *life {
	if x.x != nil {
		return x.x.lf.Load()
	}
	return nil
}

// ensureLife returns the lease's life, making it on first use for a lease
// that had no need of one at its grant (loadLife only loads it). nil for a
// plain lease of the memory store's plain path and for a LeaseOf handle.
func (x Lease) ensureLife() *life {
	if x.x == nil || x.x.byRef {
		return nil
	}
	if lf := x.x.lf.Load(); lf != nil {
		return lf
	}
	x.x.mu.Lock()
	defer x.x.mu.Unlock()
	if lf := x.x.lf.Load(); lf != nil {
		return lf
	}
	var ended error
	if x.x.released {
		ended = store.ErrReleased
	}
	lf := x.x.l.newLife(x.x.g, context.Background(), ended)
	x.x.lf.Store(lf)
	return lf
}

// LeaseStatus is what Status reports: whether the lease is held, the
// store's clock, when the lease was taken or last kept (dated back for a
// hold shorter than the TTL) and when it expires (zero: never).
type LeaseStatus = store.Status

// Name returns the (first) lock of the lease.
func (x Lease) Name() string {
	if x.x != nil {
		return x.x.g.Name
	}
	return x.plainName()
}

// Names returns every lock of the lease, in the order they were asked for.
func (x Lease) Names() []string {
	return eachLock(x.grant(), func(l store.Lock) string { return l.Name })
}

// eachLock returns f of every lock of g, in the order they were asked for.
func eachLock[T any](g store.Grant, f func(store.Lock) T) []T {
	out := make([]T, 0, 1+len(g.More))
	out = append(out, f(g.Lock))
	for _, m := range g.More {
		out = append(out, f(m))
	}
	return out
}

// Ref returns the holder's ref.
func (x Lease) Ref() string {
	if x.x != nil {
		return x.x.g.Ref.String()
	}
	return x.plainRef().String()
}

// Kind returns the holder's kind.
func (x Lease) Kind() string { return x.grant().Kind }

// Token returns the fencing token of the (first) lock: a number that grows
// with every grant of that lock and is never reused. A resource that
// remembers the highest token it has seen and refuses lower ones cannot be
// written by a holder whose lease was taken over. 0 for LeaseOf handles.
func (x Lease) Token() int64 { return x.token }

// Tokens returns the fencing token of each lock, in Names' order.
func (x Lease) Tokens() []int64 {
	return eachLock(x.grant(), func(l store.Lock) int64 { return l.Token })
}

// Acquired returns when the lease was granted, on the store's clock (zero
// when the store did not record it; see package memstore).
func (x Lease) Acquired() time.Time { return x.grant().Acquired }

// Expires returns when the lease expired at the grant, on the store's
// clock; zero when it never expires. Renewals move it on: see Status.
func (x Lease) Expires() time.Time { return x.grant().Expires }

// Weight returns the slots the lease takes of its (first) lock: 1 unless
// acquired with Weight or Exclusive (then the lock's slots at the grant).
// A re-entrant acquisition reports the weight of the hold it found. 0 for
// LeaseOf handles and the zero Lease.
func (x Lease) Weight() int {
	switch {
	case x.x != nil:
		if x.x.g.Weight == 0 && !x.x.byRef {
			return 1
		}
		return x.x.g.Weight
	case x.plk != nil:
		return x.plk.Weight()
	}
	return 0
}

// Reentered reports whether the acquisition found the lease held by its ref
// already (and so took no new slot).
func (x Lease) Reentered() bool { return x.grant().Reentered }

func (x Lease) ok() error {
	if x.x == nil && x.plk == nil {
		return store.ErrNotHeld
	}
	return nil
}

// ReleaseTimeout bounds a release whose context had already ended when
// Release was called: the release still reaches the store, under a context
// of its own that ends after ReleaseTimeout (as database drivers clean up).
const ReleaseTimeout = 5 * time.Second

// Release gives the slots back; waiters get them. Releasing a lease that is
// no longer held (released already, or taken over) changes nothing and
// returns ErrNotHeld, which callers may ignore: it can never free another
// holder's slot.
//
// A release is cleanup, so it is made even when ctx has ended (a deferred
// Release after a timeout): it then runs under a context of its own bounded
// by ReleaseTimeout. When the store cannot be reached the lease stays held
// there: Err stays nil, the keep-alive stops, and the lease ends (Done,
// ErrLeaseLost) when it expires; Release may be called again meanwhile.
func (x Lease) Release(ctx context.Context) error {
	if x.plk != nil {
		// A plain lease of the memory store: no context is needed.
		return x.plk.Release(x.token)
	}
	return x.release(ctx)
}

func (x Lease) release(ctx context.Context) error {
	if err := x.ok(); err != nil {
		return err
	}
	if ctx == nil || ctx.Err() != nil {
		parent := context.Background()
		if ctx != nil {
			parent = context.WithoutCancel(ctx)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, ReleaseTimeout)
		defer cancel()
	}
	lf := x.loadLife()
	if lf != nil {
		lf.releasing.Store(true)
	}
	err := x.x.l.store.Release(ctx, x.handle(), x.x.l.emitter)
	if lf == nil {
		x.x.mu.Lock()
		if lf = x.x.lf.Load(); lf == nil && err == nil {
			x.x.released = true
		}
		x.x.mu.Unlock()
	}
	if lf == nil {
		return err
	}
	switch {
	case err == nil:
		lf.stop()
		lf.end(store.ErrReleased)
	case errors.Is(err, store.ErrNotHeld) && !errors.Is(err, store.ErrNotFound):
		// It was gone before this release: lost, not released.
		lf.stop()
		lf.lose(fmt.Errorf("%w: no longer held when released", store.ErrLeaseLost))
	case errors.Is(err, store.ErrNotFound):
		// Its lock was deleted (a forced Delete): lost, not released.
		lf.stop()
		lf.lose(store.DeletedHold(x.grant().Name))
	default:
		// Not released: the store keeps the lease until it expires.
		lf.releasing.Store(false)
		lf.releaseFailed(err)
	}
	return err
}

// Keep renews the lease now, as the keep-alive does: it expires a TTL (or
// hold) from now on the store's clock, only while its ref still holds every
// lock; otherwise nothing changes and Keep returns ErrNotHeld (and the
// lease ends as lost).
func (x Lease) Keep(ctx context.Context) error {
	if err := x.usable(ctx); err != nil {
		return err
	}
	g := x.grant()
	start := time.Now()
	exp, err := x.store().Keep(ctx, g.Handle(), g.TTL, g.Hold)
	if lf := x.loadLife(); lf != nil {
		switch {
		case err == nil:
			lf.kept(start, exp)
		case errors.Is(err, store.ErrNotHeld):
			lf.lose(fmt.Errorf("%w: not held when kept", store.ErrLeaseLost))
		case errors.Is(err, store.ErrNotFound):
			lf.lose(store.DeletedHold(g.Name)) // its lock was deleted
		}
	}
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
	if err := x.usable(ctx); err != nil {
		return LeaseStatus{}, err
	}
	return x.store().Held(ctx, x.handle())
}

// Guard fences a write made in the caller's own transaction on a
// database store: inside tx it checks that the lease is still held, and
// no takeover can commit before tx does. What tx is depends on the store:
//
//   - the PostgreSQL store (package pgstore): a pgx.Tx (pgx v5) or a
//     *sql.Tx open on the store's database, whose holder records Guard
//     locks until tx ends; in a REPEATABLE READ or SERIALIZABLE
//     transaction, call Guard before its first statement;
//   - the SQLite store (package sqlitestore): a *sql.Tx on the same file,
//     whose write lock Guard takes until tx ends;
//   - the Redis store (package redisstore): a *redisstore.Tx, whose
//     writes Guard runs in the same script as the check, only while the
//     lease is held (an empty Tx only checks).
//
// tx is an any because these types have no method in common. Any other
// value (a pool, a connection, nil) is refused with an error matching
// ErrUnsupported that names its type, and nothing is checked; so is every
// call on the memory store, which has no transactions. Guard returns an
// error matching ErrLeaseLost when the lease is no longer held.
func (x Lease) Guard(ctx context.Context, tx any) error {
	if err := x.usable(ctx); err != nil {
		return err
	}
	g, ok := x.store().(store.Guarder)
	if !ok {
		return fmt.Errorf("%w: Guard needs a database store", store.ErrUnsupported)
	}
	return g.Guard(ctx, tx, x.handle())
}

// Deadline returns the lease's local deadline: Done closes at this time
// unless a renewal succeeds before it. It is the time on this process's
// monotonic clock just before the last renewal that succeeded (or the
// acquisition) was sent, plus the TTL, or the Hold when shorter; the
// store's expiry is never earlier, so nobody else can be granted the slot
// before it. A renewal under way when it passes does not hold Done open.
// It is zero for a lease that does not expire by itself: one without a
// TTL, a re-entrant acquisition (the first holder's lease keeps the hold),
// a LeaseOf handle and the zero Lease. Once the lease has ended it is the
// deadline it had last.
func (x Lease) Deadline() time.Time {
	if lf := x.loadLife(); lf != nil && lf.length > 0 {
		return lf.expiry()
	}
	return time.Time{}
}

// Done returns a channel that is closed when the lease ends: released
// through a Lease of its hold, lost (taken over, released by someone else
// naming its ref, not renewed before it expired), or — for a lease of
// Execute — when Execute's context ends. Every call returns the same
// channel. A LeaseOf handle's channel never closes.
func (x Lease) Done() <-chan struct{} {
	return x.Context().Done()
}

// Context returns a context that is cancelled when the lease ends, the same
// context on every call; its cause (context.Cause) matches ErrLeaseLost
// when the lease was lost and is ErrReleased after a release. A lease from
// Execute (or BindTo) has a context derived from that call's context. A
// LeaseOf handle's context never ends.
func (x Lease) Context() context.Context {
	if x.x == nil {
		if x.plk == nil {
			return endedContext
		}
		return x.plainContext()
	}
	if lf := x.ensureLife(); lf != nil {
		return lf.ctx
	}
	return context.Background()
}

// Err returns nil while the lease is held, and why it ended otherwise: the
// same error as context.Cause(x.Context()). ErrNotHeld for the zero Lease.
func (x Lease) Err() error {
	if x.x == nil {
		if x.plk == nil {
			return store.ErrNotHeld
		}
		return x.plk.Err(x.token) // as the cause, without making the context
	}
	return context.Cause(x.Context())
}

// endedContext is the context of the zero Lease: ended, with ErrNotHeld.
var endedContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(store.ErrNotHeld)
	return ctx
}()

// plainContext is the context of a plain lease of the memory store's plain
// path: made once, in the lease's holder record, on the first call.
func (x Lease) plainContext() context.Context {
	return x.plk.Context(x.token)
}
