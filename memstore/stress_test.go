package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// stressLocks are the locks of the stress tests: one- and two-slot locks.
var stressLocks = []struct {
	name  string
	slots int
}{{"s0", 1}, {"s1", 2}, {"s2", 1}, {"s3", 2}, {"s4", 1}}

// stressTime is how long each stress test runs.
const stressTime = 2 * time.Second

// inUse counts the callers that believe they hold a slot of each lock.
type inUse struct {
	n [5]atomic.Int32 // one per stressLocks
}

func (u *inUse) enter(t *testing.T, i int) {
	if n := u.n[i].Add(1); int(n) > stressLocks[i].slots {
		t.Errorf("%s: %d holders of %d slots", stressLocks[i].name, n, stressLocks[i].slots)
	}
}

func (u *inUse) exit(i int) { u.n[i].Add(-1) }

// AcquireAll of random pairs against single-lock acquisitions of the same
// locks, every caller waiting, with events: never more holders than slots,
// and replaying each lock's events in Seq order shows every grant made in
// FIFO order — a grant from the queue went to a waiter with fewer waiters
// ahead of it than slots were free, and a grant to a newcomer found fewer
// waiters than free slots (the all-or-nothing waiters rule).
func TestStressAcquireAllAgainstSingleFIFO(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ev := &events{}
	ctx := context.Background()
	for _, l := range stressLocks {
		if _, err := s.Define(ctx, l.name, l.slots, nil); err != nil {
			t.Fatal(err)
		}
	}
	var use inUse
	var ops atomic.Int64
	deadline := time.Now().Add(stressTime)
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for n := 0; time.Now().Before(deadline); n++ {
				ref := store.RefOf(fmt.Sprintf("g%d-%d", g, n))
				i := rng.IntN(len(stressLocks))
				req := store.AcquireRequest{Name: stressLocks[i].name, Ref: ref, Wait: true, Events: ev}
				idx := []int{i}
				if g%2 == 0 {
					j := (i + 1 + rng.IntN(len(stressLocks)-1)) % len(stressLocks)
					req.More, idx = []string{stressLocks[j].name}, append(idx, j)
				}
				gr, err := s.Acquire(ctx, req)
				if err != nil {
					t.Error(err)
					return
				}
				for _, k := range idx {
					use.enter(t, k)
				}
				for _, k := range idx {
					use.exit(k)
				}
				if err := s.Release(ctx, gr.Handle(), ev); err != nil {
					t.Error(err)
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d events", ops.Load(), len(ev.all()))
	checkFIFO(t, ev.all())
	for _, l := range stressLocks {
		st, err := s.State(ctx, l.name, false)
		if err != nil || st.Running != 0 || st.Waiting != 0 {
			t.Errorf("%s at the end: %+v %v", l.name, st, err)
		}
	}
}

// checkFIFO replays each lock's events in Seq order.
func checkFIFO(t *testing.T, evs []store.Event) {
	t.Helper()
	slots := map[string]int{}
	for _, l := range stressLocks {
		slots[l.name] = l.slots
	}
	byLock := map[string][]store.Event{}
	for _, e := range evs {
		byLock[e.Lock] = append(byLock[e.Lock], e)
	}
	for name, evs := range byLock {
		slices.SortFunc(evs, func(a, b store.Event) int { return int(a.Seq) - int(b.Seq) })
		var queue []string
		running := 0
		for k, e := range evs {
			switch e.Type {
			case store.EventWaiting:
				queue = append(queue, e.Ref)
			case store.EventAcquired:
				free := slots[name] - running
				p := slices.Index(queue, e.Ref)
				switch {
				case p >= 0 && p >= free:
					t.Fatalf("%s event %d: %s granted from queue position %d with %d slots free", name, k, e.Ref, p, free)
				case p < 0 && len(queue) >= free:
					t.Fatalf("%s event %d: newcomer %s granted past %d waiters with %d slots free", name, k, e.Ref, len(queue), free)
				}
				if p >= 0 {
					queue = slices.Delete(queue, p, p+1)
				}
				running++
			case store.EventReleased:
				running--
			}
			if e.Type != store.EventRefused && (e.Running != running || e.Waiting != len(queue)) {
				t.Fatalf("%s event %d (%v): running %d waiting %d, replay says %d and %d", name, k, e.Type, e.Running, e.Waiting, running, len(queue))
			}
		}
	}
}

// The same traffic without events, through the plain fast path, with
// waits that give up (a cancelled context) and tries: never more holders
// than slots, nothing left over.
func TestStressAcquireAllAgainstPlain(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	for _, l := range stressLocks {
		if _, err := s.Define(ctx, l.name, l.slots, nil); err != nil {
			t.Fatal(err)
		}
	}
	var use inUse
	var granted, gaveUp atomic.Int64
	deadline := time.Now().Add(stressTime)
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for time.Now().Before(deadline) {
				i := rng.IntN(len(stressLocks))
				wctx, cancel := context.WithCancel(ctx)
				if rng.IntN(4) == 0 {
					cancel() // sometimes before, sometimes while waiting
					wctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(50))*time.Microsecond)
				}
				var release func() error
				var idx []int
				switch g % 3 {
				case 0:
					j := (i + 1 + rng.IntN(len(stressLocks)-1)) % len(stressLocks)
					gr, err := s.Acquire(wctx, store.AcquireRequest{Name: stressLocks[i].name, More: []string{stressLocks[j].name},
						Ref: store.NewRef(), Wait: rng.IntN(3) > 0})
					if err == nil {
						idx, release = []int{i, j}, func() error { return s.Release(ctx, gr.Handle(), nil) }
					} else if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
					}
				default:
					slot, token, err := s.Plain().Acquire(wctx, stressLocks[i].name, g%3 == 1)
					if err == nil {
						idx, release = []int{i}, func() error { return slot.Release(token) }
					} else if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
					}
				}
				cancel()
				if release == nil {
					gaveUp.Add(1)
					continue
				}
				for _, k := range idx {
					use.enter(t, k)
				}
				for _, k := range idx {
					use.exit(k)
				}
				if err := release(); err != nil {
					t.Error(err)
				}
				granted.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d granted, %d refused or gave up", granted.Load(), gaveUp.Load())
	if granted.Load() == 0 {
		t.Fatal("nothing granted")
	}
	for _, l := range stressLocks {
		st, err := s.State(ctx, l.name, false)
		if err != nil || st.Running != 0 || st.Waiting != 0 {
			t.Errorf("%s at the end: %+v %v", l.name, st, err)
		}
	}
}

