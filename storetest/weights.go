package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// Weights: a lease takes k of a lock's slots as one hold, in the same FIFO
// queue as everybody else.

// granted waits for a result and checks it is a grant of weight w (any
// weight for 0).
func granted(t *testing.T, ch <-chan result, w int) result {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Fatalf("caller %d: %v", r.id, r.err)
	}
	if got := r.lease.Weight(); w != 0 && got != w {
		t.Fatalf("caller %d granted weight %d, want %d", r.id, got, w)
	}
	return r
}

// tooHeavy checks err is a *WeightError for lock with weight and slots.
func tooHeavy(t *testing.T, err error, lock string, weight, slots int, resized bool) {
	t.Helper()
	var we *sleeplock.WeightError
	if !errors.As(err, &we) || !errors.Is(err, sleeplock.ErrTooHeavy) {
		t.Fatalf("got %v, want a *WeightError matching ErrTooHeavy", err)
	}
	if we.Lock != lock || we.Weight != weight || we.Slots != slots || we.Resized != resized {
		t.Fatalf("got %+v, want lock %q weight %d slots %d resized %v", *we, lock, weight, slots, resized)
	}
}

// A lighter waiter that would fit queues behind a heavier one: nobody is
// granted past the head.
var _ = add("Weight/MixedFIFO", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 4)
	a, err := l.Acquire(ctx(t), "w", sleeplock.Weight(3))
	must(t, err)
	if a.Weight() != 3 {
		t.Fatalf("weight %d, want 3", a.Weight())
	}
	wantState(t, l, "w", 3, 0)
	ch := make(chan result, 2)
	goAcquire(ctx(t), l, "w", 1, ch, sleeplock.Weight(2))
	waitWaiting(t, l, "w", 1)
	goAcquire(ctx(t), l, "w", 2, ch, sleeplock.Weight(1)) // fits the free slot, but must not pass
	waitWaiting(t, l, "w", 2)
	b := busy(t, tryErr(l.TryAcquire(ctx(t), "w")))
	if !b.Queued {
		t.Fatalf("refusal %+v: want Queued (a slot is free, others wait)", *b)
	}
	st := state(t, l, "w")
	if st.Running != 3 || st.Leases != 1 || len(st.Queue) != 2 || st.Queue[0].Weight != 2 || st.Queue[1].Weight != 1 {
		t.Fatalf("state %+v: want running 3, 1 lease, a queue of weights 2 then 1", st)
	}
	must(t, a.Release(ctx(t)))
	r1, r2 := granted(t, ch, 0), granted(t, ch, 0)
	_, _ = r1, r2
	st = state(t, l, "w")
	if st.Running != 3 || st.Leases != 2 || st.Waiting != 0 {
		t.Fatalf("state %+v: want running 3 (weights 2 and 1), 2 leases", st)
	}
	weights := map[int]int{}
	for _, h := range st.Holders {
		weights[h.Weight]++
	}
	if weights[2] != 1 || weights[1] != 1 {
		t.Fatalf("holders %+v: want weights 2 and 1", st.Holders)
	}
	must(t, r1.lease.Release(ctx(t)))
	must(t, r2.lease.Release(ctx(t)))
	wantState(t, l, "w", 0, 0)
})

func tryErr(_ sleeplock.Lease, err error) error { return err }

// needWeights checks that the store grants weights before a weighted
// case: every store of this repository does, so a store that refuses them
// (ErrUnsupported) fails here, with that reason, rather than case by case.
func needWeights(t *testing.T, l *sleeplock.Locks) {
	t.Helper()
	if err := l.Define(ctx(t), "weights-probe", 2); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryAcquire(ctx(t), "weights-probe", sleeplock.Weight(2))
	if errors.Is(err, sleeplock.ErrUnsupported) {
		t.Fatalf("the store refuses weights: %v", err)
	}
	must(t, err)
	must(t, lease.Release(ctx(t)))
}

