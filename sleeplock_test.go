package sleeplock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBadOptionFailsEveryCall(t *testing.T) {
	l := sleeplock.New(nil, sleeplock.WithTTL(0))
	defer l.Close()
	if err := l.Define(context.Background(), "x", 1); !errors.Is(err, sleeplock.ErrInvalidTTL) {
		t.Fatalf("Define with a bad WithTTL = %v", err)
	}
	if _, err := l.TryAcquire(context.Background(), "x"); !errors.Is(err, sleeplock.ErrInvalidTTL) {
		t.Fatalf("TryAcquire with a bad WithTTL = %v", err)
	}
}

// The uncontended path of the memory store allocates nothing.
func TestTryAcquireReleaseAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "payments", 3); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		lease, err := l.TryAcquire(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("TryAcquire+Release allocates %.1f times", allocs)
	}
}

// A weighted lease of the memory store is a plain lease too: taking and
// giving back k slots allocates nothing, and the lease keeps saying its
// weight and how it ended after its release, which gives back all k.
func TestWeightedLeaseIsPlain(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "gpu", 4); err != nil {
		t.Fatal(err)
	}
	w3 := sleeplock.Weight(3)
	allocs := testing.AllocsPerRun(1000, func() {
		lease, err := l.TryAcquire(ctx, "gpu", w3)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("TryAcquire+Release of weight 3 allocates %.1f times", allocs)
	}
	allocs = testing.AllocsPerRun(1000, func() { // the option made in the call
		lease, err := l.TryAcquire(ctx, "gpu", sleeplock.Weight(3), sleeplock.NoWait())
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("TryAcquire(Weight(3), NoWait())+Release allocates %.1f times", allocs)
	}
	a, err := l.TryAcquire(ctx, "gpu", w3)
	if err != nil {
		t.Fatal(err)
	}
	if a.Weight() != 3 || a.Err() != nil {
		t.Fatalf("held: weight %d, err %v; want 3, nil", a.Weight(), a.Err())
	}
	if _, err := l.TryAcquire(ctx, "gpu", sleeplock.Weight(2)); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("weight 2 with 3 of 4 held: %v, want ErrUnavailable", err)
	}
	c := a.Context()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Weight() != 3 || !errors.Is(a.Err(), sleeplock.ErrReleased) || !errors.Is(context.Cause(c), sleeplock.ErrReleased) {
		t.Fatalf("released: weight %d, err %v, cause %v; want 3, ErrReleased", a.Weight(), a.Err(), context.Cause(c))
	}
	if err := a.Release(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	all, err := l.TryAcquire(ctx, "gpu", sleeplock.Exclusive())
	if err != nil {
		t.Fatalf("exclusive after the release: %v", err)
	}
	if all.Weight() != 4 {
		t.Fatalf("exclusive weight %d, want 4", all.Weight())
	}
	_ = all.Release(ctx)
}

// NoWait refuses at once on a weighted plain lease too (Weight, Shared,
// Exclusive): the memory store's plain path once waited with them.
func TestWeightedNoWaitRefusesAtOnce(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "gpu", 2); err != nil {
		t.Fatal(err)
	}
	held, err := l.Acquire(ctx, "gpu", sleeplock.Exclusive())
	if err != nil {
		t.Fatal(err)
	}
	// A regression would wait: the deadline ends it with another error.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, o := range []struct {
		name string
		opt  sleeplock.AcquireOption
	}{{"Weight(1)", sleeplock.Weight(1)}, {"Weight(2)", sleeplock.Weight(2)}, {"Shared", sleeplock.Shared()}, {"Exclusive", sleeplock.Exclusive()}} {
		if _, err := l.Acquire(wctx, "gpu", o.opt, sleeplock.NoWait()); !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Errorf("%s, NoWait on a held lock: %v, want ErrUnavailable", o.name, err)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(wctx, "gpu", sleeplock.Weight(2), sleeplock.NoWait())
	if err != nil || lease.Weight() != 2 {
		t.Fatalf("Weight(2), NoWait on a free lock: weight %d, %v", lease.Weight(), err)
	}
	_ = lease.Release(ctx)
}

