package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

var _ = add("Acquire/FIFO", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "fifo", 2)
	a, err := l.TryAcquire(ctx(t), "fifo")
	must(t, err)
	b, err := l.TryAcquire(ctx(t), "fifo")
	must(t, err)
	const n = 6
	ch := make(chan result, n)
	for i := range n {
		goAcquire(ctx(t), l, "fifo", i, ch)
		waitWaiting(t, l, "fifo", i+1)
	}
	// Free one slot at a time: each goes to the longest waiter.
	must(t, a.Release(ctx(t)))
	held := b
	for want := range n {
		r := <-ch
		must(t, r.err)
		if r.id != want {
			t.Fatalf("waiter %d was granted before waiter %d", r.id, want)
		}
		must(t, held.Release(ctx(t)))
		held = r.lease
	}
	must(t, held.Release(ctx(t)))
	wantState(t, l, "fifo", 0, 0)
})

var _ = add("Acquire/CancelLeavesQueueAtOnce", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "q", 1)
	h, err := l.TryAcquire(ctx(t), "q")
	must(t, err)
	ch := make(chan result, 3)
	cctx, cancel := context.WithCancel(ctx(t))
	goAcquire(ctx(t), l, "q", 0, ch)
	waitWaiting(t, l, "q", 1)
	goAcquire(cctx, l, "q", 1, ch)
	waitWaiting(t, l, "q", 2)
	goAcquire(ctx(t), l, "q", 2, ch)
	waitWaiting(t, l, "q", 3)
	cancel()
	r := <-ch
	if r.id != 1 || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the cancelled waiter returned %d %v, want 1 context.Canceled", r.id, r.err)
	}
	wantState(t, l, "q", 1, 2) // it left the queue at once
	must(t, h.Release(ctx(t)))
	r = <-ch
	if r.id != 0 || r.err != nil {
		t.Fatalf("got %d %v, want waiter 0", r.id, r.err)
	}
	must(t, r.lease.Release(ctx(t)))
	r = <-ch
	if r.id != 2 || r.err != nil {
		t.Fatalf("got %d %v, want waiter 2", r.id, r.err)
	}
	must(t, r.lease.Release(ctx(t)))
	wantState(t, l, "q", 0, 0)
})

var _ = add("Acquire/DeadlineReturnsContextError", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "d", 1)
	h, err := l.TryAcquire(ctx(t), "d")
	must(t, err)
	dctx, cancel := context.WithDeadline(ctx(t), deadlineSoon())
	defer cancel()
	_, err = l.Acquire(dctx, "d")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v", err)
	}
	wantState(t, l, "d", 1, 0)
	must(t, h.Release(ctx(t)))
	wantState(t, l, "d", 0, 0)
})

// CancelRacingGrantLeaksNothing cancels waiters while slots are handed to
// them: whatever each call returns, no slot is lost and none is doubled.
var _ = add("Acquire/CancelRacingGrantLeaksNothing", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "race", 1)
	for round := range 20 {
		h, err := l.TryAcquire(ctx(t), "race")
		must(t, err)
		cctx, cancel := context.WithCancel(ctx(t))
		ch := make(chan result, 1)
		goAcquire(cctx, l, "race", round, ch)
		waitWaiting(t, l, "race", 1)
		go cancel()
		must(t, h.Release(ctx(t)))
		r := <-ch
		cancel()
		if r.err == nil {
			must(t, r.lease.Release(ctx(t)))
		} else if !errors.Is(r.err, context.Canceled) {
			t.Fatal(r.err)
		}
		wantState(t, l, "race", 0, 0)
	}
})

