package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
)

// TestCloseTakesItsWaitersOut (issue 29, A4): node 2 waits for a lock
// node 1 holds, and closes; its waiter gets ErrClosed, and once Close has
// returned its waiter is out of the queue: node 1's release frees the lock
// and its TryAcquire right after gets it. The race is repeated 100 times: before
// Close waited for acquisitions still sending their first statement, a
// waiter that queued as Close ran had its undo refused by the closed pool,
// and node 1's release handed it the slot (about 1 run in 100 failed).
func TestCloseTakesItsWaitersOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	one := sleeplock.New(e.s)
	for i := range 100 {
		name := fmt.Sprintf("cw%d", i)
		must(t, one.Define(ctx, name, 1))
		h, err := one.TryAcquire(ctx, name)
		must(t, err)
		// A store of its own pool, as Open makes: Close closes the pool.
		s2, err := pgstore.Open(ctx, dbURL(), pgstore.WithSchema(e.schema))
		must(t, err)
		two := sleeplock.New(s2)
		done := make(chan error, 1)
		go func() {
			_, err := two.Acquire(ctx, name)
			done <- err
		}()
		waiting(t, e.s, name, 1)
		must(t, two.Close())
		if err := <-done; !errors.Is(err, sleeplock.ErrClosed) {
			t.Fatalf("run %d: the closed node's waiter returned %v, want ErrClosed", i, err)
		}
		must(t, h.Release(ctx))
		g, err := one.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("run %d: TryAcquire after the closed node's waiter left: %v", i, err)
		}
		must(t, g.Release(ctx))
	}
}
