package sleeplock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// stallStore renews the first `good` times, then stalls every renewal,
// deaf to its context, until unstall is closed: a store that stopped
// answering.
type stallStore struct {
	store.Store
	good    int
	calls   int
	unstall chan struct{}
}

func (s *stallStore) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	s.calls++ // only the lease's one loop calls Keep
	if s.calls <= s.good {
		return s.Store.Keep(ctx, h, ttl, hold)
	}
	<-s.unstall
	return time.Time{}, errors.New("no answer (injected)")
}

// doneAt returns a channel that receives the time at which lease's Done
// closes.
func doneAt(lease sleeplock.Lease) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		<-lease.Done()
		at <- time.Now()
	}()
	return at
}

// A lease whose renewals stop being answered closes Done at its deadline
// exactly: the time before the last renewal that succeeded was sent, plus
// the TTL, though a renewal is still under way.
func TestDoneNoLaterThanDeadlineWhileRenewalHangs(t *testing.T) {
	for _, hold := range []time.Duration{0, 600 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			s := &stallStore{Store: memstore.New(), good: 2, unstall: make(chan struct{})}
			l := sleeplock.New(s)
			defer l.Close()
			defer close(s.unstall)
			ctx := context.Background()
			must(t, l.Define(ctx, "k", 1))
			opts := []sleeplock.AcquireOption{sleeplock.TTL(3 * time.Second)}
			length := 3 * time.Second
			if hold > 0 {
				opts, length = append(opts, sleeplock.Hold(hold)), hold
			}
			start := time.Now()
			lease, err := l.TryAcquire(ctx, "k", opts...)
			must(t, err)
			at := doneAt(lease)
			if got := lease.Deadline(); !got.Equal(start.Add(length)) {
				t.Fatalf("Deadline at the grant = %v after the start, want %v", got.Sub(start), length)
			}
			// Renewals every third of the length: two succeed, the third hangs.
			lastGood := start.Add(2 * length / 3)
			time.Sleep(2*length/3 + length/2)
			synctest.Wait()
			if got := lease.Deadline(); !got.Equal(lastGood.Add(length)) {
				t.Fatalf("Deadline = %v after the start, want %v (the last good renewal + %v)", got.Sub(start), lastGood.Add(length).Sub(start), length)
			}
			closed := <-at
			if want := lastGood.Add(length); closed.After(want) {
				t.Fatalf("Done closed %v after the deadline", closed.Sub(want))
			}
			if !errors.Is(lease.Err(), sleeplock.ErrLeaseLost) {
				t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
			}
		})
	}
}

// Renewals that fail (a store that answers with errors) close Done at
// the same deadline.
func TestDoneNoLaterThanDeadlineWhileRenewalsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyStore{Store: memstore.New(), keeps: make(chan error, 100)}
		l := sleeplock.New(f)
		defer l.Close()
		ctx := context.Background()
		must(t, l.Define(ctx, "k", 1))
		start := time.Now()
		lease, err := l.TryAcquire(ctx, "k", sleeplock.TTL(3*time.Second))
		must(t, err)
		at := doneAt(lease)
		time.Sleep(1500 * time.Millisecond) // one renewal, at 1 s
		synctest.Wait()
		f.setFailing(true)
		closed := <-at
		if want := start.Add(time.Second + 3*time.Second); closed.After(want) {
			t.Fatalf("Done closed %v after the deadline", closed.Sub(want))
		}
		if !errors.Is(lease.Err(), sleeplock.ErrLeaseLost) {
			t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
		}
	})
}

// A lease granted after a wait longer than its TTL is renewed at once, not
// judged lost by a deadline measured from the start of the wait.
func TestLateGrantRenewedNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := sleeplock.New(nil)
		defer l.Close()
		ctx := context.Background()
		must(t, l.Define(ctx, "k", 1))
		first, err := l.TryAcquire(ctx, "k", sleeplock.TTL(time.Second))
		must(t, err)
		go func() {
			time.Sleep(5 * time.Second)
			_ = first.Release(ctx)
		}()
		lease, err := l.Acquire(ctx, "k", sleeplock.TTL(time.Second))
		must(t, err)
		granted := time.Now()
		synctest.Wait()
		if lease.Err() != nil {
			t.Fatalf("a lease granted after a 5 s wait ended at once: %v", lease.Err())
		}
		if d := lease.Deadline(); !d.Equal(granted.Add(time.Second)) {
			t.Fatalf("Deadline = %v from the grant, want 1s", d.Sub(granted))
		}
		time.Sleep(10 * time.Second) // renewed all along
		if lease.Err() != nil {
			t.Fatalf("lease ended: %v", lease.Err())
		}
		must(t, lease.Release(ctx))
	})
}

// Deadline is zero where a lease does not expire by itself.
func TestDeadlineZeroWithoutTTL(t *testing.T) {
	l := sleeplock.New(nil)
	defer l.Close()
	ctx := context.Background()
	must(t, l.Define(ctx, "k", 1))
	lease, err := l.TryAcquire(ctx, "k", sleeplock.Ref("r"))
	must(t, err)
	again, err := l.TryAcquire(ctx, "k", sleeplock.Ref("r"), sleeplock.TTL(time.Minute))
	must(t, err)
	byRef, err := l.LeaseOf("r", []string{"k"})
	must(t, err)
	for name, x := range map[string]sleeplock.Lease{"no TTL": lease, "re-entered": again, "LeaseOf": byRef, "zero": {}} {
		if d := x.Deadline(); !d.IsZero() {
			t.Errorf("%s: Deadline = %v, want zero", name, d)
		}
	}
	must(t, lease.Release(ctx))
}
