package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// The edges of a lease and of a store (issue 7): what a lease says once it
// ended, expiry without takeover, releases with an ended context, Close
// with waiters, event order and names no definition covers.

// wantEnded checks that x ended with a cause matching want, that Err
// agrees with the context's cause, and that Done is closed.
func wantEnded(t *testing.T, x sleeplock.Lease, want error) {
	t.Helper()
	select {
	case <-x.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done was not closed")
	}
	cause := context.Cause(x.Context())
	if !errors.Is(cause, want) {
		t.Fatalf("context cause %v, want %v", cause, want)
	}
	if err := x.Err(); err == nil || err.Error() != cause.Error() {
		t.Fatalf("Err() = %v, want the context's cause %v", err, cause)
	}
	if d, c := x.Done(), x.Context(); d != x.Done() || c != x.Context() {
		t.Fatal("Done or Context is not the same on every call")
	}
}

var _ = add("Lease/ErrAfterOwnRelease", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "er", 4)
	kinds := map[string][]sleeplock.AcquireOption{
		"plain":   nil,
		"ttl":     {sleeplock.TTL(time.Minute)},
		"ref":     {sleeplock.Ref("er-ref")},
		"noalive": {sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive()},
	}
	for name, opts := range kinds {
		x, err := l.TryAcquire(ctx(t), "er", opts...)
		must(t, err)
		if x.Err() != nil {
			t.Fatalf("%s: a held lease reports %v", name, x.Err())
		}
		select {
		case <-x.Done():
			t.Fatalf("%s: Done closed while held", name)
		default:
		}
		must(t, x.Release(ctx(t)))
		wantEnded(t, x, sleeplock.ErrReleased)
	}
	wantState(t, l, "er", 0, 0)
})

var _ = add("Lease/ErrAfterOperatorRelease", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "eo", 1)
	x, err := l.TryAcquire(ctx(t), "eo", sleeplock.Ref("victim"), sleeplock.TTL(300*time.Millisecond))
	must(t, err)
	op, err := l.LeaseOf("victim", []string{"eo"})
	must(t, err)
	must(t, op.Release(ctx(t)))
	wantEnded(t, x, sleeplock.ErrLeaseLost)
	if err := x.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("release of a lost lease = %v", err)
	}
	if !errors.Is(x.Err(), sleeplock.ErrLeaseLost) {
		t.Fatalf("a release that freed nothing changed Err to %v", x.Err())
	}
})

var _ = add("Lease/ErrAfterTakeover", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "et", 1)
	x, err := l.TryAcquire(ctx(t), "et", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	e.advance(t, s, 2*time.Minute)
	y, err := l.TryAcquire(ctx(t), "et", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
	must(t, err)
	if held, err := x.Held(ctx(t)); held || err != nil {
		t.Fatalf("the old lease is held: %v %v", held, err)
	}
	// A lease learns of a takeover at once on a store that watches, and
	// by its TTL at the latest on the others; its Done must close either way.
	wantEnded(t, x, sleeplock.ErrLeaseLost)
	must(t, y.Release(ctx(t)))
})

var _ = add("Lease/ExpirySignalledWithoutTakeover", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, s := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "ex", 1)
	const ttl = 200 * time.Millisecond
	x, err := l.TryAcquire(ctx(t), "ex", sleeplock.TTL(ttl), sleeplock.NoKeepAlive(), sleeplock.Ref("sleeper"))
	must(t, err)
	// Nobody takes it over: the lease itself must say it ended.
	wantEnded(t, x, sleeplock.ErrLeaseLost)
	e.advance(t, s, ttl) // the store's clock, too, is past the expiry
	st, err := x.Status(ctx(t))
	must(t, err)
	if !st.Held || !st.Expired {
		t.Fatalf("Status of an expired lease nobody took over: %+v, want held and expired", st)
	}
	waitFor(t, "a lost event", func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Type == sleeplock.EventLost && ev.Ref == "sleeper" {
				return true
			}
		}
		return false
	})
	// State counts an expired lease apart until it is taken over.
	wantExpired(t, l, "ex", 0, 1)
	y, err := l.TryAcquire(ctx(t), "ex")
	must(t, err)
	must(t, y.Release(ctx(t)))
})

