package sleeplock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
)

// lateDoneCtx is a context whose Err reports its cancellation before its
// Done channel closes: it makes, deterministically, the instant at which a
// waiter's grant arrives while its context has already ended but the
// waiter has not yet seen it.
type lateDoneCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
	cancelled       atomic.Bool
}

func newLateDoneCtx() *lateDoneCtx {
	return &lateDoneCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *lateDoneCtx) Done() <-chan struct{} { return c.done }

func (c *lateDoneCtx) Err() error {
	if c.cancelled.Load() {
		return context.Canceled
	}
	return nil
}

// TestCancelAtGrantHasOneOutcome: a waiter whose context ends at the very
// instant its grant arrives has exactly one outcome. Either it holds the
// lock (its Acquire returned the lease; Stats counts the grant; the slot is
// its until it releases), or its Acquire returns the context's error and
// the slot goes to the next waiter or stays free. The slot is never lost:
// in every case the next waiter is granted, and once everyone released the
// lock is free and Stats balances (acquisitions = releases).
//
// Nothing is left to timing: the waiters are in the queue (a read of the
// state) when the waiter's context ends and its grant arrives.
// ErrThenGrant makes the instant exactly: the context reports its end
// (Err) but wakes nobody until the waiter has returned, so the grant finds
// it cancelled and it has not seen it. The two other orders end it through
// Done just before or just after the grant, so the scheduler decides what
// the waiter sees first; the assertions hold for every interleaving.
func TestCancelAtGrantHasOneOutcome(t *testing.T) {
	type how struct {
		name  string
		all   bool // AcquireAll of two locks rather than Acquire of one
		slots int
		opts  []sleeplock.AcquireOption
	}
	hows := []how{
		{name: "Plain", slots: 1},
		{name: "Ref", slots: 1, opts: []sleeplock.AcquireOption{sleeplock.Ref("w"), sleeplock.Kind("job")}},
		{name: "TTL", slots: 1, opts: []sleeplock.AcquireOption{sleeplock.TTL(time.Minute)}},
		{name: "Weighted", slots: 3, opts: []sleeplock.AcquireOption{sleeplock.Weight(2)}},
		{name: "Exclusive", slots: 2, opts: []sleeplock.AcquireOption{sleeplock.Exclusive()}},
		{name: "AcquireAll", all: true, slots: 1},
	}
	orders := []string{
		// The context ends (Err, not yet Done) and then the grant arrives;
		// Done closes after.
		"ErrThenGrant",
		// The context ends (Done too) and then the grant arrives.
		"CancelThenGrant",
		// The grant arrives and then the context ends.
		"GrantThenCancel",
	}
	for _, h := range hows {
		for _, order := range orders {
			t.Run(h.name+"/"+order, func(t *testing.T) {
				cancelAtGrant(t, h.all, h.slots, h.opts, order)
			})
		}
	}
}

func cancelAtGrant(t *testing.T, all bool, slots int, opts []sleeplock.AcquireOption, order string) {
	l := sleeplock.New(memstore.New())
	defer l.Close()
	t.Helper()
	bg := context.Background()
	names := []string{"k"}
	must(t, l.Define(bg, "k", slots))
	if all {
		names = append(names, "m")
		must(t, l.Define(bg, "m", 1))
	}
	statsNamed(t, l, "k")
	acquire := func(ctx context.Context, opts ...sleeplock.AcquireOption) (sleeplock.Lease, error) {
		if all {
			return l.AcquireAll(ctx, names, opts...)
		}
		return l.Acquire(ctx, "k", opts...)
	}
	type result struct {
		lease sleeplock.Lease
		err   error
	}

	// The holder takes every slot.
	holder, err := acquire(bg, sleeplock.Exclusive())
	must(t, err)
	ctx := newLateDoneCtx()
	cancel := func() {
		ctx.cancelled.Store(true)
		close(ctx.done)
	}
	w := make(chan result, 1)
	go func() {
		x, err := acquire(ctx, opts...)
		w <- result{x, err}
	}()
	parkedOn(t, l, "k", 1) // the waiter is in the queue
	next := make(chan result, 1)
	go func() {
		// Exclusive: it cannot share the lock with the waiter's hold.
		x, err := acquire(bg, sleeplock.Exclusive())
		next <- result{x, err}
	}()
	parkedOn(t, l, "k", 2) // and the next one behind it

	switch order {
	case "ErrThenGrant":
		ctx.cancelled.Store(true)
		must(t, holder.Release(bg))
	case "CancelThenGrant":
		cancel()
		must(t, holder.Release(bg))
	case "GrantThenCancel":
		must(t, holder.Release(bg))
		cancel()
	}
	r := <-w
	if order == "ErrThenGrant" {
		close(ctx.done) // for whatever sleeplock derived from ctx
	}
	if order == "ErrThenGrant" && r.err == nil {
		// The memory store gives back a grant that finds its waiter's
		// context ended (memstore's park, as x/sync's semaphore does).
		t.Fatalf("a waiter whose context had ended when its grant arrived kept the grant")
	}
	switch {
	case r.err == nil:
		// It holds: the slot is its, the next waiter still waits.
		if held, err := r.lease.Held(bg); err != nil || !held {
			t.Fatalf("the waiter's Acquire returned a lease that is not held: %v %v", held, err)
		}
		if s := statsNamed(t, l, "k"); s.Acquisitions != 2 || s.Waiting != 1 {
			t.Fatalf("while the waiter holds: acquisitions %d waiting %d, want 2 (holder, waiter) and 1", s.Acquisitions, s.Waiting)
		}
		must(t, r.lease.Release(bg))
	case errors.Is(r.err, context.Canceled):
		if r.lease != (sleeplock.Lease{}) {
			t.Fatalf("the waiter's Acquire returned %v with a lease %v", r.err, r.lease)
		}
		// What it was granted went on before it returned: the next waiter
		// holds the slot, nobody waits.
		for _, name := range names {
			if st, err := l.State(bg, name); err != nil || st.Waiting != 0 || st.Leases != 1 {
				t.Fatalf("%s once the cancelled waiter returned: %+v %v; want the next waiter holding it, nobody waiting (a slot was lost)", name, st, err)
			}
		}
	default:
		t.Fatalf("the waiter's Acquire = %v, want a lease or context.Canceled", r.err)
	}
	// Whichever it was, the next waiter is granted, and then the lock is free.
	n := <-next
	must(t, n.err)
	must(t, n.lease.Release(bg))
	for _, name := range names {
		st, err := l.State(bg, name)
		must(t, err)
		if st.Running != 0 || st.Waiting != 0 || st.Leases != 0 {
			t.Fatalf("%s after every release: running %d waiting %d leases %d, want a free lock", name, st.Running, st.Waiting, st.Leases)
		}
	}
	free, err := l.TryAcquire(bg, "k", sleeplock.Exclusive())
	must(t, err)
	must(t, free.Release(bg))
	if s := statsNamed(t, l, "k"); s.Acquisitions != s.Releases || s.Running != 0 {
		t.Fatalf("stats after every release: acquisitions %d releases %d running %d; a slot was lost", s.Acquisitions, s.Releases, s.Running)
	}
}