// Weighted plain leases on a lock whose state is read all the while
// (State and Stats freeze its fast word, whose holders become records
// that the word is made again beside): the slots held never pass the
// lock's, State's running slots are its holders' weights, and the counts
// come out exact.
func TestStressWordBesideRecords(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	const slots = 6
	if _, err := s.Define(ctx, "w", slots, nil); err != nil {
		t.Fatal(err)
	}
	var held, granted atomic.Int64
	deadline := time.Now().Add(stressTime)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for time.Now().Before(deadline) {
				k := 1 + rng.IntN(3)
				l, token, err := s.Plain().AcquireWeighted(ctx, "w", k, rng.IntN(4) > 0)
				if errors.Is(err, store.ErrUnavailable) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if n := held.Add(int64(k)); n > slots {
					t.Errorf("%d slots held of %d", n, slots)
				}
				held.Add(-int64(k))
				if err := l.Release(token); err != nil {
					t.Error(err)
				}
				granted.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(deadline) {
			st, err := s.State(ctx, "w", true)
			if err != nil {
				t.Error(err)
				return
			}
			sum := 0
			for _, h := range st.Holders {
				sum += h.Weight
			}
			if st.Running > slots || sum != st.Running {
				t.Errorf("state: %d running of %d slots, holders' weights %d", st.Running, slots, sum)
			}
			if _, err := s.Stats(ctx); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	st, err := s.State(ctx, "w", false)
	if err != nil || st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("at the end: %+v %v", st, err)
	}
	stats, err := s.Stats(ctx)
	if err != nil || len(stats) != 1 || stats[0].Acquisitions != uint64(granted.Load()) || stats[0].Releases != stats[0].Acquisitions {
		t.Fatalf("stats %+v (%d granted), %v", stats, granted.Load(), err)
	}
	t.Logf("%d granted", granted.Load())
}
