package sleeplock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// A handle acquires the same slots as the name: its leases count against
// the Locks' and a try through it refuses when the name's leases hold all.
func TestLockHandleSharesSlotsWithName(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	k := l.Lock("h")
	if _, err := k.TryAcquire(ctx); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("before Define: %v", err)
	}
	if err := l.Define(ctx, "h", 2); err != nil {
		t.Fatal(err)
	}
	a, err := k.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryAcquire(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.TryAcquire(ctx); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("third slot of two: %v", err)
	}
	if st, _ := l.State(ctx, "h"); st.Running != 2 {
		t.Fatalf("running %d", st.Running)
	}
	if a.Token() >= b.Token() || a.Name() != "h" || k.Name() != "h" {
		t.Fatalf("tokens %d %d, name %q", a.Token(), b.Token(), a.Name())
	}
	// A waiter through the handle is granted by a release through the name.
	got := make(chan error, 1)
	go func() {
		c, err := k.Acquire(ctx)
		if err == nil {
			err = c.Release(ctx)
		}
		got <- err
	}()
	for st, _ := l.State(ctx, "h"); st.Waiting != 1; st, _ = l.State(ctx, "h") {
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("second release: %v", err)
	}
}

// A handle on a family member, with options, and with an invalid name.
func TestLockHandleFamilyOptionsAndBadName(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "chat/*", 1); err != nil {
		t.Fatal(err)
	}
	k := l.Lock("chat/1")
	for range 3 { // the member is forgotten after each release
		a, err := k.TryAcquire(ctx, sleeplock.Ref("turn-1"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := k.TryAcquire(ctx, sleeplock.Ref("turn-1"))
		if err != nil || !again.Reentered() {
			t.Fatalf("re-entry through the handle: %v %v", again.Reentered(), err)
		}
		if _, err := k.TryAcquire(ctx); !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatalf("busy member: %v", err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Lock("").Acquire(ctx); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("empty name: %v", err)
	}
	var zero sleeplock.Lock
	if _, err := zero.TryAcquire(ctx); !errors.Is(err, sleeplock.ErrInvalid) {
		t.Fatalf("zero handle: %v", err)
	}
}

// The handle's uncontended TryAcquire+Release allocates nothing.
func TestLockHandleAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "payments", 3); err != nil {
		t.Fatal(err)
	}
	k := l.Lock("payments")
	allocs := testing.AllocsPerRun(1000, func() {
		lease, err := k.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("TryAcquire+Release through a handle allocates %.1f times", allocs)
	}
}
