package sleeplock_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// WithNotifier given twice keeps both: each gets every event, in the order
// the store made them, and the first option's notifier is not replaced by
// the second's.
func TestNotifiersCompose(t *testing.T) {
	ctx := context.Background()
	first, second := &eventLog{}, &eventLog{}
	l := sleeplock.New(nil, sleeplock.WithNotifier(first), sleeplock.WithNotifier(second))
	must(t, l.Define(ctx, "c", 1))
	lease, err := l.TryAcquire(ctx, "c")
	must(t, err)
	if _, err := l.TryAcquire(ctx, "c"); err == nil {
		t.Fatal("a second TryAcquire of a one-slot lock succeeded")
	}
	must(t, lease.Release(ctx))
	must(t, l.Close()) // delivers the queued events

	const all = "created:c acquired:c refused:c released:c"
	if got := first.got(); got != all {
		t.Errorf("the first notifier got %q, want %q", got, all)
	}
	if got := second.got(); got != all {
		t.Errorf("the second notifier got %q, want %q", got, all)
	}
}

// A notifier of WithNotifier that panics on every event stops neither the
// notifier given before it nor the one after: both get every event, and
// each panic is counted.
func TestNotifierPanicSparesTheOthers(t *testing.T) {
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	ctx := context.Background()
	before, after := &eventLog{}, &eventLog{}
	boom := sleeplock.NotifierFunc(func(sleeplock.Event) { panic("boom") })
	l := sleeplock.New(nil, sleeplock.WithNotifier(before), sleeplock.WithNotifier(boom), sleeplock.WithNotifier(after))
	must(t, l.Define(ctx, "c", 1))
	for range 2 {
		lease, err := l.TryAcquire(ctx, "c")
		must(t, err)
		must(t, lease.Release(ctx))
	}
	must(t, l.Close())

	const all = "created:c acquired:c released:c acquired:c released:c"
	for name, n := range map[string]*eventLog{"before": before, "after": after} {
		if got := n.got(); got != all {
			t.Errorf("the notifier %s the panicking one got %q, want %q", name, got, all)
		}
	}
	if got, want := l.NotifierPanics(), int64(strings.Count(all, ":")); got != want {
		t.Errorf("NotifierPanics = %d, want %d (one per event)", got, want)
	}
}
