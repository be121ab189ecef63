package memstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
)

// A forced Delete and a Define of the name again, over and over, while
// plain leases (the fast word, and a handle kept across the lock's lives),
// leases with a ref and waiters use the lock: no panic, no race, every caller ends (granted, or ErrNotFound),
// and the tokens each caller is granted keep growing across the lock's
// lives.
func TestDeleteRacesGrants(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(memstore.New())
	defer l.Close()
	if err := l.Define(ctx, "x", 2); err != nil {
		t.Fatal(err)
	}
	handle := l.Lock("x")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				var lease sleeplock.Lease
				var err error
				switch g {
				case 0:
					lease, err = l.Acquire(ctx, "x") // plain: the fast word, or a wait
				case 1:
					lease, err = handle.Acquire(ctx) // a handle kept across the lock's lives
				default:
					lease, err = l.Acquire(ctx, "x", sleeplock.Ref("r"+string(rune('a'+g))))
				}
				if errors.Is(err, sleeplock.ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if lease.Token() <= last {
					errs <- errors.New("a token went down across a Delete")
					return
				}
				last = lease.Token()
				_ = lease.Release(ctx) // ErrNotFound or ErrNotHeld when deleted meanwhile
			}
		}()
	}
	for range 300 {
		if _, err := l.Delete(ctx, "x", sleeplock.Force()); err != nil {
			t.Fatal(err)
		}
		if err := l.Define(ctx, "x", 2); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Nothing leaked: every grant of the last lock was released.
	if st, err := l.State(ctx, "x"); err != nil || st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("after the race: %+v %v", st, err)
	}
}

// A family's Delete refused for members in use names the first of them
// by name, whatever order they were made in, and counts them all.
func TestDeleteFamilyNamesFirstMemberInUse(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(memstore.New())
	defer l.Close()
	if err := l.Define(ctx, "f/*", 1); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f/c", "f/b", "f/a"} {
		if _, err := l.TryAcquire(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.Delete(ctx, "f/*")
	var u *sleeplock.InUseError
	if !errors.As(err, &u) || u.Lock != "f/a" || u.Holders != 3 {
		t.Fatalf("Delete of a family in use = %v, want an *InUseError naming f/a and 3 holders", err)
	}
}

// waitersOfBoth queues, on locks a (of aSlots, held by the lease it
// returns) and b (1 slot, free), a waiter of both that AcquireAll with
// opts makes, then a caller of b alone behind it; their channels get what
// each call returned (the caller of b releases at once).
func waitersOfBoth(t *testing.T, s *memstore.Store, l *sleeplock.Locks, aSlots int,
	opts ...sleeplock.AcquireOption) (h sleeplock.Lease, both, behind chan error) {
	t.Helper()
	ctx := context.Background()
	must(t, l.Define(ctx, "a", aSlots))
	must(t, l.Define(ctx, "b", 1))
	h, err := l.TryAcquire(ctx, "a")
	must(t, err)
	both, behind = make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := l.AcquireAll(ctx, []string{"a", "b"}, opts...)
		both <- err
	}()
	waitWaiting(t, s, "b", 1) // queued on a and on b
	go func() {
		x, err := l.Acquire(ctx, "b")
		if err == nil {
			err = x.Release(ctx)
		}
		behind <- err
	}()
	waitWaiting(t, s, "b", 2) // queued on b behind the waiter of both
	return h, both, behind
}

// A Resize that drops a waiter of several locks as too heavy grants the
// waiters it held back on its other locks: a caller queued behind it on a
// free lock is granted in the same step.
func TestResizeDropsHeavyWaiterAndGrantsBehindIt(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := sleeplock.New(s)
	defer l.Close()
	// a has 3 of 4 slots free: the waiter of weight 4 there waits.
	h, heavy, behind := waitersOfBoth(t, s, l, 4, sleeplock.WeightFor("a", 4))
	must(t, l.Resize(ctx, "a", 2))
	if st, err := s.State(ctx, "b", false); err != nil || st.Waiting != 0 {
		t.Fatalf("b after the resize dropped the heavy waiter: %+v, %v; want nobody waiting", st, err)
	}
	if err := <-heavy; !errors.Is(err, sleeplock.ErrTooHeavy) {
		t.Fatalf("the heavy waiter after a resize below its weight: %v, want ErrTooHeavy", err)
	}
	must(t, <-behind)
	must(t, h.Release(ctx))
}

// A forced Delete that ends a waiter of several locks grants the waiters
// it held back on its other locks: a caller queued behind it on a free
// lock is granted in the same step.
func TestForcedDeleteEndsWaiterAndGrantsBehindIt(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := sleeplock.New(s)
	defer l.Close()
	h, both, behind := waitersOfBoth(t, s, l, 1)
	_, err := l.Delete(ctx, "a", sleeplock.Force())
	must(t, err)
	if st, err := s.State(ctx, "b", false); err != nil || st.Waiting != 0 {
		t.Fatalf("b after the delete ended the waiter of both: %+v, %v; want nobody waiting", st, err)
	}
	if err := <-both; !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("the waiter of a deleted lock: %v, want ErrNotFound", err)
	}
	must(t, <-behind)
	if err := h.Release(ctx); !errors.Is(err, sleeplock.ErrNotHeld) && !errors.Is(err, sleeplock.ErrLeaseLost) {
		t.Fatalf("release of a hold the delete ended = %v", err)
	}
}
