package sleeplock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// Hold, first reading: a living holder with the keep-alive on blocks others
// for as long as it lives, though its hold is short (a long job under a
// short hold keeps its lock while it runs).
func TestHoldWithKeepAliveBlocksWhileHolderLives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := sleeplock.New(nil)
		defer l.Close()
		ctx := context.Background()
		must(t, l.Define(ctx, "user/*", 1))
		click, err := l.TryAcquire(ctx, "user/7", sleeplock.Kind("click"), sleeplock.TTL(10*time.Minute), sleeplock.Hold(50*time.Millisecond))
		must(t, err)
		time.Sleep(time.Second) // twenty holds
		_, err = l.TryAcquire(ctx, "user/7", sleeplock.TTL(10*time.Minute))
		var busy *sleeplock.BusyError
		if !errors.As(err, &busy) || busy.Kind != "click" {
			t.Fatalf("a kept-alive click was taken over after 20 holds: %v", err)
		}
		if click.Err() != nil {
			t.Fatalf("the click's lease ended: %v", click.Err())
		}
		must(t, click.Release(ctx))
	})
}

// Hold, second reading: without the keep-alive the hold blocks others for
// d, unless kept, and the lease ends then.
func TestHoldWithoutKeepAliveBlocksForTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := sleeplock.New(nil)
		defer l.Close()
		ctx := context.Background()
		must(t, l.Define(ctx, "user/*", 1))
		click, err := l.TryAcquire(ctx, "user/7", sleeplock.Kind("click"), sleeplock.TTL(10*time.Minute),
			sleeplock.Hold(50*time.Millisecond), sleeplock.NoKeepAlive())
		must(t, err)
		time.Sleep(40 * time.Millisecond)
		must(t, click.Keep(ctx)) // blocks 50 ms from now on
		time.Sleep(40 * time.Millisecond)
		if _, err := l.TryAcquire(ctx, "user/7"); !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatalf("a kept click was taken over before its hold passed: %v", err)
		}
		select {
		case <-click.Done():
			t.Fatal("Done closed before the hold passed since Keep")
		default:
		}
		<-click.Done()
		if !errors.Is(click.Err(), sleeplock.ErrLeaseLost) {
			t.Fatalf("Err = %v", click.Err())
		}
		turn, err := l.TryAcquire(ctx, "user/7", sleeplock.Kind("turn"))
		must(t, err)
		must(t, turn.Release(ctx))
	})
}

// failingRelease fails every Release while failing is set.
type failingRelease struct {
	store.Store
	failing bool
}

var errUnreachable = errors.New("connection refused (injected)")

func (f *failingRelease) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	if f.failing {
		return errUnreachable
	}
	return f.Store.Release(ctx, h, ev)
}

// A release that did not reach the store never claims it released: the
// lease stays held (Err nil), may be released again, and if it is not, it
// ends as lost when it expires.
func TestFailedReleaseDoesNotClaimRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &failingRelease{Store: memstore.New(), failing: true}
		l := sleeplock.New(f)
		defer l.Close()
		ctx := context.Background()
		must(t, l.Define(ctx, "k", 2))
		a, err := l.TryAcquire(ctx, "k", sleeplock.TTL(time.Minute))
		must(t, err)
		if err := a.Release(ctx); !errors.Is(err, errUnreachable) {
			t.Fatalf("Release = %v", err)
		}
		if a.Err() != nil {
			t.Fatalf("after a failed release Err = %v, want nil (still held in the store)", a.Err())
		}
		f.failing = false
		must(t, a.Release(ctx))
		<-a.Done()
		if !errors.Is(a.Err(), sleeplock.ErrReleased) {
			t.Fatalf("after a release Err = %v", a.Err())
		}

		f.failing = true
		b, err := l.TryAcquire(ctx, "k", sleeplock.TTL(time.Minute))
		must(t, err)
		if err := b.Release(ctx); !errors.Is(err, errUnreachable) {
			t.Fatalf("Release = %v", err)
		}
		<-b.Done() // no more renewals: it ends with its TTL
		if !errors.Is(b.Err(), sleeplock.ErrLeaseLost) || errors.Is(b.Err(), sleeplock.ErrReleased) {
			t.Fatalf("a lease left to expire ends with %v", b.Err())
		}
	})
}

// A release with an ended context still reaches the store.
func TestReleaseAfterContextEnded(t *testing.T) {
	l := sleeplock.New(nil)
	defer l.Close()
	must(t, l.Define(context.Background(), "k", 1))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := l.TryAcquire(ctx, "k", sleeplock.Ref("job-1"))
	must(t, err)
	cancel()
	must(t, a.Release(ctx))
	if !errors.Is(a.Err(), sleeplock.ErrReleased) {
		t.Fatalf("Err = %v", a.Err())
	}
	st, err := l.State(context.Background(), "k")
	must(t, err)
	if st.Running != 0 {
		t.Fatalf("running %d after the release", st.Running)
	}
}

