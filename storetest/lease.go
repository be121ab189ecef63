package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

var _ = add("TTL/TakenOverOnlyAfterExpiryOnStoreClock", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, s := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "ttl", 1)
	a, err := l.TryAcquire(ctx(t), "ttl", sleeplock.TTL(10*time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("dead-node"))
	must(t, err)
	if a.Expires().IsZero() {
		t.Fatal("a lease with a TTL has no expiry")
	}
	e.advance(t, s, 9*time.Minute)
	if _, err := l.TryAcquire(ctx(t), "ttl"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("taken over before its TTL: %v", err)
	}
	e.advance(t, s, 2*time.Minute)
	b, err := l.TryAcquire(ctx(t), "ttl", sleeplock.TTL(10*time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d", b.Token(), a.Token())
	}
	wantState(t, l, "ttl", 1, 0)
	// The old holder: not held, its late release and renewal change nothing.
	if held, err := a.Held(ctx(t)); err != nil || held {
		t.Fatalf("old holder Held = %v %v", held, err)
	}
	if err := a.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("late release = %v", err)
	}
	if err := a.Keep(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("late keep = %v", err)
	}
	if held, err := b.Held(ctx(t)); err != nil || !held {
		t.Fatalf("new holder lost its lease to a late release: %v %v", held, err)
	}
	select {
	case <-a.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the old lease's Done was not closed")
	}
	if !errors.Is(context.Cause(a.Context()), sleeplock.ErrLeaseLost) {
		t.Fatalf("cause = %v", context.Cause(a.Context()))
	}
	var expired *sleeplock.Event
	waitFor(t, "an expired event", func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Type == sleeplock.EventExpired {
				expired = &ev
				return true
			}
		}
		return false
	})
	if expired.Lock != "ttl" || expired.Ref != "dead-node" || expired.Token != a.Token() {
		t.Fatalf("expired event %+v", *expired)
	}
	must(t, b.Release(ctx(t)))
})

var _ = add("TTL/WaiterGetsExpiredSlot", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "tw", 1)
	_, err := l.TryAcquire(ctx(t), "tw", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "tw", 0, ch, sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	waitWaiting(t, l, "tw", 1)
	e.advance(t, s, 2*time.Minute)
	r := <-ch
	must(t, r.err)
	wantState(t, l, "tw", 1, 0)
	must(t, r.lease.Release(ctx(t)))
})

var _ = add("Keep/OnlyTheHolderRenews", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "keep", 1)
	a, err := l.TryAcquire(ctx(t), "keep", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("a"))
	must(t, err)
	e.advance(t, s, 50*time.Second)
	must(t, a.Keep(ctx(t)))
	e.advance(t, s, 50*time.Second) // 100 s after the grant, 50 s after the renewal
	if _, err := l.TryAcquire(ctx(t), "keep"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a renewed lease was taken over: %v", err)
	}
	stranger, err := l.LeaseOf("b", []string{"keep"}, sleeplock.TTL(time.Hour))
	must(t, err)
	if err := stranger.Keep(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("Keep by a non-holder = %v", err)
	}
	e.advance(t, s, 11*time.Second)
	b, err := l.TryAcquire(ctx(t), "keep", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("b"))
	must(t, err) // the stranger's Keep did not extend a's lease
	if err := a.Keep(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("Keep after takeover = %v (must never upsert)", err)
	}
	st, err := b.Status(ctx(t))
	must(t, err)
	if !st.Held || st.Expires.Sub(st.Now) > time.Minute {
		t.Fatalf("new holder's status %+v", st)
	}
	must(t, b.Release(ctx(t)))
})

// A ref that took two locks with two single-lock acquisitions holds both:
// a lease naming both (LeaseOf) is held, renews both, and keeps the
// holds' tokens; once one is released it is neither held nor renewed.
var _ = add("Keep/LeaseOfSeveralLocksTakenApart", func(t *testing.T, e *env) {
	leaseOfLocksTakenApart(t, e, "apart", 1)
})

// The same with locks of two slots, the ref holding the second slot of
// each.
var _ = add("Keep/LeaseOfSeveralLocksInSecondSlots", func(t *testing.T, e *env) {
	leaseOfLocksTakenApart(t, e, "slot", 2)
})

