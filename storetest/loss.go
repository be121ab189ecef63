package storetest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// nodes returns Locks on a new store and Locks of another node on the
// same state (the same Locks for a store of one process).
func (e *env) nodes(t *testing.T, opts ...sleeplock.Option) (here, there *sleeplock.Locks, s store.Store) {
	t.Helper()
	here, s = e.locks(t, opts...)
	there = here
	if e.h.Reopen != nil {
		there = sleeplock.New(e.h.Reopen(t, s))
		t.Cleanup(func() { _ = there.Close() })
	}
	return here, there, s
}

// listening waits until s learns of holds ended elsewhere (Harness.Listening).
func (e *env) listening(t *testing.T, s store.Store) {
	t.Helper()
	if e.h.Listening != nil {
		e.h.Listening(t, s)
	}
}

// holdLong takes a slot of name for ref with an hour's TTL and no
// keep-alive: only a word from the store can end it during a test.
func holdLong(t *testing.T, l *sleeplock.Locks, name, ref string) sleeplock.Lease {
	t.Helper()
	a, err := l.TryAcquire(ctx(t), name, sleeplock.Ref(ref), sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
	must(t, err)
	return a
}

// wantLost waits for a's end and checks that it was lost.
func wantLost(t *testing.T, a sleeplock.Lease) {
	t.Helper()
	select {
	case <-a.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the holder did not learn of its loss")
	}
	if !errors.Is(a.Err(), sleeplock.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", a.Err())
	}
}

// A hold that another node released naming its ref, released as stale,
// or deleted with force ends the holder's lease at once: the lease has an
// hour's TTL and no keep-alive, so no renewal tells it. On a lock of
// three slots, the two other holds stay.
var _ = add("Loss/SignalledAcrossNodes", func(t *testing.T, e *env) {
	for _, c := range []struct {
		name  string
		slots int
		end   func(t *testing.T, there *sleeplock.Locks, s store.Store, name string)
	}{
		{"released", 1, releaseByRef},
		{"released-slots", 3, releaseByRef},
		{"stale", 1, func(t *testing.T, there *sleeplock.Locks, s store.Store, name string) {
			// A minute passes without a renewal, well within the TTL.
			e.advance(t, s, time.Minute)
			ok, err := there.ReleaseStale(ctx(t), "worker-1", []string{name}, time.Second)
			must(t, err)
			if !ok {
				t.Fatal("not released as stale")
			}
		}},
		{"deleted", 1, func(t *testing.T, there *sleeplock.Locks, _ store.Store, name string) {
			_, err := there.Delete(ctx(t), name, sleeplock.Force())
			must(t, err)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			here, there, s := e.nodes(t)
			define(t, here, c.name, c.slots)
			a := holdLong(t, here, c.name, "worker-1")
			for i := 1; i < c.slots; i++ {
				holdLong(t, here, c.name, "stays-"+strconv.Itoa(i))
			}
			e.listening(t, s)
			c.end(t, there, s, c.name)
			wantLost(t, a)
			if c.slots > 1 {
				wantState(t, here, c.name, c.slots-1, 0)
			}
		})
	}
})

func releaseByRef(t *testing.T, there *sleeplock.Locks, _ store.Store, name string) {
	t.Helper()
	op, err := there.LeaseOf("worker-1", []string{name})
	must(t, err)
	must(t, op.Release(ctx(t)))
}

// The holder's own release is no loss, neither to it nor to another hold
// of the lock: a release by ref from another node afterwards (the marker)
// is the one loss the holder's Locks reports.
var _ = add("Loss/OwnReleaseNotSignalled", func(t *testing.T, e *env) {
	rec := newRecorder()
	here, there, s := e.nodes(t, sleeplock.WithNotifier(rec))
	define(t, here, "own", 2)
	other := holdLong(t, here, "own", "worker-1")
	e.listening(t, s)
	for range 2 {
		a := holdLong(t, here, "own", "holder")
		must(t, a.Release(ctx(t)))
		if errors.Is(a.Err(), sleeplock.ErrLeaseLost) {
			t.Fatalf("the holder's own release ended its lease as lost: %v", a.Err())
		}
	}
	releaseByRef(t, there, s, "own")
	wantLost(t, other)
	var lost []sleeplock.Event
	waitFor(t, "the lost event", func() bool {
		lost = lost[:0]
		for _, ev := range rec.snapshot() {
			if ev.Type == sleeplock.EventLost {
				lost = append(lost, ev)
			}
		}
		return len(lost) > 0
	})
	if len(lost) != 1 || lost[0].Ref != "worker-1" || lost[0].Token != other.Token() {
		t.Fatalf("lost events %+v: want one, of worker-1's hold", lost)
	}
})