// Cancelling a heavy head lets the lighter waiters behind it in.
var _ = add("Weight/CancelHeavyHead", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 4)
	a, err := l.Acquire(ctx(t), "w", sleeplock.Weight(2))
	must(t, err)
	hctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	head := make(chan result, 1)
	goAcquire(hctx, l, "w", 0, head, sleeplock.Weight(4))
	waitWaiting(t, l, "w", 1)
	ch := make(chan result, 2)
	goAcquire(ctx(t), l, "w", 1, ch)
	goAcquire(ctx(t), l, "w", 2, ch)
	waitWaiting(t, l, "w", 3)
	cancel()
	if r := <-head; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled head: %v, want context.Canceled", r.err)
	}
	r1, r2 := granted(t, ch, 1), granted(t, ch, 1)
	wantState(t, l, "w", 4, 0)
	must(t, r1.lease.Release(ctx(t)))
	must(t, r2.lease.Release(ctx(t)))
	must(t, a.Release(ctx(t)))
	wantState(t, l, "w", 0, 0)
})

// A large request is not starved by small ones that keep coming: they
// queue behind it, and it is granted as soon as its slots are free.
var _ = add("Weight/LargeNotStarved", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 3)
	small, err := l.Acquire(ctx(t), "w")
	must(t, err)
	big := make(chan result, 1)
	goAcquire(ctx(t), l, "w", 0, big, sleeplock.Weight(3))
	waitWaiting(t, l, "w", 1)
	ch := make(chan result, 4)
	for i := 1; i <= 4; i++ { // two slots are free, but the big one is ahead
		goAcquire(ctx(t), l, "w", i, ch)
		waitWaiting(t, l, "w", 1+i)
	}
	wantState(t, l, "w", 1, 5)
	must(t, small.Release(ctx(t)))
	r := granted(t, big, 3)
	wantState(t, l, "w", 3, 4)
	must(t, r.lease.Release(ctx(t)))
	var rs []result
	for range 3 {
		rs = append(rs, granted(t, ch, 1))
	}
	wantState(t, l, "w", 3, 1)
	for _, r := range rs {
		must(t, r.lease.Release(ctx(t)))
	}
	must(t, granted(t, ch, 1).lease.Release(ctx(t)))
	wantState(t, l, "w", 0, 0)
})

// TryAcquire takes its weight or nothing, and names what holds the lock.
var _ = add("Weight/TryAcquire", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 4)
	a, err := l.TryAcquire(ctx(t), "w", sleeplock.Weight(3), sleeplock.Kind("gpu-job"))
	must(t, err)
	b := busy(t, tryErr(l.TryAcquire(ctx(t), "w", sleeplock.Weight(2))))
	if b.Queued || b.Kind != "gpu-job" || b.Lock != "w" {
		t.Fatalf("refusal %+v: want the holder of kind gpu-job, not the queue", *b)
	}
	c, err := l.TryAcquire(ctx(t), "w", sleeplock.Weight(1))
	must(t, err)
	st := state(t, l, "w")
	if st.Running != 4 || st.Leases != 2 {
		t.Fatalf("state %+v: want running 4 of 2 leases", st)
	}
	must(t, a.Release(ctx(t)))
	must(t, c.Release(ctx(t)))
	// Exclusive takes every slot.
	x, err := l.TryAcquire(ctx(t), "w", sleeplock.Exclusive())
	must(t, err)
	if x.Weight() != 4 {
		t.Fatalf("exclusive weight %d, want 4", x.Weight())
	}
	_ = busy(t, tryErr(l.TryAcquire(ctx(t), "w", sleeplock.Shared())))
	must(t, x.Release(ctx(t)))
	wantState(t, l, "w", 0, 0)
})

