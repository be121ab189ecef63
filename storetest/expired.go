package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// The model of a lease past its TTL that nobody took over (DESIGN.md §2,
// docs/guarantees.md): it still names its holder, so Held reports it,
// marked expired; Keep revives it; Guard accepts it; Release frees it; State counts it in
// Expired, apart from Running; any acquirer may take it over at once, and
// from then on it is not held. The holder's own Done closes at the expiry
// (Lease/ExpirySignalledWithoutTakeover).

// expiredLease returns a lease of lock taken by ref with a TTL of a minute
// and no keep-alive, with the store's clock moved two minutes on.
func expiredLease(t *testing.T, e *env, lock, ref string) (*sleeplock.Locks, sleeplock.Lease) {
	t.Helper()
	l, s := e.locks(t)
	define(t, l, lock, 1)
	x, err := l.TryAcquire(ctx(t), lock, sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref(ref), sleeplock.Kind("job"))
	must(t, err)
	e.advance(t, s, 2*time.Minute)
	return l, x
}

var _ = add("Expired/HeldMarkedExpired", func(t *testing.T, e *env) {
	l, x := expiredLease(t, e, "xh", "sleeper")
	byRef, err := l.LeaseOf("sleeper", []string{"xh"})
	must(t, err)
	for _, h := range []sleeplock.Lease{x, byRef} {
		st, err := h.Status(ctx(t))
		must(t, err)
		if !st.Held || !st.Expired {
			t.Fatalf("Status of an expired lease nobody took over: %+v, want held and expired", st)
		}
		if st.Expires.IsZero() || st.Expires.After(st.Now) || st.Renewed.IsZero() || !st.Renewed.Before(st.Expires) {
			t.Fatalf("times of an expired lease: %+v, want its renewal and its past expiry", st)
		}
		if held, err := h.Held(ctx(t)); !held || err != nil {
			t.Fatalf("Held = %v %v, want true", held, err)
		}
	}
	other, err := l.LeaseOf("other", []string{"xh"})
	must(t, err)
	if st, err := other.Status(ctx(t)); err != nil || st.Held || st.Expired {
		t.Fatalf("Status of another ref: %+v %v, want neither held nor expired", st, err)
	}
	// A live lease is not marked expired.
	define(t, l, "xh-live", 1)
	y, err := l.TryAcquire(ctx(t), "xh-live", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
	must(t, err)
	if st, err := y.Status(ctx(t)); err != nil || !st.Held || st.Expired {
		t.Fatalf("Status of a live lease: %+v %v", st, err)
	}
	must(t, y.Release(ctx(t)))
})

var _ = add("Expired/KeepRevives", func(t *testing.T, e *env) {
	l, x := expiredLease(t, e, "xk", "sleeper")
	must(t, x.Keep(ctx(t)))
	st, err := x.Status(ctx(t))
	must(t, err)
	if !st.Held || st.Expired || !st.Expires.After(st.Now) {
		t.Fatalf("Status after Keep of an expired lease: %+v, want held, live", st)
	}
	if _, err := l.TryAcquire(ctx(t), "xk"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a revived lease was taken over: %v", err)
	}
	wantExpired(t, l, "xk", 1, 0)
	must(t, x.Release(ctx(t)))
})

var _ = add("Expired/ReleaseFrees", func(t *testing.T, e *env) {
	l, x := expiredLease(t, e, "xr", "sleeper")
	if err := x.Release(ctx(t)); err != nil {
		t.Fatalf("Release of an expired lease nobody took over = %v, want nil", err)
	}
	wantExpired(t, l, "xr", 0, 0)
	if err := x.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("second release = %v, want ErrNotHeld", err)
	}
	// The same by ref, from a handle made without acquiring.
	define(t, l, "xr2", 1)
	_, err := l.TryAcquire(ctx(t), "xr2", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("sleeper"))
	must(t, err)
	e.advance(t, l.Store(), 2*time.Minute)
	byRef, err := l.LeaseOf("sleeper", []string{"xr2"})
	must(t, err)
	if err := byRef.Release(ctx(t)); err != nil {
		t.Fatalf("Release by ref of an expired lease = %v, want nil", err)
	}
	wantExpired(t, l, "xr2", 0, 0)
})

