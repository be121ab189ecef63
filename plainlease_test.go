package sleeplock_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/sleeplock/sleeplock"
)

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Polling Done (and Context, Err) of a plain lease costs O(1) memory
// however often it is done, and every call gives the same channel and
// context (issue 7, item 1).
func TestPlainLeaseDonePollingKeepsHeapFlat(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "poll", 1); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryAcquire(ctx, "poll")
	if err != nil {
		t.Fatal(err)
	}
	done, lctx := lease.Done(), lease.Context()
	before := heapAlloc()
	for range 200_000 {
		select {
		case <-lease.Done():
			t.Fatal("Done closed while held")
		default:
		}
		if lease.Context() != lctx || lease.Err() != nil {
			t.Fatal("Context changed, or Err set while held")
		}
	}
	after := heapAlloc()
	if after > before && after-before > 1<<20 {
		t.Fatalf("200,000 polls kept %d bytes", after-before)
	}
	if lease.Done() != done {
		t.Fatal("Done returned another channel")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Done not closed by the release")
	}
	if lease.Done() != done || lease.Context() != lctx {
		t.Fatal("Done or Context changed after the release")
	}
}

// Err of a plain lease is the cause of its context once it ended: own
// release, released by another naming its ref, whether or not Context was
// asked for before the end and after its record went to another lease
// (issue 7, item 2, plain leases).
func TestPlainLeaseErrIsContextCause(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "e", 1); err != nil {
		t.Fatal(err)
	}
	check := func(name string, lease sleeplock.Lease, want error) {
		t.Helper()
		select {
		case <-lease.Done():
		default:
			t.Fatalf("%s: Done open", name)
		}
		cause := context.Cause(lease.Context())
		if !errors.Is(cause, want) || lease.Err() != cause { //nolint:errorlint // the very same error
			t.Fatalf("%s: Err %v, cause %v; want both the same, matching %v", name, lease.Err(), cause, want)
		}
	}
	for _, early := range []bool{false, true} {
		// Released by its holder.
		a, err := l.TryAcquire(ctx, "e")
		if err != nil {
			t.Fatal(err)
		}
		if early {
			_ = a.Context()
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		check("released", a, sleeplock.ErrReleased)
		// Its record may serve the next lease: a's answers stay.
		b, err := l.TryAcquire(ctx, "e")
		if err != nil {
			t.Fatal(err)
		}
		check("released, record reused", a, sleeplock.ErrReleased)
		if b.Err() != nil {
			t.Fatalf("new lease Err %v", b.Err())
		}
		select {
		case <-b.Done():
			t.Fatal("new lease's Done closed")
		default:
		}
		if early {
			_ = b.Done()
		}
		// Released by an operator naming its ref: lost.
		op, err := l.LeaseOf(b.Ref(), []string{"e"})
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Release(ctx); err != nil {
			t.Fatal(err)
		}
		check("released by another", b, sleeplock.ErrLeaseLost)
		if err := b.Release(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
			t.Fatalf("release after loss = %v", err)
		}
		check("released by another, then by itself", b, sleeplock.ErrLeaseLost)
	}
}

// A lease waited for (granted by a release) is a plain lease like one
// taken at once: its Context ends with its release.
func TestPlainLeaseAfterWaitEndsWithRelease(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "w", 1); err != nil {
		t.Fatal(err)
	}
	a, err := l.TryAcquire(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan sleeplock.Lease)
	go func() {
		b, err := l.Acquire(ctx, "w")
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	for {
		st, err := l.State(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiting == 1 {
			break
		}
		runtime.Gosched()
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-got
	bctx := b.Context()
	if b.Err() != nil || bctx.Err() != nil {
		t.Fatalf("granted lease ended: %v", b.Err())
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(bctx), sleeplock.ErrReleased) || !errors.Is(b.Err(), sleeplock.ErrReleased) {
		t.Fatalf("after release: cause %v, Err %v", context.Cause(bctx), b.Err())
	}
}
