package sleeplock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
)

// wantUse checks a lock's slots in use (each hold with its weight), its
// holders and its waiters.
func wantUse(t *testing.T, l *sleeplock.Locks, name string, running, leases, waiting int) {
	t.Helper()
	st, err := l.State(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running != running || st.Leases != leases || st.Waiting != waiting {
		t.Fatalf("%s: running %d, leases %d, waiting %d; want %d, %d, %d", name, st.Running, st.Leases, st.Waiting, running, leases, waiting)
	}
}

// A ref that holds one slot of a multi-slot lock gets its hold back at
// once, as one hold, even when every slot is taken and callers wait: a
// re-entry takes no slot, jumps no queue (it waits for nothing), counts no
// acquisition, and one release of any of its leases ends the hold, which
// grants the slot to the head of the queue.
func TestReentryOnAFullMultiSlotLock(t *testing.T) {
	l := sleeplock.New(memstore.New())
	defer l.Close()
	ctx := context.Background()
	must(t, l.Define(ctx, "pool", 3))
	statsNamed(t, l, "pool")
	a, err := l.Acquire(ctx, "pool", sleeplock.Ref("a"))
	must(t, err)
	b, err := l.Acquire(ctx, "pool", sleeplock.Ref("b"))
	must(t, err)
	c, err := l.Acquire(ctx, "pool")
	must(t, err)
	got := make(chan error, 1)
	var d sleeplock.Lease
	go func() {
		var err error
		d, err = l.Acquire(ctx, "pool", sleeplock.Ref("d"))
		got <- err
	}()
	parkedOn(t, l, "pool", 1)

	for _, try := range []bool{true, false} {
		var again sleeplock.Lease
		if try {
			again, err = l.TryAcquire(ctx, "pool", sleeplock.Ref("b"))
		} else {
			again, err = l.Acquire(ctx, "pool", sleeplock.Ref("b"))
		}
		must(t, err)
		if !again.Reentered() || again.Token() != b.Token() {
			t.Fatalf("re-entry (try %v) on a full lock: reentered %v, token %d; want the hold of token %d", try, again.Reentered(), again.Token(), b.Token())
		}
	}
	wantUse(t, l, "pool", 3, 3, 1)
	if s := statsNamed(t, l, "pool"); s.Acquisitions != 3 {
		t.Fatalf("acquisitions %d, want 3: a re-entry is not one", s.Acquisitions)
	}
	// A ref that holds nothing is refused, and the one waiting still waits.
	if _, err := l.TryAcquire(ctx, "pool", sleeplock.Ref("e")); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a try of a new ref on the full lock = %v, want ErrUnavailable", err)
	}

	must(t, b.Release(ctx)) // the hold ends: its slot goes to the head of the queue
	must(t, <-got)
	wantUse(t, l, "pool", 3, 3, 0)
	if err := b.Release(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("second release of the re-entered hold = %v, want ErrNotHeld", err)
	}
	for _, x := range []sleeplock.Lease{a, c, d} {
		must(t, x.Release(ctx))
	}
	wantUse(t, l, "pool", 0, 0, 0)
}

// A weighted hold re-enters at the weight it holds, whatever weight is
// asked (smaller, larger than what is free, exclusive), even when the lock
// is full and a heavy waiter is queued; counted re-entries of it are
// released one by one, and only the last frees its slots.
func TestReentryOfAWeightedHold(t *testing.T) {
	l := sleeplock.New(memstore.New())
	defer l.Close()
	ctx := context.Background()
	must(t, l.Define(ctx, "gpu", 4))
	a, err := l.Acquire(ctx, "gpu", sleeplock.Ref("train"), sleeplock.Weight(3), sleeplock.Counted())
	must(t, err)
	o, err := l.Acquire(ctx, "gpu", sleeplock.Ref("other"))
	must(t, err)
	got := make(chan error, 1)
	var w sleeplock.Lease
	go func() {
		var err error
		w, err = l.Acquire(ctx, "gpu", sleeplock.Ref("heavy"), sleeplock.Weight(2))
		got <- err
	}()
	parkedOn(t, l, "gpu", 1)
	wantUse(t, l, "gpu", 4, 2, 1)

	asks := []sleeplock.AcquireOption{sleeplock.Weight(1), sleeplock.Weight(2), sleeplock.Weight(4), sleeplock.Exclusive(), sleeplock.Shared()}
	for i, ask := range asks {
		again, err := l.TryAcquire(ctx, "gpu", sleeplock.Ref("train"), ask, sleeplock.Counted())
		must(t, err)
		if !again.Reentered() || again.Weight() != 3 || again.Token() != a.Token() {
			t.Fatalf("re-entry %d: reentered %v, weight %d, token %d; want the hold of weight 3, token %d",
				i, again.Reentered(), again.Weight(), again.Token(), a.Token())
		}
	}
	wantUse(t, l, "gpu", 4, 2, 1)
	st, err := l.StateDetail(ctx, "gpu")
	must(t, err)
	for _, h := range st.Holders {
		if h.Ref == "train" && (h.Count != 1+len(asks) || h.Weight != 3) {
			t.Fatalf("the counted hold: count %d weight %d, want %d and 3", h.Count, h.Weight, 1+len(asks))
		}
	}

	for range asks { // every release but the last leaves the hold as it was
		must(t, a.Release(ctx))
		wantUse(t, l, "gpu", 4, 2, 1)
	}
	must(t, a.Release(ctx)) // the last frees 3 slots: the heavy waiter gets 2
	must(t, <-got)
	if w.Weight() != 2 {
		t.Fatalf("the waiter's weight %d, want 2", w.Weight())
	}
	wantUse(t, l, "gpu", 3, 2, 0)
	must(t, w.Release(ctx))
	must(t, o.Release(ctx))
	wantUse(t, l, "gpu", 0, 0, 0)
}

// AcquireAll re-enters a multi-slot and a weighted lock together when its
// ref holds both, each at the weight it holds.
func TestReentryAllOfMultiSlotAndWeightedLocks(t *testing.T) {
	l := sleeplock.New(memstore.New())
	defer l.Close()
	ctx := context.Background()
	must(t, l.Define(ctx, "cpu", 2))
	must(t, l.Define(ctx, "mem", 8))
	a, err := l.AcquireAll(ctx, []string{"cpu", "mem"}, sleeplock.Ref("job"), sleeplock.WeightFor("mem", 5))
	must(t, err)
	x, err := l.Acquire(ctx, "cpu", sleeplock.Ref("x"))
	must(t, err)
	again, err := l.AcquireAll(ctx, []string{"mem", "cpu"}, sleeplock.Ref("job"), sleeplock.WeightFor("mem", 8), sleeplock.NoWait())
	must(t, err)
	if !again.Reentered() || again.Weight() != 5 {
		t.Fatalf("AcquireAll re-entry: reentered %v, weight of mem %d; want true, 5", again.Reentered(), again.Weight())
	}
	toks := a.Tokens()
	if got := again.Tokens(); len(got) != 2 || got[0] != toks[1] || got[1] != toks[0] {
		t.Fatalf("re-entry tokens %v (mem, cpu), want %v reversed", got, toks)
	}
	wantUse(t, l, "cpu", 2, 2, 0)
	wantUse(t, l, "mem", 5, 1, 0)
	must(t, again.Release(ctx))
	wantUse(t, l, "cpu", 1, 1, 0)
	wantUse(t, l, "mem", 0, 0, 0)
	must(t, x.Release(ctx))
}