var _ = add("Lease/ReleaseWithEndedContext", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "rc", 2)
	for _, opts := range [][]sleeplock.AcquireOption{nil, {sleeplock.TTL(time.Minute), sleeplock.Ref("rc-ref")}} {
		x, err := l.TryAcquire(ctx(t), "rc", opts...)
		must(t, err)
		ended, cancel := context.WithCancel(ctx(t))
		cancel()
		if err := x.Release(ended); err != nil {
			t.Fatalf("release with an ended context = %v; a release must still reach the store", err)
		}
		wantEnded(t, x, sleeplock.ErrReleased)
	}
	wantState(t, l, "rc", 0, 0)
})

var _ = add("Close/WaitersGetErrClosedAndLeaveTheQueue", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "cl", 1)
	held, err := l.TryAcquire(ctx(t), "cl")
	must(t, err)
	if e.h.Reopen != nil {
		// Another node waits on the same lock, then closes.
		other := sleeplock.New(e.h.Reopen(t, s))
		ch := make(chan result, 1)
		goAcquire(ctx(t), other, "cl", 0, ch)
		waitWaiting(t, l, "cl", 1)
		must(t, other.Close())
		r := <-ch
		wantPlainClosed(t, r.err)
		wantState(t, l, "cl", 1, 0)
		must(t, held.Release(ctx(t)))
		// Nobody is left in the queue to refuse a try.
		x, err := l.TryAcquire(ctx(t), "cl")
		must(t, err)
		held = x
	}
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "cl", 0, ch)
	waitWaiting(t, l, "cl", 1)
	must(t, l.Close())
	r := <-ch
	wantPlainClosed(t, r.err)
	_ = held
})

func wantPlainClosed(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, sleeplock.ErrClosed) {
		t.Fatalf("a waiter of a closed store got %v, want ErrClosed", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("a waiter of a closed store got a joined error: %q", err)
	}
}

var _ = add("Events/SeqReplaysStoreOrder", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "seq", 2)
	const workers, rounds = 6, 15
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				x, err := l.Acquire(ctx(t), "seq")
				if err != nil {
					t.Error(err)
					return
				}
				if err := x.Release(ctx(t)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	want := 1 + 2*workers*rounds // created + acquired and released per round
	var evs []sleeplock.Event
	waitFor(t, "every event", func() bool {
		evs = evs[:0]
		n := 0
		for _, ev := range rec.snapshot() {
			if ev.Lock == "seq" {
				evs = append(evs, ev)
				if ev.Type != sleeplock.EventWaiting {
					n++
				}
			}
		}
		return n >= want
	})
	slices.SortStableFunc(evs, func(a, b sleeplock.Event) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	if evs[0].Type != sleeplock.EventCreated {
		t.Fatalf("first event by Seq is %v, want created", evs[0].Type)
	}
	running, waiting := 0, 0
	for i, ev := range evs {
		if i > 0 && ev.Seq <= evs[i-1].Seq {
			t.Fatalf("events %d and %d share Seq %d: Seq must grow with every change", i-1, i, ev.Seq)
		}
		ok := true
		switch ev.Type {
		case sleeplock.EventCreated:
			ok = ev.Running == 0 && ev.Waiting == 0
		case sleeplock.EventWaiting:
			ok = ev.Running == running && ev.Waiting == waiting+1
		case sleeplock.EventAcquired:
			ok = ev.Running == running+1 && (ev.Waiting == waiting || ev.Waiting == waiting-1)
		case sleeplock.EventReleased:
			ok = ev.Running == running-1 && ev.Waiting == waiting
		default:
			t.Fatalf("unexpected event %v", ev.Type)
		}
		if !ok {
			t.Fatalf("event %d (%v, Seq %d) says running %d waiting %d after running %d waiting %d: not the store's order",
				i, ev.Type, ev.Seq, ev.Running, ev.Waiting, running, waiting)
		}
		running, waiting = ev.Running, ev.Waiting
	}
	if running != 0 || waiting != 0 {
		t.Fatalf("replay ends at running %d waiting %d, want 0 0", running, waiting)
	}
	wantState(t, l, "seq", 0, 0)
})