// A weight larger than the lock's slots is refused at once, waiting or
// not, and so is a weight that is no weight.
var _ = add("Weight/TooHeavy", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 2)
	define(t, l, "v", 5)
	_, err := l.Acquire(ctx(t), "w", sleeplock.Weight(3))
	tooHeavy(t, err, "w", 3, 2, false)
	_, err = l.TryAcquire(ctx(t), "w", sleeplock.Weight(3))
	tooHeavy(t, err, "w", 3, 2, false)
	_, err = l.AcquireAll(ctx(t), []string{"v", "w"}, sleeplock.Weight(3))
	if apart(l, "v", "w") {
		wantShardError(t, "AcquireAll of two shards", err)
	} else {
		tooHeavy(t, err, "w", 3, 2, false)
	}
	_, err = sleeplock.Execute(ctx(t), l, "w", func(context.Context) (int, error) { return 0, nil }, sleeplock.Weight(3))
	tooHeavy(t, err, "w", 3, 2, false)
	for _, k := range []int{0, -1, -2, 1_000_001} {
		if _, err := l.Acquire(ctx(t), "w", sleeplock.Weight(k)); !errors.Is(err, sleeplock.ErrInvalidWeight) {
			t.Fatalf("Weight(%d): %v, want ErrInvalidWeight", k, err)
		}
	}
	if _, err := l.AcquireAll(ctx(t), []string{"v", "w"}, sleeplock.WeightFor("x", 1)); !errors.Is(err, sleeplock.ErrInvalidLocks) {
		t.Fatalf("WeightFor of a lock not asked: %v, want ErrInvalidLocks", err)
	}
	wantState(t, l, "w", 0, 0)
	wantState(t, l, "v", 0, 0)
})

// A Resize that leaves a waiter asking more slots than the lock has ends
// that waiter with a *WeightError; one that grows the lock grants waiters.
var _ = add("Weight/ResizeUnderQueue", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 4)
	x, err := l.Acquire(ctx(t), "w", sleeplock.Exclusive())
	must(t, err)
	heavy := make(chan result, 1)
	goAcquire(ctx(t), l, "w", 0, heavy, sleeplock.Weight(3))
	waitWaiting(t, l, "w", 1)
	light := make(chan result, 1)
	goAcquire(ctx(t), l, "w", 1, light, sleeplock.Weight(2))
	waitWaiting(t, l, "w", 2)
	must(t, l.Resize(ctx(t), "w", 2))
	tooHeavy(t, (<-heavy).err, "w", 3, 2, true)
	wantState(t, l, "w", 4, 1) // the writer keeps the four slots it took
	must(t, x.Release(ctx(t)))
	r := granted(t, light, 2)
	// Growing the lock grants a waiter that now fits.
	more := make(chan result, 1)
	goAcquire(ctx(t), l, "w", 2, more, sleeplock.Weight(2))
	waitWaiting(t, l, "w", 1)
	must(t, l.Resize(ctx(t), "w", 4))
	r2 := granted(t, more, 2)
	wantState(t, l, "w", 4, 0)
	must(t, r.lease.Release(ctx(t)))
	must(t, r2.lease.Release(ctx(t)))
	wantState(t, l, "w", 0, 0)
})

// Readers share, a writer excludes them all, and a waiting writer blocks
// readers that come after it: writers are not starved.
var _ = add("Weight/SharedExclusive", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "rw", 3)
	r1, err := l.Acquire(ctx(t), "rw", sleeplock.Shared())
	must(t, err)
	r2, err := l.Acquire(ctx(t), "rw", sleeplock.Shared())
	must(t, err)
	writer := make(chan result, 1)
	goAcquire(ctx(t), l, "rw", 0, writer, sleeplock.Exclusive(), sleeplock.Kind("writer"))
	waitWaiting(t, l, "rw", 1)
	reader := make(chan result, 1)
	goAcquire(ctx(t), l, "rw", 1, reader, sleeplock.Shared())
	waitWaiting(t, l, "rw", 2)
	_ = busy(t, tryErr(l.TryAcquire(ctx(t), "rw", sleeplock.Shared())))
	must(t, r1.Release(ctx(t)))
	wantState(t, l, "rw", 1, 2)
	must(t, r2.Release(ctx(t)))
	w := granted(t, writer, 3)
	st := state(t, l, "rw")
	if st.Running != 3 || st.Leases != 1 || len(st.Holders) != 1 || st.Holders[0].Weight != 3 || st.Holders[0].Kind != "writer" {
		t.Fatalf("state %+v: want the writer alone, weight 3", st)
	}
	must(t, w.lease.Release(ctx(t)))
	must(t, granted(t, reader, 1).lease.Release(ctx(t)))
	wantState(t, l, "rw", 0, 0)
})

