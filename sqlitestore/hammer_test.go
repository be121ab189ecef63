package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// TestBusyNeverEscapes: stores on one file, opened and closed over and
// over as short-lived processes do (the last connection to close
// checkpoints the WAL and removes it under an exclusive lock, which new
// connections and reads meet), take, renew, read and release a lock of
// two slots, and read it, all at once. No call fails: every statement
// that finds the database busy is tried again within the busy timeout.
// The busy timeout is a minute here, so that a stall of the machine's
// disk (an fsync of a loaded host can take seconds) does not use it up: a
// path that passed SQLITE_BUSY on without trying again fails at once.
func TestBusyNeverEscapes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	ctx := t.Context()
	if _, err := sqlitestore.Migrate(ctx, path); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := hammerRound(ctx, path, w%2 == 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// hammerRound opens the file, works on the lock pool (waiting for a slot
// when wait, else trying once) and closes it.
func hammerRound(ctx context.Context, path string, wait bool) (err error) {
	s, err := sqlitestore.Open(ctx, path, sqlitestore.WithBusyTimeout(time.Minute))
	if err != nil {
		return err
	}
	l := sleeplock.New(s)
	defer func() { err = errors.Join(err, l.Close()) }()
	if err := l.Define(ctx, "pool", 2); err != nil {
		return err
	}
	if _, err := l.State(ctx, "pool"); err != nil {
		return err
	}
	var lease sleeplock.Lease
	if wait {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		lease, err = l.Acquire(actx, "pool", sleeplock.TTL(time.Minute))
	} else {
		lease, err = l.TryAcquire(ctx, "pool", sleeplock.TTL(time.Minute))
		if errors.Is(err, sleeplock.ErrUnavailable) {
			_, err = l.Stats(ctx)
			return err
		}
	}
	if err != nil {
		return err
	}
	if err := lease.Keep(ctx); err != nil {
		return err
	}
	if _, err := lease.Held(ctx); err != nil {
		return err
	}
	if _, err := l.Stats(ctx); err != nil {
		return err
	}
	return lease.Release(ctx)
}
