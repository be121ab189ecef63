package memstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/internal/fakeclock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*memstore.Store, *fakeclock.Clock) {
	t.Helper()
	c := fakeclock.New(t0)
	s := memstore.New(memstore.WithClock(c))
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func define(t *testing.T, s *memstore.Store, name string, slots int) {
	t.Helper()
	if _, err := s.Define(context.Background(), name, slots, nil); err != nil {
		t.Fatal(err)
	}
}

// events is an Emitter that keeps what it is given.
type events struct {
	mu  sync.Mutex
	evs []store.Event
}

func (e *events) Emit(ev store.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

func (e *events) all() []store.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]store.Event(nil), e.evs...)
}

// A request with StaleAfter takes over a lease not renewed for that long,
// though the lease itself has not expired; without it, the lease stands.
func TestStaleAfterTakesOverBeforeExpiry(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	define(t, s, "turn", 1)
	old, err := s.Acquire(ctx, store.AcquireRequest{Name: "turn", Ref: store.RefOf("a"), TTL: 4 * time.Second})
	must(t, err)
	c.Advance(1100 * time.Millisecond)
	if _, err := s.Acquire(ctx, store.AcquireRequest{Name: "turn", Ref: store.RefOf("b"), TTL: time.Second}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("without StaleAfter: %v, want ErrUnavailable", err)
	}
	if _, err := s.Acquire(ctx, store.AcquireRequest{Name: "turn", Ref: store.RefOf("b"), TTL: time.Second, StaleAfter: 2 * time.Second}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("StaleAfter longer than the lease's age: %v, want ErrUnavailable", err)
	}
	ev := &events{}
	g, err := s.Acquire(ctx, store.AcquireRequest{Name: "turn", Ref: store.RefOf("b"), TTL: time.Second, StaleAfter: time.Second, Events: ev})
	must(t, err)
	if g.Token <= old.Token {
		t.Fatalf("token %d after %d", g.Token, old.Token)
	}
	if st, err := s.Held(ctx, old.Handle()); err != nil || st.Held {
		t.Fatalf("old holder Held = %+v, %v", st, err)
	}
	var types []store.EventType
	for _, e := range ev.all() {
		types = append(types, e.Type)
	}
	if len(types) != 2 || types[0] != store.EventExpired || types[1] != store.EventAcquired {
		t.Fatalf("events %v, want expired then acquired", types)
	}
}

// StaleAfter judges a hold from its Renewed time (dated back by TTL-Hold),
// and a renewal makes the lease fresh again.
func TestStaleAfterJudgesRenewed(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	define(t, s, "l", 1)
	g, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("a"), TTL: 10 * time.Second, Hold: 8 * time.Second})
	must(t, err)
	// Renewed is dated back by 2 s: 1 s later it is 3 s old.
	c.Advance(time.Second)
	if _, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("b"), StaleAfter: 4 * time.Second}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("3 s old, StaleAfter 4 s: %v", err)
	}
	_, err = s.Keep(ctx, g.Handle(), 10*time.Second, 8*time.Second)
	must(t, err)
	c.Advance(1500 * time.Millisecond) // renewed: 3.5 s old
	if _, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("b"), StaleAfter: 4 * time.Second}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("3.5 s after a renewal, StaleAfter 4 s: %v", err)
	}
	c.Advance(500 * time.Millisecond)
	_, err = s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("b"), StaleAfter: 4 * time.Second})
	must(t, err)
}

// A waiter with StaleAfter is granted by the store's timer when the holder
// turns stale, before the holder's expiry.
func TestStaleAfterWaiterGrantedOnTime(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	define(t, s, "l", 1)
	_, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("a"), TTL: time.Hour})
	must(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("b"), Wait: true, StaleAfter: time.Minute})
		done <- err
	}()
	waitWaiting(t, s, "l", 1)
	c.Advance(59 * time.Second)
	if st, err := s.State(ctx, "l", true); err != nil || len(st.Holders) != 1 || st.Holders[0].Ref != "a" || st.Waiting != 1 {
		t.Fatalf("before the holder was stale: %+v %v", st, err)
	}
	c.Advance(time.Second)
	must(t, <-done)
}

func waitWaiting(t *testing.T, s *memstore.Store, name string, n int) {
	t.Helper()
	for d := 50 * time.Microsecond; ; d = min(2*d, 10*time.Millisecond) {
		st, err := s.State(context.Background(), name, false)
		must(t, err)
		if st.Waiting == n {
			return
		}
		time.Sleep(d)
	}
}