var _ = add("Expired/GuardAccepts", func(t *testing.T, e *env) {
	l, x := expiredLease(t, e, "xg", "writer")
	if e.h.Begin == nil {
		if err := x.Guard(ctx(t), nil); !errors.Is(err, sleeplock.ErrUnsupported) {
			t.Fatalf("Guard on a store without transactions = %v, want ErrUnsupported", err)
		}
		return
	}
	guard := func() error {
		tx, rollback := e.h.Begin(t, l.Store())
		defer rollback()
		return x.Guard(ctx(t), tx)
	}
	if err := guard(); err != nil {
		t.Fatalf("Guard of an expired lease nobody took over = %v, want nil", err)
	}
	_, err := l.TryAcquire(ctx(t), "xg", sleeplock.Ref("next"))
	must(t, err)
	err = guard()
	if !errors.Is(err, sleeplock.ErrLeaseLost) {
		t.Fatalf("Guard of a lease taken over = %v, want ErrLeaseLost", err)
	}
	// Every store says it in the same words, naming the lock and token.
	if want := store.GuardLost("xg", x.Token()).Error(); !strings.Contains(err.Error(), want) {
		t.Fatalf("Guard of a lease taken over = %q, want it to say %q", err, want)
	}
})

var _ = add("Expired/StateCountsExpiredApart", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "xs", 3)
	_, err := l.TryAcquire(ctx(t), "xs", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("old"))
	must(t, err)
	e.advance(t, s, 30*time.Second)
	live, err := l.TryAcquire(ctx(t), "xs", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive(), sleeplock.Ref("new"))
	must(t, err)
	wantExpired(t, l, "xs", 2, 0)
	e.advance(t, s, time.Minute)
	wantExpired(t, l, "xs", 1, 1)
	st := state(t, l, "xs")
	for _, h := range st.Holders {
		if expired := !h.Expires.After(st.Now); expired != (h.Ref == "old") {
			t.Fatalf("holder %+v at %v: its Expires does not tell the expired one", h, st.Now)
		}
	}
	list, err := l.List(ctx(t))
	must(t, err)
	for _, x := range list {
		if x.Name == "xs" && (x.Running != 1 || x.Expired != 1) {
			t.Fatalf("List: %+v, want running 1, expired 1", x)
		}
	}
	must(t, live.Release(ctx(t)))
})

// An expired family member that nobody took over is still in use: State
// and List report it.
var _ = add("Expired/FamilyMemberStillListed", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "xf/*", 1)
	_, err := l.TryAcquire(ctx(t), "xf/1", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("sleeper"))
	must(t, err)
	e.advance(t, s, 2*time.Minute)
	wantExpired(t, l, "xf/1", 0, 1)
	list, err := l.List(ctx(t))
	must(t, err)
	found := false
	for _, x := range list {
		if x.Name == "xf/1" {
			found = x.Expired == 1 && x.Running == 0
		}
	}
	if !found {
		t.Fatalf("List does not report the expired member: %+v", list)
	}
})

var _ = add("Expired/AnyAcquirerTakesItAtOnce", func(t *testing.T, e *env) {
	l, x := expiredLease(t, e, "xa", "sleeper")
	y, err := l.TryAcquire(ctx(t), "xa", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive(), sleeplock.Ref("next"))
	must(t, err)
	if y.Token() <= x.Token() {
		t.Fatalf("token %d after %d", y.Token(), x.Token())
	}
	if st, err := x.Status(ctx(t)); err != nil || st.Held || st.Expired {
		t.Fatalf("Status of a lease taken over: %+v %v, want not held", st, err)
	}
	if err := x.Keep(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("Keep after a takeover = %v, want ErrNotHeld", err)
	}
	if err := x.Release(ctx(t)); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("Release after a takeover = %v, want ErrNotHeld", err)
	}
	wantExpired(t, l, "xa", 1, 0)
	must(t, y.Release(ctx(t)))
})