var _ = add("TryAcquire/NeverWaitsNeverJumpsQueue", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "try", 1)
	h, err := l.TryAcquire(ctx(t), "try", sleeplock.Kind("job"))
	must(t, err)
	b := busy(t, func() error { _, err := l.TryAcquire(ctx(t), "try"); return err }())
	if b.Lock != "try" || b.Kind != "job" {
		t.Fatalf("refusal = %+v, want lock try held by a job", b)
	}
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "try", 0, ch)
	waitWaiting(t, l, "try", 1)
	must(t, h.Release(ctx(t)))
	// The slot is the waiter's: a try must not take it, however fast.
	if x, err := l.TryAcquire(ctx(t), "try"); err == nil {
		_ = x.Release(ctx(t))
		t.Fatal("TryAcquire took a slot a waiter was queued for")
	}
	r := <-ch
	must(t, r.err)
	must(t, r.lease.Release(ctx(t)))
	x, err := l.TryAcquire(ctx(t), "try")
	must(t, err)
	must(t, x.Release(ctx(t)))

	// A slot is free, but a caller queued first (for it and another lock)
	// could take it: a try must not.
	together(t, l, "try", "other")
	define(t, l, "other", 1)
	o, err := l.TryAcquire(ctx(t), "other")
	must(t, err)
	all := make(chan result, 1)
	go func() {
		lease, err := l.AcquireAll(ctx(t), []string{"try", "other"})
		all <- result{0, lease, err}
	}()
	waitWaiting(t, l, "try", 1)
	_, err = l.TryAcquire(ctx(t), "try")
	if b := busy(t, err); !b.Queued {
		t.Fatalf("refusal %+v should say the queue refused", b)
	}
	wantState(t, l, "try", 0, 1)
	must(t, o.Release(ctx(t)))
	r = <-all
	must(t, r.err)
	must(t, r.lease.Release(ctx(t)))
})

var _ = add("Execute/ReleasesOnReturnErrorAndPanic", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "ex", 1)
	got, err := sleeplock.Execute(ctx(t), l, "ex", func(ctx context.Context) (int, error) {
		wantState(t, l, "ex", 1, 0)
		return 42, nil
	})
	if got != 42 || err != nil {
		t.Fatalf("Execute = %d, %v", got, err)
	}
	wantState(t, l, "ex", 0, 0)
	boom := errors.New("boom")
	_, err = sleeplock.Execute(ctx(t), l, "ex", func(ctx context.Context) (string, error) { return "", boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Execute error = %v", err)
	}
	wantState(t, l, "ex", 0, 0)
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v, want the panic to continue", r)
			}
		}()
		_, _ = sleeplock.Execute(ctx(t), l, "ex", func(ctx context.Context) (int, error) { panic("kaboom") })
	}()
	wantState(t, l, "ex", 0, 0)
	if _, err := sleeplock.Execute(ctx(t), l, "missing", func(ctx context.Context) (int, error) { return 1, nil }); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("Execute on an unknown lock = %v", err)
	}
})

var _ = add("Execute/ContextEndsWithCaller", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "exc", 1)
	cctx, cancel := context.WithCancel(ctx(t))
	_, err := sleeplock.Execute(cctx, l, "exc", func(fctx context.Context) (int, error) {
		cancel()
		<-fctx.Done()
		return 0, context.Cause(fctx)
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("fn's context ended with %v, want the caller's cancellation", err)
	}
	wantState(t, l, "exc", 0, 0)
})

var _ = add("Reentrancy/SameRefGetsLeaseBack", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "re", 1)
	a, err := l.TryAcquire(ctx(t), "re", sleeplock.Ref("job-1"))
	must(t, err)
	// All slots are taken; the holder asks again, blocking and trying.
	b, err := l.Acquire(ctx(t), "re", sleeplock.Ref("job-1"))
	must(t, err)
	c, err := l.TryAcquire(ctx(t), "re", sleeplock.Ref("job-1"))
	must(t, err)
	if !b.Reentered() || !c.Reentered() || b.Token() != a.Token() || a.Reentered() {
		t.Fatalf("re-entrant leases: %v %v tokens %d %d %d", b.Reentered(), c.Reentered(), a.Token(), b.Token(), c.Token())
	}
	wantState(t, l, "re", 1, 0)
	must(t, c.Release(ctx(t))) // one release frees it
	wantState(t, l, "re", 0, 0)
	if err := a.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("second release = %v", err)
	}
	evs := rec.waitN(t, 3)
	if got := types(evs); fmt.Sprint(got) != "[created:re acquired:re released:re]" {
		t.Fatalf("events = %v: a re-entrant acquire and a no-op release send none", got)
	}
})

// A ref names one holder wherever it is used: a second Locks value on the
// same store (another node where the store is shared) asking with the ref
// gets the hold back, and its release frees the hold (issue 29, A2: the
// library's default; sleeplock run refuses it unless --reenter).
var _ = add("Reentrancy/SameRefAcrossLocksValues", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "rx", 1)
	other := s
	if e.h.Reopen != nil {
		other = e.h.Reopen(t, s)
		t.Cleanup(func() { _ = other.Close() })
	}
	two := sleeplock.New(other) // not closed: on one store, l closes it
	a, err := l.TryAcquire(ctx(t), "rx", sleeplock.Ref("job"))
	must(t, err)
	b, err := two.TryAcquire(ctx(t), "rx", sleeplock.Ref("job"))
	must(t, err)
	if !b.Reentered() || b.Token() != a.Token() {
		t.Fatalf("the same ref through another Locks: reentered %v, token %d, want the hold's %d", b.Reentered(), b.Token(), a.Token())
	}
	wantState(t, l, "rx", 1, 0)
	must(t, b.Release(ctx(t)))
	wantState(t, l, "rx", 0, 0)
	if err := a.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("the first release after the other's = %v, want ErrNotHeld", err)
	}
})

