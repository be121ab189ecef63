package memstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
)

// A forced Delete and a Define of the name again, over and over, while
// plain leases (the fast word, and a handle kept across the lock's lives),
// leases with a ref and waiters use the lock: no panic, no race, every caller ends (granted, or ErrNotFound),
// and the tokens each caller is granted keep growing across the lock's
// lives.
func TestDeleteRacesGrants(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(memstore.New())
	defer l.Close()
	if err := l.Define(ctx, "x", 2); err != nil {
		t.Fatal(err)
	}
	handle := l.Lock("x")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				var lease sleeplock.Lease
				var err error
				switch g {
				case 0:
					lease, err = l.Acquire(ctx, "x") // plain: the fast word, or a wait
				case 1:
					lease, err = handle.Acquire(ctx) // a handle kept across the lock's lives
				default:
					lease, err = l.Acquire(ctx, "x", sleeplock.Ref("r"+string(rune('a'+g))))
				}
				if errors.Is(err, sleeplock.ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if lease.Token() <= last {
					errs <- errors.New("a token went down across a Delete")
					return
				}
				last = lease.Token()
				_ = lease.Release(ctx) // ErrNotFound or ErrNotHeld when deleted meanwhile
			}
		}()
	}
	for range 300 {
		if _, err := l.Delete(ctx, "x", sleeplock.Force()); err != nil {
			t.Fatal(err)
		}
		if err := l.Define(ctx, "x", 2); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Nothing leaked: every grant of the last lock was released.
	if st, err := l.State(ctx, "x"); err != nil || st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("after the race: %+v %v", st, err)
	}
}