// leaseOfLocksTakenApart runs the Keep/LeaseOfSeveralLocks… tests on two
// locks prefix-a and prefix-b of slots slots, the other slots held by
// another ref for an hour.
func leaseOfLocksTakenApart(t *testing.T, e *env, prefix string, slots int) {
	l, s := e.locks(t)
	names := []string{prefix + "-a", prefix + "-b"}
	together(t, l, names...)
	var others []sleeplock.Lease
	for _, n := range names {
		define(t, l, n, slots)
		for range slots - 1 {
			o, err := l.TryAcquire(ctx(t), n, sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive(), sleeplock.Ref("other"))
			must(t, err)
			others = append(others, o)
		}
	}
	a, err := l.TryAcquire(ctx(t), names[0], sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("r"))
	must(t, err)
	b, err := l.TryAcquire(ctx(t), names[1], sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("r"))
	must(t, err)
	both, err := l.LeaseOf("r", names, sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	st, err := both.Status(ctx(t))
	must(t, err)
	if !st.Held {
		t.Fatalf("a lease of two locks the ref holds: %+v", st)
	}
	e.advance(t, s, 50*time.Second)
	must(t, both.Keep(ctx(t)))
	e.advance(t, s, 50*time.Second) // 100 s after the grants, 50 s after the renewal
	for _, n := range names {
		if _, err := l.TryAcquire(ctx(t), n); !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatalf("%s, renewed through the lease of both, was taken over: %v", n, err)
		}
	}
	must(t, a.Keep(ctx(t)))
	must(t, b.Release(ctx(t)))
	st, err = both.Status(ctx(t))
	must(t, err)
	if st.Held {
		t.Fatalf("a lease of two locks, one released, is held: %+v", st)
	}
	if err := both.Keep(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("Keep of a lease of two locks, one released = %v", err)
	}
	must(t, a.Release(ctx(t)))
	for _, o := range others {
		must(t, o.Release(ctx(t)))
	}
}

var _ = add("Hold/ShorterThanTTLDatedBack", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "user/*", 1)
	click, err := l.TryAcquire(ctx(t), "user/7", sleeplock.Kind("click"), sleeplock.TTL(10*time.Minute),
		sleeplock.Hold(30*time.Second), sleeplock.NoKeepAlive())
	must(t, err)
	st, err := click.Status(ctx(t))
	must(t, err)
	if d := st.Now.Sub(st.Renewed); d < 9*time.Minute {
		t.Fatalf("a hold of 30 s of a 10 min TTL is dated back by 9.5 min, got %v", d)
	}
	e.advance(t, s, 20*time.Second)
	must(t, click.Keep(ctx(t))) // the click runs longer than its hold
	e.advance(t, s, 20*time.Second)
	_, err = l.TryAcquire(ctx(t), "user/7", sleeplock.Kind("turn"), sleeplock.TTL(10*time.Minute))
	if b := busy(t, err); b.Kind != "click" {
		t.Fatalf("refused by %q, want click", b.Kind)
	}
	e.advance(t, s, 11*time.Second)
	turn, err := l.TryAcquire(ctx(t), "user/7", sleeplock.Kind("turn"), sleeplock.TTL(10*time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	must(t, turn.Release(ctx(t)))
})

var _ = add("ReleaseStale/OnlyExpiredAndAtMostOneWinner", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	names := []string{"chat/1", "user/1"}
	together(t, l, names...)
	define(t, l, "chat/*", 1)
	define(t, l, "user/*", 1)
	_, err := l.AcquireAll(ctx(t), names, sleeplock.Ref("turn-1"), sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	if ok, err := l.ReleaseStale(ctx(t), "turn-1", names, 0); ok || err != nil {
		t.Fatalf("a fresh lease was released as stale: %v %v", ok, err)
	}
	if ok, err := l.ReleaseStale(ctx(t), "turn-1", names, 30*time.Second); ok || err != nil {
		t.Fatalf("a 0 s old lease is not older than 30 s: %v %v", ok, err)
	}
	e.advance(t, s, 2*time.Minute)
	if ok, err := l.ReleaseStale(ctx(t), "other", names, 0); ok || err != nil {
		t.Fatalf("another ref's stale release: %v %v", ok, err)
	}
	wantExpired(t, l, "chat/1", 0, 1)
	var wg sync.WaitGroup
	wins := make(chan bool, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := l.ReleaseStale(ctx(t), "turn-1", names, 0)
			if err != nil {
				t.Error(err)
			}
			wins <- ok
		}()
	}
	wg.Wait()
	close(wins)
	n := 0
	for ok := range wins {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d callers released the stale lease, want exactly 1", n)
	}
	wantState(t, l, "chat/1", 0, 0)
	wantState(t, l, "user/1", 0, 0)
})