var _ = add("Reentrancy/Counted", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "cnt", 1)
	a, err := l.TryAcquire(ctx(t), "cnt", sleeplock.Ref("r"), sleeplock.Counted())
	must(t, err)
	_, err = l.Acquire(ctx(t), "cnt", sleeplock.Ref("r"), sleeplock.Counted())
	must(t, err)
	must(t, a.Release(ctx(t)))
	wantState(t, l, "cnt", 1, 0)
	must(t, a.Release(ctx(t)))
	wantState(t, l, "cnt", 0, 0)
})

var _ = add("Release/ByNonHolderIsNoOp", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "rel", 2)
	a, err := l.TryAcquire(ctx(t), "rel", sleeplock.Ref("a"))
	must(t, err)
	other, err := l.LeaseOf("b", []string{"rel"})
	must(t, err)
	if err := other.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("release by a non-holder = %v", err)
	}
	if err := (sleeplock.Lease{}).Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("release of the zero lease = %v", err)
	}
	wantState(t, l, "rel", 1, 0)
	must(t, a.Release(ctx(t)))
	if err := a.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("second release = %v", err)
	}
	// A new holder with the same ref is not freed by the old lease.
	b, err := l.TryAcquire(ctx(t), "rel", sleeplock.Ref("a"))
	must(t, err)
	if err := a.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("an old lease released a newer grant of its ref: %v", err)
	}
	wantState(t, l, "rel", 1, 0)
	must(t, b.Release(ctx(t)))
})

var _ = add("Holder/BoundContextEndFreesSlot", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "bind", 1)
	hctx, cancel := context.WithCancel(ctx(t))
	h, err := l.TryAcquire(ctx(t), "bind", sleeplock.BindTo(hctx))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "bind", 0, ch)
	waitWaiting(t, l, "bind", 1)
	cancel() // the holder "dies"
	r := <-ch
	must(t, r.err)
	<-h.Done()
	if held, err := h.Held(ctx(t)); err != nil || held {
		t.Fatalf("the dead holder still holds: %v %v", held, err)
	}
	must(t, r.lease.Release(ctx(t)))
})

var _ = add("Independence/FaultInOneLockSparesOthers", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "a", 1)
	define(t, l, "b", 1)
	h, err := l.TryAcquire(ctx(t), "a")
	must(t, err)
	cctx, cancel := context.WithCancel(ctx(t))
	ch := make(chan result, 1)
	goAcquire(cctx, l, "a", 0, ch)
	waitWaiting(t, l, "a", 1)
	func() {
		defer func() { _ = recover() }()
		_, _ = sleeplock.Execute(ctx(t), l, "a", func(context.Context) (int, error) { panic("x") }, sleeplock.NoWait())
	}()
	cancel()
	<-ch
	x, err := l.TryAcquire(ctx(t), "b")
	must(t, err)
	wantState(t, l, "b", 1, 0)
	wantState(t, l, "a", 1, 0)
	must(t, x.Release(ctx(t)))
	must(t, h.Release(ctx(t)))
})