var _ = add("NotFound/ReleaseSideReportsUnknownNames", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "known", 1)
	define(t, l, "fam/*", 1)
	x, err := l.TryAcquire(ctx(t), "known", sleeplock.Ref("r1"))
	must(t, err)
	for _, names := range [][]string{{"ghost"}, {"nofam/1"}, {"known", "ghost"}} {
		if apart(l, names...) {
			continue // refused before any name is looked up (Shard/SpanningCallsChangeNothing)
		}
		h, err := l.LeaseOf("r1", names)
		must(t, err)
		if err := h.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotFound) {
			t.Fatalf("Release of %q = %v, want ErrNotFound", names, err)
		}
		if err := h.Keep(ctx(t)); !errors.Is(err, sleeplock.ErrNotFound) {
			t.Fatalf("Keep of %q = %v, want ErrNotFound", names, err)
		}
		if _, err := h.Held(ctx(t)); !errors.Is(err, sleeplock.ErrNotFound) {
			t.Fatalf("Held of %q = %v, want ErrNotFound", names, err)
		}
		if ok, err := l.ReleaseStale(ctx(t), "r1", names, 0); ok || !errors.Is(err, sleeplock.ErrNotFound) {
			t.Fatalf("ReleaseStale of %q = %v %v, want false, ErrNotFound", names, ok, err)
		}
	}
	// Nothing changed: r1 still holds "known".
	if held, err := x.Held(ctx(t)); !held || err != nil {
		t.Fatalf("a call naming an unknown lock changed a hold: %v %v", held, err)
	}
	// A family member not in use is known: not held, not an error.
	h, err := l.LeaseOf("r1", []string{"fam/1"})
	must(t, err)
	if err := h.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("Release of an idle family member = %v, want ErrNotHeld", err)
	}
	must(t, x.Release(ctx(t)))
})

var _ = add("StaleAfter/AcquirerDecidesTakeover", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "user/*", 1)
	turn, err := l.TryAcquire(ctx(t), "user/7", sleeplock.Kind("turn"), sleeplock.TTL(4*time.Second), sleeplock.NoKeepAlive())
	must(t, err)
	e.advance(t, s, 1100*time.Millisecond)
	// By the holder's expiry it is not stale yet…
	_, err = l.TryAcquire(ctx(t), "user/7", sleeplock.TTL(time.Second))
	if b := busy(t, err); b.Kind != "turn" {
		t.Fatalf("refused by %q", b.Kind)
	}
	// …but it is older than this acquirer's StaleAfter (the seed's
	// busy_since < now - ttl_s).
	click, err := l.TryAcquire(ctx(t), "user/7", sleeplock.Kind("click"), sleeplock.TTL(time.Minute),
		sleeplock.StaleAfter(time.Second), sleeplock.NoKeepAlive())
	must(t, err)
	if click.Token() <= turn.Token() {
		t.Fatalf("token %d after %d", click.Token(), turn.Token())
	}
	if held, err := turn.Held(ctx(t)); held || err != nil {
		t.Fatalf("the turn still holds: %v %v", held, err)
	}
	// A longer StaleAfter than the holder's TTL waits for StaleAfter.
	e.advance(t, s, 2*time.Minute) // the click is past its own expiry
	_, err = l.TryAcquire(ctx(t), "user/7", sleeplock.TTL(time.Hour), sleeplock.StaleAfter(10*time.Minute))
	if b := busy(t, err); b.Kind != "click" {
		t.Fatalf("refused by %q", b.Kind)
	}
	e.advance(t, s, 9*time.Minute)
	y, err := l.TryAcquire(ctx(t), "user/7", sleeplock.TTL(time.Hour), sleeplock.StaleAfter(10*time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	must(t, y.Release(ctx(t)))
})
