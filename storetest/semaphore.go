package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// The cases of golang.org/x/sync/semaphore's own test file
// (semaphore/semaphore_test.go), each rewritten for a weighted lock of
// every store. Where x/sync panics, blocks forever or sleeps, the case
// says what we do instead; no case waits for time to pass.

// After TestWeighted (and its HammerWeighted): n callers, caller i taking
// i+1 of n slots, acquire and release in a loop. Beyond the original, the
// slots in use never exceed n.
var _ = add("Semaphore/Weighted", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	const n, loops = 4, 8
	define(t, l, "sem", n)
	var inUse atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for range loops {
				lease, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(i+1))
				if err != nil {
					t.Error(err)
					return
				}
				if u := inUse.Add(int64(i + 1)); u > n {
					t.Errorf("%d slots in use of %d", u, n)
				}
				inUse.Add(-int64(i + 1))
				if err := lease.Release(ctx(t)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantState(t, l, "sem", 0, 0)
})

// After TestWeightedPanic and TestWeightedNegativeWeightPanic: x/sync
// panics on a release of what is not held and on a negative weight; we
// return typed errors (ErrNotHeld, ErrInvalidWeight) and change nothing.
var _ = add("Semaphore/WeightedPanic", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "sem", 1)
	lease, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(1))
	must(t, err)
	must(t, lease.Release(ctx(t)))
	if err := lease.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	if _, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(-1)); !errors.Is(err, sleeplock.ErrInvalidWeight) {
		t.Fatalf("Acquire of weight -1: %v, want ErrInvalidWeight", err)
	}
	if _, err := l.TryAcquire(ctx(t), "sem", sleeplock.Weight(-1)); !errors.Is(err, sleeplock.ErrInvalidWeight) {
		t.Fatalf("TryAcquire of weight -1: %v, want ErrInvalidWeight", err)
	}
	wantState(t, l, "sem", 0, 0)
})

// After TestWeightedTryAcquire: on two slots, with one held a try gets
// the second and not a third; with both released a try gets one again,
// and with the other taken a try is refused.
var _ = add("Semaphore/WeightedTryAcquire", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "sem", 2)
	var held []sleeplock.Lease
	var tries []bool
	try := func() {
		lease, err := l.TryAcquire(ctx(t), "sem", sleeplock.Weight(1))
		if err != nil && !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatal(err)
		}
		if err == nil {
			held = append(held, lease)
		}
		tries = append(tries, err == nil)
	}
	trySequence(t, l, try, &held, &tries)
})

// After TestWeightedAcquire: as WeightedTryAcquire with blocking
// acquisitions bounded by a context. x/sync's contexts time out after
// 10 ms; ours are cancelled once the caller waits in the queue.
var _ = add("Semaphore/WeightedAcquire", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "sem", 2)
	var held []sleeplock.Lease
	var tries []bool
	acquire := func() {
		c, cancel := context.WithCancel(ctx(t))
		defer cancel()
		ch := make(chan result, 1)
		before := state(t, l, "sem").Waiting
		goAcquire(c, l, "sem", 0, ch, sleeplock.Weight(1))
		var r result
		select {
		case r = <-ch:
		default:
			waitFor(t, "a grant or a waiter", func() bool {
				select {
				case r = <-ch:
					return true
				default:
				}
				st, err := l.State(ctx(t), "sem")
				if err == nil && st.Waiting > before {
					cancel()
					r = <-ch
					return true
				}
				return false
			})
		}
		if r.err != nil && !errors.Is(r.err, context.Canceled) {
			t.Fatal(r.err)
		}
		if r.err == nil {
			held = append(held, r.lease)
		}
		tries = append(tries, r.err == nil)
	}
	trySequence(t, l, acquire, &held, &tries)
})

// trySequence is the sequence x/sync's TestWeightedTryAcquire and
// TestWeightedAcquire share, on lock "sem" of 2 slots: with one slot held,
// attempt gets the second and not a third; with both released it gets one
// again; with the other taken it is refused. attempt appends to *tries and
// to *held (what it was granted).
func trySequence(t *testing.T, l *sleeplock.Locks, attempt func(), held *[]sleeplock.Lease, tries *[]bool) {
	t.Helper()
	first, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(1))
	must(t, err)
	attempt()
	attempt()
	must(t, first.Release(ctx(t)))
	for _, h := range *held {
		must(t, h.Release(ctx(t)))
	}
	*held = nil
	attempt()
	second, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(1))
	must(t, err)
	attempt()
	want := []bool{true, false, true, false}
	if !slices.Equal(*tries, want) {
		t.Fatalf("tries %v, want %v", *tries, want)
	}
	must(t, second.Release(ctx(t)))
	for _, h := range *held {
		must(t, h.Release(ctx(t)))
	}
	wantState(t, l, "sem", 0, 0)
}