var _ = add("AcquireAll/AllOrNothingFirstRefusedInCallersOrder", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	together(t, l, "chat/42", "user/7")
	define(t, l, "chat/*", 1)
	define(t, l, "user/*", 1)
	turn, err := l.TryAcquire(ctx(t), "user/7", sleeplock.Kind("turn"))
	must(t, err)
	_, err = l.AcquireAll(ctx(t), []string{"chat/42", "user/7"}, sleeplock.NoWait(), sleeplock.Kind("turn"))
	b := busy(t, err)
	if b.Lock != "user/7" || b.Kind != "turn" {
		t.Fatalf("refusal %+v, want user/7 held by a turn", b)
	}
	wantState(t, l, "chat/42", 0, 0) // nothing taken
	other, err := l.TryAcquire(ctx(t), "chat/9", sleeplock.Kind("click"))
	must(t, err)
	_, err = l.AcquireAll(ctx(t), []string{"chat/9", "user/7"}, sleeplock.NoWait())
	if b := busy(t, err); b.Lock != "chat/9" || b.Kind != "click" {
		t.Fatalf("refusal %+v, want the first lock in the caller's order (chat/9)", b)
	}
	_, err = l.AcquireAll(ctx(t), []string{"user/7", "chat/9"}, sleeplock.NoWait())
	if b := busy(t, err); b.Lock != "user/7" {
		t.Fatalf("refusal %+v, want user/7 first", b)
	}
	must(t, turn.Release(ctx(t)))
	both, err := l.AcquireAll(ctx(t), []string{"chat/42", "user/7"}, sleeplock.NoWait(), sleeplock.Ref("t1"))
	must(t, err)
	if got := both.Names(); len(got) != 2 || got[0] != "chat/42" || got[1] != "user/7" {
		t.Fatalf("Names = %v", got)
	}
	if tk := both.Tokens(); tk[0] == 0 || tk[1] == 0 {
		t.Fatalf("tokens %v", tk)
	}
	wantState(t, l, "user/7", 1, 0)
	must(t, both.Release(ctx(t)))
	wantState(t, l, "chat/42", 0, 0)
	wantState(t, l, "user/7", 0, 0)
	must(t, other.Release(ctx(t)))
})

var _ = add("AcquireAll/BadInput", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "x", 1)
	if _, err := l.AcquireAll(ctx(t), nil); !errors.Is(err, sleeplock.ErrInvalidLocks) {
		t.Fatalf("AcquireAll(nil) = %v", err)
	}
	if _, err := l.AcquireAll(ctx(t), []string{"x", "x"}); !errors.Is(err, sleeplock.ErrInvalidLocks) {
		t.Fatalf("AcquireAll with a lock twice = %v", err)
	}
	if _, err := l.AcquireAll(ctx(t), []string{"x", ""}); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("AcquireAll with an empty name = %v", err)
	}
	wantState(t, l, "x", 0, 0)
})

var _ = add("AcquireAll/WaitsAndNeverDeadlocks", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	names := []string{"r1", "r2", "r3"}
	together(t, l, names...)
	for _, n := range names {
		define(t, l, n, 1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 8 {
				pick := append([]string(nil), names...)
				rng.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
				lease, err := l.AcquireAll(ctx(t), pick[:2+rng.IntN(2)])
				if err != nil {
					errs <- err
					return
				}
				if err := lease.Release(ctx(t)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, n := range names {
		wantState(t, l, n, 0, 0)
	}
})

var _ = add("AcquireAll/ReentrantLocksCountAsTaken", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	together(t, l, "c", "u")
	define(t, l, "c", 1)
	define(t, l, "u", 1)
	c, err := l.TryAcquire(ctx(t), "c", sleeplock.Ref("t"))
	must(t, err)
	both, err := l.AcquireAll(ctx(t), []string{"c", "u"}, sleeplock.Ref("t"), sleeplock.NoWait())
	must(t, err)
	if both.Tokens()[0] != c.Token() || both.Reentered() {
		t.Fatalf("tokens %v (first should be %d), reentered %v", both.Tokens(), c.Token(), both.Reentered())
	}
	must(t, both.Release(ctx(t)))
	wantState(t, l, "c", 0, 0)
	wantState(t, l, "u", 0, 0)
})

var _ = add("Tokens/GrowAndAreNeverReused", func(t *testing.T, e *env) {
	// A lock's tokens grow with every grant of that lock (tokens of
	// different locks need not be ordered). A family member is forgotten
	// when idle (here after each release): made again, by use or by a
	// definition of its own, it still never grants a token it granted.
	l, _ := e.locks(t)
	define(t, l, "tok", 2)
	define(t, l, "fam/*", 1)
	last := map[string]int64{}
	grant := func(name string) {
		t.Helper()
		x, err := l.TryAcquire(ctx(t), name)
		must(t, err)
		if x.Token() <= last[name] {
			t.Fatalf("%s: token %d after %d", name, x.Token(), last[name])
		}
		last[name] = x.Token()
		must(t, x.Release(ctx(t)))
	}
	for range 10 {
		for _, name := range []string{"tok", "fam/1", "fam/2", "fam/1"} {
			grant(name)
		}
	}
	define(t, l, "fam/1", 1)
	grant("fam/1")
	grant("fam/1")
})

var _ = add("State/HoldersAndQueue", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "st", 1)
	h, err := l.TryAcquire(ctx(t), "st", sleeplock.Ref("holder-1"), sleeplock.Kind("turn"))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "st", 0, ch, sleeplock.Ref("waiter-1"), sleeplock.Kind("click"))
	waitWaiting(t, l, "st", 1)
	st := state(t, l, "st")
	if st.Slots != 1 || st.Running != 1 || st.Waiting != 1 || len(st.Holders) != 1 || len(st.Queue) != 1 {
		t.Fatalf("state %+v", st)
	}
	if hd := st.Holders[0]; hd.Ref != "holder-1" || hd.Kind != "turn" || hd.Token != h.Token() || hd.Count != 1 {
		t.Fatalf("holder %+v", hd)
	}
	if w := st.Queue[0]; w.Ref != "waiter-1" || w.Kind != "click" || len(w.Locks) != 1 || w.Locks[0] != "st" {
		t.Fatalf("waiter %+v", w)
	}
	plain, err := l.State(ctx(t), "st")
	must(t, err)
	if plain.Holders != nil || plain.Queue != nil || plain.Running != 1 {
		t.Fatalf("State without detail: %+v", plain)
	}
	must(t, h.Release(ctx(t)))
	r := <-ch
	must(t, r.err)
	must(t, r.lease.Release(ctx(t)))
	if _, err := l.State(ctx(t), "bad\x01"); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("State of a bad name = %v", err)
	}
})

