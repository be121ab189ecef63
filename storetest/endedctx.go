package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// EndedContextTakesNothing: every way of acquiring, given a context that
// has ended already, returns the context's error and takes nothing, even
// when a slot is free (as x/sync's semaphore Acquire does): a caller whose
// time is up must not start work under a lock. Each way is tried on a lock
// that has just been taken and given back, so a store's quickest path is
// the one tried, and again on a family member not yet in use.
var _ = add("Acquire/EndedContextTakesNothing", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "ended", 2)
	define(t, l, "ended2", 1)
	define(t, l, "endedfam/*", 1)
	canceled, cancel := context.WithCancel(ctx(t))
	cancel()
	expired, cancelExpired := context.WithDeadline(ctx(t), time.Unix(1, 0))
	defer cancelExpired()
	handle := l.Lock("ended")
	ways := []struct {
		name string
		run  func(context.Context, string) error
	}{
		{"Acquire", func(c context.Context, n string) error { _, err := l.Acquire(c, n); return err }},
		{"TryAcquire", func(c context.Context, n string) error { _, err := l.TryAcquire(c, n); return err }},
		{"Lock.Acquire", func(c context.Context, n string) error { _, err := l.Lock(n).Acquire(c); return err }},
		{"Lock.TryAcquire", func(c context.Context, n string) error { _, err := l.Lock(n).TryAcquire(c); return err }},
		{"Acquire with options", func(c context.Context, n string) error {
			_, err := l.Acquire(c, n, sleeplock.Kind("job"), sleeplock.TTL(time.Minute))
			return err
		}},
		{"Acquire NoWait", func(c context.Context, n string) error { _, err := l.Acquire(c, n, sleeplock.NoWait()); return err }},
		{"AcquireAll", func(c context.Context, n string) error { _, err := l.AcquireAll(c, []string{n, "ended2"}); return err }},
		{"Execute", func(c context.Context, n string) error {
			ran := false
			_, err := sleeplock.Execute(c, l, n, func(context.Context) (int, error) { ran = true; return 0, nil })
			if ran {
				t.Errorf("Execute ran its function on %q with an ended context", n)
			}
			return err
		}},
	}
	for _, w := range ways {
		for _, n := range []string{"ended", "endedfam/1"} {
			// Warm the lock: taken and given back, as a hot lock is.
			for range 2 {
				x, err := handle.TryAcquire(ctx(t))
				must(t, err)
				must(t, x.Release(ctx(t)))
			}
			for _, c := range []struct {
				ctx  context.Context
				want error
			}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
				if err := w.run(c.ctx, n); !errors.Is(err, c.want) {
					t.Errorf("%s of %q with an ended context = %v, want %v", w.name, n, err, c.want)
				}
			}
			wantState(t, l, n, 0, 0)
		}
	}
	wantState(t, l, "ended2", 0, 0)

	// A ref that holds the lock already does not get its lease back.
	held, err := l.TryAcquire(ctx(t), "ended", sleeplock.Ref("holder"))
	must(t, err)
	if _, err := l.Acquire(canceled, "ended", sleeplock.Ref("holder"), sleeplock.Counted()); !errors.Is(err, context.Canceled) {
		t.Errorf("re-entrant Acquire with an ended context = %v, want context.Canceled", err)
	}
	must(t, held.Release(ctx(t)))
	wantState(t, l, "ended", 0, 0)
})