// Two weight options that ask different weights are refused, naming
// both, on every acquisition call; two that agree are one weight.
func TestContradictoryWeightsRefused(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "gpu", 8); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts []sleeplock.AcquireOption
		both string
	}{
		{[]sleeplock.AcquireOption{sleeplock.Shared(), sleeplock.Weight(3)}, "Shared() and Weight(3)"},
		{[]sleeplock.AcquireOption{sleeplock.Exclusive(), sleeplock.Weight(3)}, "Exclusive() and Weight(3)"},
		{[]sleeplock.AcquireOption{sleeplock.Weight(3), sleeplock.Exclusive()}, "Weight(3) and Exclusive()"},
		{[]sleeplock.AcquireOption{sleeplock.Shared(), sleeplock.Exclusive()}, "Shared() and Exclusive()"},
		{[]sleeplock.AcquireOption{sleeplock.Weight(2), sleeplock.Weight(3)}, "Weight(2) and Weight(3)"},
	} {
		for name, call := range map[string]func() (sleeplock.Lease, error){
			"TryAcquire": func() (sleeplock.Lease, error) { return l.TryAcquire(ctx, "gpu", c.opts...) },
			"Acquire":    func() (sleeplock.Lease, error) { return l.Acquire(ctx, "gpu", c.opts...) },
			"AcquireAll": func() (sleeplock.Lease, error) { return l.AcquireAll(ctx, []string{"gpu"}, c.opts...) },
			"Lock":       func() (sleeplock.Lease, error) { return l.Lock("gpu").TryAcquire(ctx, c.opts...) },
		} {
			lease, err := call()
			if !errors.Is(err, sleeplock.ErrInvalidWeight) || !errors.Is(err, sleeplock.ErrInvalid) || !strings.Contains(err.Error(), c.both) {
				_ = lease.Release(ctx)
				t.Errorf("%s with %s: %v, want ErrInvalidWeight naming both", name, c.both, err)
			}
		}
	}
	if st, err := l.StateDetail(ctx, "gpu"); err != nil || st.Running != 0 {
		t.Fatalf("after refused options: %+v, %v; want nothing held", st, err)
	}
	lease, err := l.TryAcquire(ctx, "gpu", sleeplock.Shared(), sleeplock.Weight(1))
	if err != nil || lease.Weight() != 1 {
		t.Fatalf("Shared() with Weight(1): weight %d, %v; want 1", lease.Weight(), err)
	}
	_ = lease.Release(ctx)
}

func TestZeroLease(t *testing.T) {
	var z sleeplock.Lease
	ctx := context.Background()
	if err := z.Keep(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatal(err)
	}
	if _, err := z.Held(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatal(err)
	}
	select {
	case <-z.Done():
	default:
		t.Fatal("the zero lease's Done is open")
	}
	if err := z.Guard(ctx, nil); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatal(err)
	}
}

func TestGuardUnsupportedOnMemory(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	_ = l.Define(ctx, "g", 1)
	lease, err := l.TryAcquire(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Guard(ctx, nil); !errors.Is(err, sleeplock.ErrUnsupported) {
		t.Fatalf("Guard on memory = %v", err)
	}
	_ = lease.Release(ctx)
}

func TestRefsAreRandomAndDistinct(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	_ = l.Define(ctx, "r", 1000)
	seen := map[string]bool{}
	for range 1000 {
		lease, err := l.TryAcquire(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		ref := lease.Ref()
		if len(ref) != 32 || seen[ref] {
			t.Fatalf("ref %q (seen: %v)", ref, seen[ref])
		}
		seen[ref] = true
	}
	// A generated ref can be named by its text.
	st, _ := l.StateDetail(ctx, "r")
	byText, err := l.LeaseOf(st.Holders[0].Ref, []string{"r"})
	if err != nil {
		t.Fatal(err)
	}
	if err := byText.Release(ctx); err != nil {
		t.Fatalf("release by the ref's text: %v", err)
	}
}

func FuzzDefineName(f *testing.F) {
	for _, s := range []string{"a", "chat/*", "", "/*", "a\x00", "\xff", strings.Repeat("x", 201), "chat//*", "ü/*"} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, name string, slots int) {
		ctx := context.Background()
		l := sleeplock.New(nil)
		defer l.Close()
		err := l.Define(ctx, name, slots)
		if err != nil {
			if !errors.Is(err, sleeplock.ErrInvalid) {
				t.Fatalf("Define(%q, %d) = %v: not a typed input error", name, slots, err)
			}
			if list, _ := l.List(ctx); len(list) != 0 {
				t.Fatalf("a refused Define changed state: %+v", list)
			}
			return
		}
		if !strings.HasSuffix(name, "/*") {
			lease, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire of a defined lock %q: %v", name, err)
			}
			_ = lease.Release(ctx)
		}
	})
}

func TestLogEvents(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	l := sleeplock.New(nil, sleeplock.WithNotifier(sleeplock.LogEvents(logger)))
	_ = l.Define(ctx, "db", 1)
	lease, err := l.TryAcquire(ctx, "db", sleeplock.Kind("job"), sleeplock.Ref("r1"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = l.TryAcquire(ctx, "db")
	_ = lease.Release(ctx)
	_ = l.Close()
	out := buf.String()
	for _, want := range []string{
		`msg="sleeplock created" lock=db slots=1`,
		`msg="sleeplock acquired" lock=db slots=1 running=1 waiting=0 ref=r1 kind=job token=`,
		`msg="sleeplock refused"`, `holder=job`,
		`msg="sleeplock released" lock=db slots=1 running=0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
