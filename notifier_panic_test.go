package sleeplock_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// eventLog is a Notifier that keeps the types of the events it gets; with
// panicFirst it panics on its first event instead.
type eventLog struct {
	mu         sync.Mutex
	types      []string
	panicFirst bool
}

func (n *eventLog) Notify(e sleeplock.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.panicFirst {
		n.panicFirst = false
		panic("first event")
	}
	n.types = append(n.types, e.Type.String()+":"+e.Lock)
}

func (n *eventLog) got() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.types, " ")
}

// A Notifier that panics, inline on the lock path or queued, takes down
// neither the process nor the lock: the panic is recovered and counted,
// the other notifiers get every event, the queued one gets the events after
// the one it panicked on, and each panicking notifier is logged once.
func TestNotifierPanicIsRecovered(t *testing.T) {
	var logged lockedBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	ctx := context.Background()
	boom := sleeplock.NotifierFunc(func(sleeplock.Event) { panic("boom") })
	inline := &eventLog{}
	queued := &eventLog{panicFirst: true}
	l := sleeplock.New(nil, sleeplock.WithInlineNotifier(boom), sleeplock.WithInlineNotifier(inline),
		sleeplock.WithNotifier(queued))
	must(t, l.Define(ctx, "p", 1))
	for range 2 {
		lease, err := l.TryAcquire(ctx, "p")
		must(t, err)
		if _, err := l.TryAcquire(ctx, "p"); err == nil {
			t.Fatal("a second TryAcquire of a one-slot lock succeeded")
		}
		must(t, lease.Release(ctx))
	}
	st, err := l.State(ctx, "p")
	must(t, err)
	if st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("state after the releases: %+v", st)
	}
	must(t, l.Close()) // delivers the queued events

	const all = "created:p acquired:p refused:p released:p acquired:p refused:p released:p"
	if got := inline.got(); got != all {
		t.Errorf("the inline notifier after the panicking one got %q, want %q", got, all)
	}
	if got, want := queued.got(), strings.TrimPrefix(all, "created:p "); got != want {
		t.Errorf("the queued notifier got %q, want %q", got, want)
	}
	// boom panicked on each of the 7 events, queued on its first.
	if got := l.NotifierPanics(); got != 8 {
		t.Errorf("NotifierPanics = %d, want 8", got)
	}
	if n := strings.Count(logged.String(), "a Notifier panicked"); n != 2 {
		t.Errorf("%d log lines of a panicking notifier, want 2 (one per notifier):\n%s", n, logged.String())
	}
}