// After TestWeightedDoesntBlockIfTooBig: x/sync queues a request for more
// than the semaphore holds, where it blocks forever, and checks it does
// not block the small ones. Ours is refused at once with a *WeightError,
// and the small ones then go through.
var _ = add("Semaphore/WeightedDoesntBlockIfTooBig", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	const n = 2
	define(t, l, "sem", n)
	_, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(n+1))
	tooHeavy(t, err, "sem", n+1, n, false)
	var wg sync.WaitGroup
	for range n * 3 {
		wg.Go(func() {
			lease, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(1))
			if err != nil {
				t.Error(err)
				return
			}
			if err := lease.Release(ctx(t)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	wantState(t, l, "sem", 0, 0)
})

// After TestLargeAcquireDoesntStarve: n callers each hold one of n slots
// and keep releasing and taking it again; a request for all n must still
// be granted (the test's own timeout is the bound, as in x/sync).
var _ = add("Semaphore/LargeAcquireDoesntStarve", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	const n = 3
	define(t, l, "sem", n)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		lease, err := l.Acquire(ctx(t), "sem")
		must(t, err)
		wg.Go(func() {
			for !stop.Load() {
				if err := lease.Release(ctx(t)); err != nil {
					t.Error(err)
					return
				}
				if lease, err = l.Acquire(ctx(t), "sem"); err != nil {
					t.Error(err)
					return
				}
			}
			if err := lease.Release(ctx(t)); err != nil {
				t.Error(err)
			}
		})
	}
	big, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(n))
	must(t, err)
	stop.Store(true)
	must(t, big.Release(ctx(t)))
	wg.Wait()
	wantState(t, l, "sem", 0, 0)
})

// After TestAllocCancelDoesntStarve (which x/sync took from
// zhiqiangxu/util's crwmutex test): with one of ten slots held, a request
// for all ten waits; a request for one behind it must be granted once the
// big one is cancelled.
var _ = add("Semaphore/AllocCancelDoesntStarve", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "sem", 10)
	one, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(1))
	must(t, err)
	bctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	big := make(chan result, 1)
	goAcquire(bctx, l, "sem", 0, big, sleeplock.Weight(10))
	waitWaiting(t, l, "sem", 1)
	small := make(chan result, 1)
	goAcquire(ctx(t), l, "sem", 1, small, sleeplock.Weight(1))
	waitWaiting(t, l, "sem", 2)
	cancel()
	must(t, granted(t, small, 1).lease.Release(ctx(t)))
	if r := <-big; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled request for every slot: %v, want context.Canceled", r.err)
	}
	must(t, one.Release(ctx(t)))
	wantState(t, l, "sem", 0, 0)
})

// After TestWeightedAcquireCanceled (golang/go#63615): a waiter whose
// context ends before its slots are free fails with the context's error
// even when the slots are freed right after, and leaves them all free; and
// an acquisition with a context that has ended fails even when it would
// not wait.
var _ = add("Semaphore/WeightedAcquireCanceled", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "sem", 2)
	one, err := l.Acquire(ctx(t), "sem", sleeplock.Weight(1))
	must(t, err)
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch := make(chan result, 1)
	goAcquire(c, l, "sem", 0, ch, sleeplock.Weight(2))
	waitWaiting(t, l, "sem", 1)
	cancel()
	must(t, one.Release(ctx(t)))
	if r := <-ch; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", r.err)
	}
	both, err := l.TryAcquire(ctx(t), "sem", sleeplock.Weight(2))
	must(t, err)
	must(t, both.Release(ctx(t)))
	if _, err := l.Acquire(c, "sem", sleeplock.Weight(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquisition with an ended context: %v, want context.Canceled", err)
	}
	wantState(t, l, "sem", 0, 0)
})