var _ = add("ReleaseStale/UserLockGoesOnlyIfStillHeld", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	together(t, l, "chat/1", "user/1")
	define(t, l, "chat/*", 1)
	define(t, l, "user/*", 1)
	_, err := l.AcquireAll(ctx(t), []string{"chat/1", "user/1"}, sleeplock.Ref("turn-1"), sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	e.advance(t, s, 2*time.Minute)
	// Someone else took the user's lock over meanwhile.
	other, err := l.TryAcquire(ctx(t), "user/1", sleeplock.Ref("turn-2"), sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	ok, err := l.ReleaseStale(ctx(t), "turn-1", []string{"chat/1", "user/1"}, 0)
	if !ok || err != nil {
		t.Fatalf("ReleaseStale = %v %v", ok, err)
	}
	wantState(t, l, "chat/1", 0, 0)
	if held, err := other.Held(ctx(t)); !held || err != nil {
		t.Fatalf("the newer holder of the user's lock was released: %v %v", held, err)
	}
})

var _ = add("Lost/KeepAliveSignalsTakeover", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "lost", 1)
	a, err := l.TryAcquire(ctx(t), "lost", sleeplock.TTL(300*time.Millisecond), sleeplock.Ref("victim"))
	must(t, err)
	if a.Err() != nil {
		t.Fatalf("a fresh lease reports %v", a.Err())
	}
	// An operator releases it by ref: the holder must learn it.
	op, err := l.LeaseOf("victim", []string{"lost"})
	must(t, err)
	must(t, op.Release(ctx(t)))
	select {
	case <-a.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done not closed after the lease was lost")
	}
	if !errors.Is(a.Err(), sleeplock.ErrLeaseLost) || !errors.Is(context.Cause(a.Context()), sleeplock.ErrLeaseLost) {
		t.Fatalf("lost lease: Err %v, cause %v", a.Err(), context.Cause(a.Context()))
	}
	waitFor(t, "a lost event", func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Type == sleeplock.EventLost && ev.Lock == "lost" && ev.Ref == "victim" && errors.Is(ev.Reason, sleeplock.ErrLeaseLost) {
				return true
			}
		}
		return false
	})
	if err := a.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("release of a lost lease = %v", err)
	}
})

var _ = add("Lost/KeepAliveHoldsPastTTL", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "alive", 1)
	const ttl = 600 * time.Millisecond
	a, err := l.TryAcquire(ctx(t), "alive", sleeplock.TTL(ttl))
	must(t, err)
	first, err := a.Status(ctx(t))
	must(t, err)
	for range 3 {
		// Let most of the TTL pass on the store's clock, then wait for the
		// keep-alive to renew.
		e.advance(t, s, ttl/2)
		waitFor(t, "a renewal", func() bool {
			st, err := a.Status(ctx(t))
			return err == nil && st.Held && st.Expires.Sub(st.Now) > ttl/2
		})
	}
	if _, err := l.TryAcquire(ctx(t), "alive"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a kept-alive lease was taken over 1.5 TTLs after its grant: %v", err)
	}
	last, err := a.Status(ctx(t))
	must(t, err)
	if !last.Expires.After(first.Expires) {
		t.Fatalf("expiry did not move: %v then %v", first.Expires, last.Expires)
	}
	if a.Err() != nil {
		t.Fatal(a.Err())
	}
	must(t, a.Release(ctx(t)))
	<-a.Done()
	if !errors.Is(a.Err(), sleeplock.ErrReleased) {
		t.Fatalf("after release Err = %v", a.Err())
	}
})

