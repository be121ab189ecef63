package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// Forced Deletes and Defines of the name again race with grants and
// releases: every caller's tokens keep growing across the lock's lives,
// and once the racing ends nothing of the old lives holds the lock.
var _ = add("Delete/RacesGrants", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "x", 2)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 3 {
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
				lease, err := l.TryAcquire(ctx(t), "x", sleeplock.TTL(time.Minute), sleeplock.Ref(fmt.Sprint("g", g)))
				if errors.Is(err, sleeplock.ErrNotFound) || errors.Is(err, sleeplock.ErrUnavailable) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if lease.Token() <= last {
					errs <- fmt.Errorf("token %d after %d: down across a Delete", lease.Token(), last)
					return
				}
				last = lease.Token()
				_ = lease.Release(ctx(t)) // ErrNotFound when deleted meanwhile
			}
		}()
	}
	for range 30 {
		_, err := l.Delete(ctx(t), "x", sleeplock.Force())
		must(t, err)
		define(t, l, "x", 2)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantState(t, l, "x", 0, 0)
})
