package memstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
)

// The model of a lease past its TTL that nobody took over, on the memory
// store's own clock (in a synctest bubble, where time passes at once): its
// holder's Done closes at the expiry, yet the lease still names it — Held
// and Expired, counted apart in State — until it is kept, released or
// taken over.
func TestExpiredNotTakenOverOnStoreClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := sleeplock.New(memstore.New())
		defer l.Close()
		must(t, l.Define(ctx, "m", 1))
		x, err := l.TryAcquire(ctx, "m", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("sleeper"))
		must(t, err)
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-x.Done():
		default:
			t.Fatal("Done is open at the expiry")
		}
		if !errors.Is(context.Cause(x.Context()), sleeplock.ErrLeaseLost) {
			t.Fatalf("cause %v", context.Cause(x.Context()))
		}
		st, err := x.Status(ctx)
		must(t, err)
		if !st.Held || !st.Expired || !st.Expires.Equal(st.Now) {
			t.Fatalf("Status at the expiry: %+v, want held, expired", st)
		}
		s, err := l.State(ctx, "m")
		must(t, err)
		if s.Running != 0 || s.Expired != 1 {
			t.Fatalf("State at the expiry: %+v, want running 0, expired 1", s)
		}
		// Keep revives it: nobody takes it over for its TTL.
		must(t, x.Keep(ctx))
		if _, err := l.TryAcquire(ctx, "m"); !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatalf("a revived lease was taken over: %v", err)
		}
		time.Sleep(time.Minute)
		// Any acquirer takes it at once.
		y, err := l.TryAcquire(ctx, "m", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
		must(t, err)
		if held, err := x.Held(ctx); held || err != nil {
			t.Fatalf("Held after a takeover = %v %v", held, err)
		}
		must(t, y.Release(ctx))
	})
}
