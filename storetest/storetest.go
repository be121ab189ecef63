// Package storetest is the conformance suite that every sleeplock store
// passes: each guarantee of the design, exercised through the public API of
// package sleeplock. A store runs it with one call from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{New: newStore, Advance: advance})
//	}
//
// A behaviour that differs between stores is a bug in the store, never a
// special case here.
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// Harness tells the suite how to make and drive the store under test.
type Harness struct {
	// New returns a new, empty store for one test. The suite closes it.
	New func(t *testing.T) store.Store
	// Advance makes d pass on s's clock (the clock by which s judges
	// expiry), without waiting: a fake clock moved on, or stored times
	// moved back.
	Advance func(t *testing.T, s store.Store, d time.Duration)
	// Reopen, for a store whose state other processes share (a database),
	// returns a second store on s's state, as another node would open it;
	// the suite closes it. nil for a store of one process.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Crash, for a store with Reopen, stops a store Reopen made as the
	// death of its process would: its background work (heartbeats,
	// listeners) ends, its blocked calls return, and it writes nothing on
	// the way (its waiters stay queued, its holds held, until the other
	// nodes find it dead). nil when the store cannot: the cases that need
	// it are skipped.
	Crash func(t *testing.T, s store.Store)
	// Begin, for a store that can guard a write (store.Guarder), begins a
	// transaction of the caller's own on s's database, as Lease.Guard
	// takes it, and returns it with a function that rolls it back. nil for
	// a store without transactions: Guard must then report ErrUnsupported.
	Begin func(t *testing.T, s store.Store) (tx any, rollback func())
	// Listening, for a store that learns of a hold another node ended
	// through a connection that its first Watch opens, waits until s
	// listens on it. nil when a store learns of such an end from its
	// first Watch on.
	Listening func(t *testing.T, s store.Store)
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Advance == nil {
		t.Fatal("storetest: Harness needs New and Advance")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, &env{h: h})
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, e *env)
}

var cases []testCase

func add(name string, run func(t *testing.T, e *env)) struct{} {
	cases = append(cases, testCase{name, run})
	return struct{}{}
}

// env is one test's store and helpers.
type env struct {
	h Harness
}

// locks returns Locks on a new store, closed at the end of the test.
func (e *env) locks(t *testing.T, opts ...sleeplock.Option) (*sleeplock.Locks, store.Store) {
	t.Helper()
	s := e.h.New(t)
	l := sleeplock.New(s, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l, s
}

func (e *env) advance(t *testing.T, s store.Store, d time.Duration) {
	t.Helper()
	e.h.Advance(t, s, d)
}

// waitFor polls cond until it holds; the test fails after 20 s. It waits
// for a state to be reached (a caller queued, a grant made), never for time
// to pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for d := 50 * time.Microsecond; ; d = min(d*2, 20*time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(d)
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func define(t *testing.T, l *sleeplock.Locks, name string, slots int) {
	t.Helper()
	must(t, l.Define(ctx(t), name, slots))
}

func state(t *testing.T, l *sleeplock.Locks, name string) sleeplock.State {
	t.Helper()
	st, err := l.StateDetail(ctx(t), name)
	must(t, err)
	return st
}

func wantState(t *testing.T, l *sleeplock.Locks, name string, running, waiting int) {
	t.Helper()
	st := state(t, l, name)
	if st.Running != running || st.Waiting != waiting {
		t.Fatalf("state of %q: running %d, waiting %d; want running %d, waiting %d", name, st.Running, st.Waiting, running, waiting)
	}
}

// wantExpired checks the live and the expired holders of a lock.
func wantExpired(t *testing.T, l *sleeplock.Locks, name string, running, expired int) {
	t.Helper()
	st := state(t, l, name)
	if st.Running != running || st.Expired != expired || len(st.Holders) != running+expired {
		t.Fatalf("state of %q: running %d, expired %d, %d holders; want running %d, expired %d",
			name, st.Running, st.Expired, len(st.Holders), running, expired)
	}
}

func waitWaiting(t *testing.T, l *sleeplock.Locks, name string, n int) {
	t.Helper()
	waitFor(t, "waiters on "+name, func() bool {
		st, err := l.State(ctx(t), name)
		return err == nil && st.Waiting == n
	})
}

func busy(t *testing.T, err error) *sleeplock.BusyError {
	t.Helper()
	var b *sleeplock.BusyError
	if !errors.As(err, &b) || !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("got %v, want a *BusyError matching ErrUnavailable", err)
	}
	return b
}

// result is what a goroutine's acquisition came to.
type result struct {
	id    int
	lease sleeplock.Lease
	err   error
}

// goAcquire starts a blocking Acquire; its result arrives on ch.
func goAcquire(ctx context.Context, l *sleeplock.Locks, name string, id int, ch chan<- result, opts ...sleeplock.AcquireOption) {
	go func() {
		lease, err := l.Acquire(ctx, name, opts...)
		ch <- result{id, lease, err}
	}()
}

// recorder is a Notifier that keeps events.
type recorder struct {
	mu     sync.Mutex
	events []sleeplock.Event
	ch     chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 1)} }

func (r *recorder) Notify(e sleeplock.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// waitN waits until n events have arrived and returns them all.
func (r *recorder) waitN(t *testing.T, n int) []sleeplock.Event {
	t.Helper()
	var out []sleeplock.Event
	waitFor(t, "events", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		out = append(out[:0], r.events...)
		return len(out) >= n
	})
	return out
}

func (r *recorder) snapshot() []sleeplock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sleeplock.Event(nil), r.events...)
}

func types(evs []sleeplock.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type.String() + ":" + e.Lock
	}
	return out
}