// A ref that holds the lock gets its hold back at the weight it holds,
// whatever weight it asks: a hold never changes weight.
var _ = add("Weight/Reenter", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 4)
	a, err := l.Acquire(ctx(t), "w", sleeplock.Ref("job-1"), sleeplock.Weight(2))
	must(t, err)
	for _, k := range []int{1, 3, 4} {
		b, err := l.Acquire(ctx(t), "w", sleeplock.Ref("job-1"), sleeplock.Weight(k))
		must(t, err)
		if !b.Reentered() || b.Weight() != 2 || b.Token() != a.Token() {
			t.Fatalf("re-entry with weight %d: reentered %v, weight %d, token %d; want the hold of weight 2, token %d",
				k, b.Reentered(), b.Weight(), b.Token(), a.Token())
		}
	}
	b, err := l.TryAcquire(ctx(t), "w", sleeplock.Ref("job-1"), sleeplock.Exclusive())
	must(t, err)
	if b.Weight() != 2 {
		t.Fatalf("exclusive re-entry: weight %d, want 2", b.Weight())
	}
	wantState(t, l, "w", 2, 0)
	must(t, a.Release(ctx(t)))
	wantState(t, l, "w", 0, 0)
})

// AcquireAll takes a weight per lock, all or nothing.
var _ = add("Weight/AcquireAll", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	together(t, l, "gpu", "disk")
	define(t, l, "gpu", 4)
	define(t, l, "disk", 2)
	a, err := l.AcquireAll(ctx(t), []string{"gpu", "disk"}, sleeplock.WeightFor("gpu", 3))
	must(t, err)
	if a.Weight() != 3 {
		t.Fatalf("weight of gpu %d, want 3", a.Weight())
	}
	wantState(t, l, "gpu", 3, 0)
	wantState(t, l, "disk", 1, 0)
	// One slot of each is free, but two of gpu are asked: nothing is taken.
	b := busy(t, tryErr(l.AcquireAll(ctx(t), []string{"disk", "gpu"}, sleeplock.NoWait(), sleeplock.Weight(1), sleeplock.WeightFor("gpu", 2))))
	if b.Lock != "gpu" {
		t.Fatalf("refused %q, want gpu", b.Lock)
	}
	wantState(t, l, "disk", 1, 0)
	ch := make(chan result, 1)
	go func() {
		lease, err := l.AcquireAll(ctx(t), []string{"disk", "gpu"}, sleeplock.Exclusive())
		ch <- result{0, lease, err}
	}()
	waitWaiting(t, l, "gpu", 1)
	must(t, a.Release(ctx(t)))
	r := granted(t, ch, 2) // every slot of disk, the first lock
	wantState(t, l, "gpu", 4, 0)
	wantState(t, l, "disk", 2, 0)
	must(t, r.lease.Release(ctx(t)))
	wantState(t, l, "gpu", 0, 0)
	wantState(t, l, "disk", 0, 0)
})

// Events carry the weight asked or held.
var _ = add("Weight/Events", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithInlineNotifier(rec))
	needWeights(t, l)
	define(t, l, "w", 4)
	a, err := l.Acquire(ctx(t), "w", sleeplock.Weight(3))
	must(t, err)
	_ = busy(t, tryErr(l.TryAcquire(ctx(t), "w", sleeplock.Weight(2))))
	must(t, a.Release(ctx(t)))
	evs := rec.waitN(t, 7)                  // the probe's three; created, acquired, refused, released
	want := map[sleeplock.EventType][2]int{ // weight, running
		sleeplock.EventAcquired: {3, 3},
		sleeplock.EventRefused:  {2, 3},
		sleeplock.EventReleased: {3, 0},
	}
	seen := 0
	for _, ev := range evs {
		w, ok := want[ev.Type]
		if !ok || ev.Lock != "w" {
			continue
		}
		seen++
		if ev.Weight != w[0] || ev.Running != w[1] {
			t.Fatalf("%s event: weight %d, running %d; want %d, %d", ev.Type, ev.Weight, ev.Running, w[0], w[1])
		}
	}
	if seen != 3 {
		t.Fatalf("events %v: want acquired, refused, released", types(evs))
	}
})

