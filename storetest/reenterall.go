package storetest

import (
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// ReenterAll: re-entry only as a whole. A ref that holds some of the
// locks, not all, is refused at once (even when the acquisition would
// wait) with a *BusyError naming the first lock it holds in the caller's
// order, with that hold's kind; nothing is taken.
var _ = add("AcquireAll/ReenterAllOnlyAsAWhole", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	together(t, l, "ra", "rb", "rc")
	for _, n := range []string{"ra", "rb", "rc"} {
		define(t, l, n, 1)
	}
	for _, n := range []string{"ra", "rc"} {
		_, err := l.TryAcquire(ctx(t), n, sleeplock.Ref("turn-1"), sleeplock.Kind("turn"))
		must(t, err)
	}
	for _, wait := range []bool{false, true} {
		opts := []sleeplock.AcquireOption{sleeplock.Ref("turn-1"), sleeplock.Kind("turn"), sleeplock.ReenterAll()}
		if !wait {
			opts = append(opts, sleeplock.NoWait())
		}
		_, err := l.AcquireAll(ctx(t), []string{"rb", "rc", "ra"}, opts...)
		b := busy(t, err)
		if b.Lock != "rc" || b.Kind != "turn" || b.Ref != "turn-1" {
			t.Fatalf("wait %v: refusal %+v, want the first lock the ref holds (rc), with its kind", wait, *b)
		}
		wantState(t, l, "rb", 0, 0)
	}
	// Holding all of them: re-entry, the same tokens.
	first, err := l.AcquireAll(ctx(t), []string{"ra", "rc"}, sleeplock.Ref("turn-1"), sleeplock.ReenterAll(), sleeplock.NoWait())
	must(t, err)
	if !first.Reentered() {
		t.Fatal("a ref holding every lock did not re-enter")
	}
	// Holding none: a normal acquisition.
	x, err := l.AcquireAll(ctx(t), []string{"rb"}, sleeplock.Ref("turn-2"), sleeplock.ReenterAll(), sleeplock.NoWait())
	must(t, err)
	if x.Reentered() {
		t.Fatal("a new holder re-entered")
	}
	must(t, x.Release(ctx(t)))
	// Without ReenterAll the locks a ref holds count as taken.
	y, err := l.AcquireAll(ctx(t), []string{"rb", "rc", "ra"}, sleeplock.Ref("turn-1"), sleeplock.NoWait())
	must(t, err)
	must(t, y.Release(ctx(t)))
	for _, n := range []string{"ra", "rb", "rc"} {
		wantState(t, l, n, 0, 0)
	}
	if _, err := l.State(ctx(t), "rd"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("State of an undefined lock = %v", err)
	}
})