var _ = add("Events/SeedEventsInOrder", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "ev", 1)
	a, err := l.TryAcquire(ctx(t), "ev", sleeplock.Kind("job"))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "ev", 0, ch)
	waitWaiting(t, l, "ev", 1)
	_, err = l.TryAcquire(ctx(t), "ev")
	_ = busy(t, err)
	must(t, a.Release(ctx(t)))
	r := <-ch
	must(t, r.err)
	must(t, r.lease.Release(ctx(t)))
	_ = r.lease.Release(ctx(t)) // no-op: no event
	evs := rec.waitN(t, 7)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = fmt.Sprintf("%s r%d w%d", ev.Type, ev.Running, ev.Waiting)
		if ev.Lock != "ev" || ev.Slots != 1 {
			t.Errorf("event %d metadata %q/%d", i, ev.Lock, ev.Slots)
		}
		if ev.Waited < 0 || ev.Held < 0 {
			t.Errorf("event %d negative duration", i)
		}
	}
	want := "[created r0 w0 acquired r1 w0 waiting r1 w1 refused r1 w1 released r0 w1 acquired r1 w0 released r0 w0]"
	if fmt.Sprint(got) != want {
		t.Fatalf("events\n got %v\nwant %s", got, want)
	}
	if evs[3].Holder != "job" || evs[1].Kind != "job" || evs[1].Token != a.Token() || evs[5].Token != r.lease.Token() {
		t.Fatalf("event details: %+v", evs)
	}
})

var _ = add("Events/DurationsWaitedAndHeld", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, s := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "dur", 1)
	a, err := l.TryAcquire(ctx(t), "dur", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive(), sleeplock.Ref("first"))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "dur", 0, ch, sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive(), sleeplock.Ref("second"))
	waitWaiting(t, l, "dur", 1)
	e.advance(t, s, 5*time.Second)
	must(t, a.Release(ctx(t)))
	r := <-ch
	must(t, r.err)
	e.advance(t, s, 3*time.Second)
	must(t, r.lease.Release(ctx(t)))
	evs := rec.waitN(t, 6)
	var held, waited []time.Duration
	for _, ev := range evs {
		switch ev.Type {
		case sleeplock.EventReleased:
			held = append(held, ev.Held)
		case sleeplock.EventAcquired:
			waited = append(waited, ev.Waited)
		}
	}
	if len(held) != 2 || held[0] < 5*time.Second || held[1] < 3*time.Second {
		t.Fatalf("held durations %v, want at least 5s and 3s", held)
	}
	if len(waited) != 2 || waited[1] < 5*time.Second {
		t.Fatalf("waited durations %v, want the second at least 5s", waited)
	}
})

var _ = add("Execute/FnContextEndsWhenLeaseLost", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "exl", 1)
	_, err := sleeplock.Execute(ctx(t), l, "exl", func(fctx context.Context) (int, error) {
		op, err := l.LeaseOf("exec-1", []string{"exl"})
		must(t, err)
		must(t, op.Release(ctx(t))) // taken away from under fn
		select {
		case <-fctx.Done():
		case <-time.After(20 * time.Second):
			return 0, errors.New("fn's context did not end")
		}
		return 0, context.Cause(fctx)
	}, sleeplock.Ref("exec-1"), sleeplock.TTL(time.Minute))
	if !errors.Is(err, sleeplock.ErrLeaseLost) {
		t.Fatalf("fn's context ended with %v, want ErrLeaseLost", err)
	}
	wantState(t, l, "exl", 0, 0)
})

// The expired holds of a lock of several slots, taken one by one, are not
// held any more, and their slots are taken over.
var _ = add("Lease/ExpiredSlotsTakenOver", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "pair", 2)
	a, err := l.TryAcquire(ctx(t), "pair", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	_, err = l.TryAcquire(ctx(t), "pair", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	e.advance(t, s, 2*time.Minute)
	st, err := a.Status(ctx(t))
	must(t, err)
	if !st.Held || !st.Expired {
		t.Fatalf("a hold past its TTL that nobody took over: %+v, want held and expired", st)
	}
	for range 2 {
		g, err := l.TryAcquire(ctx(t), "pair", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
		must(t, err)
		defer func() { must(t, g.Release(ctx(t))) }()
	}
	if _, err := l.TryAcquire(ctx(t), "pair"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a third holder of two slots: %v", err)
	}
})