var _ = add("Input/BadOptionsChangeNothing", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "in", 1)
	cases := []struct {
		opts []sleeplock.AcquireOption
		want error
	}{
		{[]sleeplock.AcquireOption{sleeplock.TTL(0)}, sleeplock.ErrInvalidTTL},
		{[]sleeplock.AcquireOption{sleeplock.TTL(-1)}, sleeplock.ErrInvalidTTL},
		{[]sleeplock.AcquireOption{sleeplock.TTL(10), sleeplock.Hold(11)}, sleeplock.ErrInvalidHold},
		{[]sleeplock.AcquireOption{sleeplock.TTL(10), sleeplock.Hold(0)}, sleeplock.ErrInvalidHold},
		{[]sleeplock.AcquireOption{sleeplock.Ref("")}, sleeplock.ErrInvalidRef},
		{[]sleeplock.AcquireOption{sleeplock.Ref("a\nb")}, sleeplock.ErrInvalidRef},
		{[]sleeplock.AcquireOption{sleeplock.Kind("k\x7f")}, sleeplock.ErrInvalidRef},
	}
	for i, c := range cases {
		if _, err := l.TryAcquire(ctx(t), "in", c.opts...); !errors.Is(err, c.want) || !errors.Is(err, sleeplock.ErrInvalid) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
	wantState(t, l, "in", 0, 0)
	if _, err := l.TryAcquire(ctx(t), ""); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("empty name: %v", err)
	}
})

var _ = add("Close/WaitersReturnErrClosed", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "cl", 1)
	define(t, l, "kept", 1)
	_, err := l.TryAcquire(ctx(t), "cl")
	must(t, err)
	kept, err := l.TryAcquire(ctx(t), "kept", sleeplock.TTL(time.Minute))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "cl", 0, ch)
	waitWaiting(t, l, "cl", 1)
	must(t, l.Close())
	if r := <-ch; !errors.Is(r.err, sleeplock.ErrClosed) {
		t.Fatalf("a waiter of a closed store returned %v, want ErrClosed", r.err)
	}
	<-kept.Done() // its keep-alive ended with the Locks
	if !errors.Is(kept.Err(), sleeplock.ErrLeaseLost) {
		t.Fatalf("a kept-alive lease after Close: %v", kept.Err())
	}
	if _, err := l.TryAcquire(ctx(t), "cl"); !errors.Is(err, sleeplock.ErrClosed) {
		t.Fatalf("TryAcquire after Close = %v", err)
	}
})

// Tokens grow with every grant of a lock also when callers race: each
// grant of a one-slot lock is seen (while held) after the previous one was
// released, so its token must be the larger.
var _ = add("Tokens/GrowUnderRacingGrants", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "race/*", 1)
	var mu sync.Mutex
	last := map[string]int64{}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				name := fmt.Sprintf("race/%d", (c+i)%2)
				lease, err := l.TryAcquire(ctx(t), name, sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
				if errors.Is(err, sleeplock.ErrUnavailable) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if lease.Token() <= last[name] {
					t.Errorf("%s granted with token %d after %d", name, lease.Token(), last[name])
				}
				last[name] = lease.Token()
				mu.Unlock()
				if err := lease.Release(ctx(t)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
})