// Every event that changes a lock carries a Seq that grows, also across a
// family member that is forgotten and made again; refusals carry 0.
func TestEventSeqGrows(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	ev := &events{}
	_, err := s.Define(ctx, "f/*", 1, ev)
	must(t, err)
	for range 2 {
		g, err := s.Acquire(ctx, store.AcquireRequest{Name: "f/1", Ref: store.NewRef(), Events: ev})
		must(t, err)
		if _, err := s.Acquire(ctx, store.AcquireRequest{Name: "f/1", Ref: store.NewRef(), Events: ev}); !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
		must(t, s.Resize(ctx, "f/*", 2, ev))
		must(t, s.Resize(ctx, "f/*", 1, ev))
		must(t, s.Release(ctx, g.Handle(), ev))
	}
	var last uint64
	n := 0
	for _, e := range ev.all() {
		if e.Type == store.EventRefused || e.Type == store.EventLost {
			if e.Seq != 0 {
				t.Fatalf("%v has Seq %d", e.Type, e.Seq)
			}
			continue
		}
		if e.Seq <= last {
			t.Fatalf("%v: Seq %d after %d", e.Type, e.Seq, last)
		}
		last = e.Seq
		n++
	}
	if n < 7 {
		t.Fatalf("only %d events with a Seq", n)
	}
}

// Release, Keep, Held and ReleaseStale of a name no definition covers say
// NotFound and change nothing, also when the other names are held.
func TestReleaseSideNotFound(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	define(t, s, "a", 1)
	define(t, s, "fam/*", 1)
	g, err := s.Acquire(ctx, store.AcquireRequest{Name: "a", Ref: store.RefOf("r"), TTL: time.Minute})
	must(t, err)
	ghost := store.Handle{Lock: store.Lock{Name: "a"}, More: []store.Lock{{Name: "ghost"}}, Ref: store.RefOf("r")}
	if err := s.Release(ctx, ghost, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Release = %v", err)
	}
	if _, err := s.Keep(ctx, ghost, time.Minute, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Keep = %v", err)
	}
	if _, err := s.Held(ctx, ghost); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Held = %v", err)
	}
	one := store.Handle{Lock: store.Lock{Name: "ghost"}, Ref: store.RefOf("r")}
	if ok, err := s.ReleaseStale(ctx, one, 0, nil); ok || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReleaseStale = %v %v", ok, err)
	}
	if err := s.Release(ctx, one, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Release of one ghost = %v", err)
	}
	if st, err := s.Held(ctx, g.Handle()); err != nil || !st.Held {
		t.Fatalf("a is no longer held: %+v %v", st, err)
	}
	// A family member not in use is covered: not held, not NotFound.
	member := store.Handle{Lock: store.Lock{Name: "fam/1"}, Ref: store.RefOf("r")}
	if err := s.Release(ctx, member, nil); !errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Release of an unused member = %v", err)
	}
}

// A lease past its expiry that nobody took over is held, marked expired.
func TestHeldExpiredAfterExpiry(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	define(t, s, "l", 1)
	g, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("a"), TTL: time.Second})
	must(t, err)
	c.Advance(999 * time.Millisecond)
	if st, err := s.Held(ctx, g.Handle()); err != nil || !st.Held {
		t.Fatalf("before expiry: %+v %v", st, err)
	}
	c.Advance(time.Millisecond)
	if st, err := s.Held(ctx, g.Handle()); err != nil || !st.Held || !st.Expired {
		t.Fatalf("at expiry, not taken over: %+v %v (want held, expired)", st, err)
	}
}

// Close makes waiting callers return an error that is ErrClosed and
// nothing else.
func TestCloseEndsWaitersWithErrClosed(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	define(t, s, "l", 1)
	define(t, s, "m", 1)
	_, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.RefOf("a")})
	must(t, err)
	errs := make(chan error, 2)
	go func() {
		_, err := s.Acquire(ctx, store.AcquireRequest{Name: "l", Ref: store.NewRef(), Wait: true})
		errs <- err
	}()
	go func() {
		_, err := s.Acquire(ctx, store.AcquireRequest{Name: "m", More: []string{"l"}, Ref: store.NewRef(), Wait: true})
		errs <- err
	}()
	waitWaiting(t, s, "l", 2)
	must(t, s.Close())
	for range 2 {
		if err := <-errs; err != store.ErrClosed { //nolint:errorlint // exactly ErrClosed, nothing joined
			t.Fatalf("waiter got %v, want ErrClosed", err)
		}
	}
	if _, err := s.Acquire(ctx, store.AcquireRequest{Name: "m", Ref: store.NewRef()}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