// Execute takes a weight as Acquire does.
var _ = add("Weight/Execute", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w", 4)
	got, err := sleeplock.Execute(ctx(t), l, "w", func(context.Context) (int, error) {
		return state(t, l, "w").Running, nil
	}, sleeplock.Weight(3))
	must(t, err)
	if got != 3 {
		t.Fatalf("running %d inside Execute, want 3", got)
	}
	wantState(t, l, "w", 0, 0)
})

// Without weights, every store's events and state say weight 1: the same
// numbers everywhere, weights granted or not.
var _ = add("Weight/OneByDefault", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithInlineNotifier(rec))
	define(t, l, "w", 2)
	a, err := l.Acquire(ctx(t), "w", sleeplock.Kind("job"))
	must(t, err)
	if a.Weight() != 1 {
		t.Fatalf("weight %d, want 1", a.Weight())
	}
	st := state(t, l, "w")
	if st.Running != 1 || st.Leases != 1 || len(st.Holders) != 1 || st.Holders[0].Weight != 1 {
		t.Fatalf("state %+v: want one lease of weight 1", st)
	}
	must(t, a.Release(ctx(t)))
	for _, ev := range rec.waitN(t, 3) {
		if ev.Type != sleeplock.EventCreated && ev.Weight != 1 {
			t.Fatalf("%s event of weight %d, want 1", ev.Type, ev.Weight)
		}
	}
})

// A refused weighted request says what it asked and what was free, on
// every store: "4 asked, 2 of 16 free", never "all slots are held" while
// slots are free.
var _ = add("Weight/RefusalSaysAskedAndFree", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "w16", 16)
	held, err := l.TryAcquire(ctx(t), "w16", sleeplock.Weight(14), sleeplock.Kind("build"))
	must(t, err)
	refused := func(err error, weight, free, slots int, text string) {
		t.Helper()
		b := busy(t, err)
		if b.Weight != weight || b.Free != free || b.Slots != slots {
			t.Fatalf("refusal %+v: want %d asked, %d of %d free", *b, weight, free, slots)
		}
		if !strings.Contains(b.Error(), text) || strings.Contains(b.Error(), "all slots are held") {
			t.Fatalf("refusal %q: want it to say %q", b.Error(), text)
		}
	}
	refused(tryErr(l.TryAcquire(ctx(t), "w16", sleeplock.Weight(4))), 4, 2, 16, "4 asked, 2 of 16 free, held by a build")
	refused(tryErr(l.TryAcquire(ctx(t), "w16", sleeplock.Exclusive())), 16, 2, 16, "16 asked, 2 of 16 free")
	must(t, held.Release(ctx(t)))

	define(t, l, "w64", 64)
	one, err := l.TryAcquire(ctx(t), "w64")
	must(t, err)
	refused(tryErr(l.TryAcquire(ctx(t), "w64", sleeplock.Exclusive())), 64, 63, 64, "64 asked, 63 of 64 free")
	if _, err := l.AcquireAll(ctx(t), []string{"w16", "w64"}, sleeplock.NoWait(), sleeplock.WeightFor("w64", 64)); apart(l, "w16", "w64") {
		wantShardError(t, "AcquireAll of two shards", err)
	} else {
		refused(err, 64, 63, 64, "64 asked, 63 of 64 free")
	}
	must(t, one.Release(ctx(t)))

	// A plain request refused by a full lock still says so.
	define(t, l, "w1", 1)
	only, err := l.TryAcquire(ctx(t), "w1")
	must(t, err)
	b := busy(t, tryErr(l.TryAcquire(ctx(t), "w1")))
	if b.Weight != 1 || b.Free != 0 || b.Slots != 1 || !strings.Contains(b.Error(), "all slots are held") {
		t.Fatalf("refusal %+v (%q): want 1 asked, 0 of 1 free, \"all slots are held\"", *b, b.Error())
	}
	must(t, only.Release(ctx(t)))
})