// Done and Context of a lease are the same on every call, and many calls
// keep no memory per call.
func TestDoneAndContextAreIdempotent(t *testing.T) {
	l := sleeplock.New(nil)
	defer l.Close()
	ctx := context.Background()
	must(t, l.Define(ctx, "k", 1))
	a, err := l.TryAcquire(ctx, "k", sleeplock.Ref("r"))
	must(t, err)
	d, c := a.Done(), a.Context()
	for range 1000 {
		if a.Done() != d || a.Context() != c {
			t.Fatal("Done or Context changed between calls")
		}
	}
	must(t, a.Release(ctx))
	<-d
	if !errors.Is(context.Cause(c), sleeplock.ErrReleased) || !errors.Is(a.Err(), context.Cause(c)) {
		t.Fatalf("cause %v, Err %v", context.Cause(c), a.Err())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// At slog's default level (Info) LogEvents shows definitions and refusals,
// not a line per grant.
func TestLogEventsLevels(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	ctx := context.Background()
	l := sleeplock.New(nil, sleeplock.WithNotifier(sleeplock.LogEvents(logger)))
	must(t, l.Define(ctx, "db", 1))
	lease, err := l.TryAcquire(ctx, "db", sleeplock.Kind("job"))
	must(t, err)
	_, _ = l.TryAcquire(ctx, "db")
	must(t, lease.Release(ctx))
	must(t, l.Close())
	out := buf.String()
	if !strings.Contains(out, `level=INFO msg="sleeplock created"`) || !strings.Contains(out, `level=INFO msg="sleeplock refused"`) {
		t.Errorf("created and refused are not logged at Info:\n%s", out)
	}
	if strings.Contains(out, "sleeplock acquired") || strings.Contains(out, "sleeplock released") {
		t.Errorf("grants are logged at Info:\n%s", out)
	}
}

// An inline notifier sees every event as it happens, in the store's order,
// together with a queued one.
func TestInlineNotifier(t *testing.T) {
	var inline []sleeplock.EventType
	queued := make(chan sleeplock.Event, 16)
	ctx := context.Background()
	l := sleeplock.New(nil,
		sleeplock.WithInlineNotifier(sleeplock.NotifierFunc(func(e sleeplock.Event) { inline = append(inline, e.Type) })),
		sleeplock.WithNotifier(sleeplock.NotifierFunc(func(e sleeplock.Event) { queued <- e })))
	must(t, l.Define(ctx, "k", 1))
	a, err := l.TryAcquire(ctx, "k")
	must(t, err)
	if len(inline) != 2 || inline[1] != sleeplock.EventAcquired {
		t.Fatalf("inline events after the grant: %v", inline)
	}
	must(t, a.Release(ctx))
	must(t, l.Close())
	if len(inline) != 3 || inline[2] != sleeplock.EventReleased || len(queued) != 3 {
		t.Fatalf("inline %v, queued %d", inline, len(queued))
	}
	if err := sleeplock.New(nil, sleeplock.WithInlineNotifier(nil)).Define(ctx, "x", 1); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("WithInlineNotifier(nil): %v", err)
	}
}

// A lease nobody renews ends at its expiry — unless its ref kept it through
// another handle (LeaseOf(ref).Keep, as turns.KeepUser does): then it ends
// at the expiry that Keep set.
func TestNoKeepAliveLeaseKeptByRefElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := sleeplock.New(nil)
		defer l.Close()
		ctx := context.Background()
		must(t, l.Define(ctx, "k", 1))
		a, err := l.TryAcquire(ctx, "k", sleeplock.Ref("click-1"), sleeplock.TTL(100*time.Millisecond), sleeplock.NoKeepAlive())
		must(t, err)
		time.Sleep(80 * time.Millisecond)
		other, err := l.LeaseOf("click-1", []string{"k"}, sleeplock.TTL(100*time.Millisecond))
		must(t, err)
		must(t, other.Keep(ctx)) // now expires at 180 ms
		time.Sleep(70 * time.Millisecond)
		synctest.Wait()
		select {
		case <-a.Done():
			t.Fatalf("a lease kept by its ref elsewhere ended at its first expiry: %v", a.Err())
		default:
		}
		<-a.Done()
		if !errors.Is(a.Err(), sleeplock.ErrLeaseLost) {
			t.Fatalf("Err = %v", a.Err())
		}
	})
}

// Close ends every live lease as lost and returns, a lease that renews
// nothing (NoKeepAlive: no renewal loop to wait for) and one that does
// (Close waits for its loop to stop) alike.
func TestCloseEndsLeasesWithAndWithoutKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := sleeplock.New(nil)
		ctx := context.Background()
		must(t, l.Define(ctx, "a", 2))
		still, err := l.TryAcquire(ctx, "a", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
		must(t, err)
		kept, err := l.TryAcquire(ctx, "a", sleeplock.TTL(time.Minute))
		must(t, err)
		time.Sleep(30 * time.Second) // the kept lease's loop has renewed it
		must(t, l.Close())           // a wait for a loop that does not exist would never end: the bubble would deadlock
		for name, x := range map[string]sleeplock.Lease{"NoKeepAlive": still, "kept alive": kept} {
			select {
			case <-x.Done():
			default:
				t.Fatalf("the %s lease is not done after Close", name)
			}
			if !errors.Is(x.Err(), sleeplock.ErrLeaseLost) {
				t.Fatalf("the %s lease ended with %v, want ErrLeaseLost", name, x.Err())
			}
		}
	})
}
