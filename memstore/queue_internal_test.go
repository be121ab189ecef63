package memstore

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sleeplock/sleeplock/store"
)

// The queue's window: random arrivals, grants from the head and cancels
// from anywhere keep it equal to a plain FIFO list, the array past the
// window holds no waiter (a gone waiter is not kept alive), and a queue
// that never grows past its longest length stops allocating.
func TestQueueWindowIsFIFO(t *testing.T) {
	lk := &lock{}
	var model []*waiter
	check := func(step int) {
		t.Helper()
		q := lk.waits()
		if !slices.Equal(q, model) {
			t.Fatalf("step %d: queue %v, want %v", step, q, model)
		}
		if lk.queue == nil {
			return
		}
		all := lk.queue.buf[:cap(lk.queue.buf)]
		off := cap(all) - cap(q)
		if off < 0 || off+len(q) > len(all) || (len(q) > 0 && &all[off] != &q[0]) {
			t.Fatalf("step %d: the window is not in the array", step)
		}
		for i, w := range all {
			if (i < off || i >= off+len(q)) && w != nil {
				t.Fatalf("step %d: slot %d outside the window keeps a waiter", step, i)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 20_000 {
		switch r := rng.IntN(10); {
		case r < 5 && len(model) < 40:
			w := &waiter{}
			lk.enqueue(w)
			model = append(model, w)
		case r < 9 && len(model) > 0:
			lk.dequeue(model[0])
			model = model[1:]
		case len(model) > 0:
			i := rng.IntN(len(model))
			lk.dequeue(model[i])
			model = slices.Delete(model, i, i+1)
		}
		check(step)
	}

	// Steady churn: one out at the head, one in at the back.
	for range 64 {
		lk.enqueue(&waiter{})
	}
	spare := make([]*waiter, 64)
	for i := range spare {
		spare[i] = &waiter{}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, w := range spare {
			lk.dequeue(lk.waits()[0])
			lk.enqueue(w)
		}
	})
	if allocs != 0 {
		t.Fatalf("a queue of steady length allocates %.1f times per 64 grants", allocs)
	}

	// A burst longer than keptQueue leaves no array behind once it is
	// granted; a shorter one leaves its array for the next.
	for len(lk.waits()) > 0 {
		lk.dequeue(lk.waits()[0])
	}
	if lk.queue.buf == nil {
		t.Fatal("an empty queue let go of a short array")
	}
	for range keptQueue + 1 {
		lk.enqueue(&waiter{})
	}
	for len(lk.waits()) > 0 {
		lk.dequeue(lk.waits()[0])
	}
	if lk.queue.buf != nil || lk.queue.ws != nil {
		t.Fatalf("an empty queue keeps an array of %d", cap(lk.queue.buf))
	}
	w := &waiter{}
	lk.enqueue(w)
	if q := lk.waits(); len(q) != 1 || q[0] != w {
		t.Fatalf("after the burst: %v", q)
	}
}

// The queue's sums: the slots a whole queue asks (ahead of a caller about
// to join it) stay equal to the sum of its waiters' needs through random
// arrivals and leavings of light, heavy and exclusive waiters, and
// resizes, as a walk of the queue counts them.
func TestQueueAheadSums(t *testing.T) {
	lk := &lock{slots: 8}
	var model []*waiter
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 20_000 {
		switch r := rng.IntN(10); {
		case r < 5 && len(model) < 40:
			w := &waiter{}
			w.one[0] = lk
			w.locks = w.one[:]
			switch k := rng.IntN(6); k {
			case 0:
				w.heavy, w.pw = true, store.WeightAll
			case 1, 2:
			default:
				w.heavy, w.pw = true, int32(k)
			}
			lk.enqueue(w)
			model = append(model, w)
		case r < 8 && len(model) > 0:
			i := rng.IntN(min(len(model), 2))
			lk.dequeue(model[i])
			model = slices.Delete(model, i, i+1)
		case r < 9 && len(model) > 0:
			i := rng.IntN(len(model))
			lk.dequeue(model[i])
			model = slices.Delete(model, i, i+1)
		default:
			lk.slots = int32(1 + rng.IntN(12))
		}
		want := 0
		for _, w := range model {
			want += w.need(lk)
		}
		if got := lk.ahead(len(lk.waits())); got != want {
			t.Fatalf("step %d: the queue asks %d slots, want %d", step, got, want)
		}
	}
}
