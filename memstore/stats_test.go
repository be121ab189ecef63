package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

func statsOf(t *testing.T, s *memstore.Store, name string) store.Stats {
	t.Helper()
	all, err := s.Stats(context.Background())
	must(t, err)
	for _, e := range all {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no stats of %q in %+v", name, all)
	return store.Stats{}
}

// Holds are timed 1 in HoldSampling, by token, on the fast word too: of
// HoldSampling pairs, the last is timed, by the store's clock; the
// others read no clock (nobody read the stats: none is timed by time).
func TestStatsHoldSampled(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	locks := sleeplock.New(s)
	must(t, locks.Define(ctx, "h", 1))
	for i := range memstore.HoldSampling {
		l, err := locks.TryAcquire(ctx, "h")
		must(t, err)
		if i == memstore.HoldSampling-1 {
			c.Advance(3 * time.Second)
		}
		must(t, l.Release(ctx))
	}
	got := statsOf(t, s, "h")
	if got.Holds.Count != 1 || got.Holds.Sum != 3*time.Second || got.Holds.Buckets[store.Bucket(3*time.Second)] != 1 {
		t.Fatalf("holds %+v, want the one sampled hold of 3 s", got.Holds)
	}
	if got.Acquisitions != memstore.HoldSampling || got.Releases != memstore.HoldSampling || got.HoldSampling != memstore.HoldSampling {
		t.Fatalf("counts %+v", got)
	}
}

// TestHoldsTimedByTime: a lock taken once a minute, none of whose tokens
// is timed by token (1 in HoldSampling), has hold figures: from the first
// Stats read on (a scrape, every 13 s here), the next hold after a read
// made HoldSampleEvery after the last timed one began is timed, so every
// hold of the cron job's lock is but the one before the first scrape. A
// family's members share their family's.
func TestHoldsTimedByTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memstore.New()
		defer func() { must(t, s.Close()) }()
		locks := sleeplock.New(s)
		must(t, locks.Define(ctx, "cron", 1))
		must(t, locks.Define(ctx, "jobs/*", 2))
		const runs = 10
		for run := range runs {
			for _, name := range []string{"cron", fmt.Sprintf("jobs/%d", run%3)} {
				l, err := locks.TryAcquire(ctx, name)
				must(t, err)
				time.Sleep(2 * time.Second) // the job
				must(t, l.Release(ctx))
			}
			for range 4 {
				time.Sleep(13 * time.Second)
				_, err := s.Stats(ctx) // a scrape
				must(t, err)
			}
		}
		for _, c := range []struct {
			name string
			n    uint64
		}{{"cron", runs - 1}, {"jobs/*", runs - 1}} {
			got := statsOf(t, s, c.name)
			if got.Acquisitions != runs || got.Holds.Count != c.n || got.Holds.Sum != time.Duration(c.n)*2*time.Second ||
				got.Holds.Buckets[store.Bucket(2*time.Second)] != c.n {
				t.Errorf("%s taken once a minute: %d grants, holds %+v; want %d timed holds of 2 s", c.name, got.Acquisitions, got.Holds, c.n)
			}
		}
	})
}

// TestHoldsTimedByTimeAtMostEvery: at high volume the sampling by time
// adds at most one timed hold per lock every HoldSampleEvery, however
// often Stats is read: the rest are timed by token.
func TestHoldsTimedByTimeAtMostEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memstore.New()
		defer func() { must(t, s.Close()) }()
		locks := sleeplock.New(s)
		must(t, locks.Define(ctx, "hot", 1))
		pairs := func(n int) {
			for i := range n {
				l, err := locks.TryAcquire(ctx, "hot")
				must(t, err)
				must(t, l.Release(ctx))
				if i%100 == 0 {
					statsOf(t, s, "hot")
				}
			}
		}
		pairs(1000)
		byToken := uint64(1000 / memstore.HoldSampling)
		if got := statsOf(t, s, "hot"); got.Holds.Count != 1+byToken {
			t.Fatalf("1,000 pairs at once: %d timed holds, want the one after the first read and %d by token", got.Holds.Count, byToken)
		}
		time.Sleep(memstore.HoldSampleEvery)
		statsOf(t, s, "hot")
		pairs(1)
		if got := statsOf(t, s, "hot"); got.Holds.Count != 2+byToken {
			t.Fatalf("a pair %v later: %d timed holds, want %d", memstore.HoldSampleEvery, got.Holds.Count, 2+byToken)
		}
	})
}

// A wait is timed only when the caller parked, by the store's clock,
// once Stats has been read; the grants that did not wait are in the first
// bucket.
func TestStatsWaitTimed(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	locks := sleeplock.New(s)
	must(t, locks.Define(ctx, "w", 1))
	statsOf(t, s, "w") // switches wait timing on
	first, err := locks.Acquire(ctx, "w")
	must(t, err)
	done := make(chan error, 1)
	go func() {
		l, err := locks.Acquire(ctx, "w")
		if err == nil {
			err = l.Release(ctx)
		}
		done <- err
	}()
	for {
		st, err := locks.State(ctx, "w")
		must(t, err)
		if st.Waiting == 1 {
			break
		}
		time.Sleep(time.Millisecond) // polls a state, not a time
	}
	c.Advance(2 * time.Second)
	must(t, first.Release(ctx))
	must(t, <-done)
	got := statsOf(t, s, "w")
	if got.Waits.Count != 2 || got.Waits.Buckets[0] != 1 || got.Waits.Buckets[store.Bucket(2*time.Second)] != 1 || got.Waits.Sum != 2*time.Second {
		t.Fatalf("waits %+v, want one grant without a wait and one of 2 s", got.Waits)
	}
}

// On the system clock, the waits of plain waiters are dated by the
// monotonic clock alone: State shows each waiter queued between when its
// caller started and State's Now, and Stats counts two waits, neither
// longer than the test took.
func TestSystemClockWaits(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	s := memstore.New()
	t.Cleanup(func() { _ = s.Close() })
	locks := sleeplock.New(s)
	must(t, locks.Define(ctx, "w", 4))
	statsOf(t, s, "w") // switches wait timing on
	first, err := locks.Acquire(ctx, "w", sleeplock.Weight(4))
	must(t, err)
	done := make(chan error, 2)
	var began [2]time.Time
	for i, w := range []int{3, 1} {
		began[i] = time.Now()
		go func() {
			l, err := locks.Acquire(ctx, "w", sleeplock.Weight(w))
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
		waitWaiting(t, s, "w", i+1) // the second joins a queue
	}
	st, err := s.State(ctx, "w", true)
	must(t, err)
	for i, q := range st.Queue {
		if q.Since.Before(began[i]) || q.Since.After(st.Now) {
			t.Errorf("waiter %d queued at %v, not between its start %v and now %v", i, q.Since, began[i], st.Now)
		}
	}
	must(t, first.Release(ctx))
	must(t, <-done)
	must(t, <-done)
	took := time.Since(start)
	got := statsOf(t, s, "w")
	if got.Waits.Count != 3 || got.Waits.Sum == 0 || got.Waits.Sum > 2*took {
		t.Fatalf("waits %+v: want 3 grants, two timed waits of at most %v each", got.Waits, took)
	}
}

// Until the store's first Stats read, a grant that queued is counted
// (exactly) but not timed: it is in the wait histogram's first bucket, as
// a grant that did not wait. Waits that end after the first read are
// timed, on a defined lock and on a family member alike.
func TestStatsWaitsTimedFromFirstRead(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	locks := sleeplock.New(s)
	must(t, locks.Define(ctx, "w", 1))
	must(t, locks.Define(ctx, "f/*", 1))
	queueOnce := func(name string) {
		first, err := locks.Acquire(ctx, name)
		must(t, err)
		done := make(chan error, 1)
		go func() {
			l, err := locks.Acquire(ctx, name)
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
		waitWaiting(t, s, name, 1)
		c.Advance(3 * time.Second)
		must(t, first.Release(ctx))
		must(t, <-done)
	}
	queueOnce("w")
	queueOnce("f/1")
	for _, name := range []string{"w", "f/*"} {
		got := statsOf(t, s, name) // the first read switches timing on
		if got.Acquisitions != 2 || got.Waits.Count != 2 || got.Waits.Buckets[0] != 2 || got.Waits.Sum != 0 {
			t.Fatalf("%s before the first read: %d grants, waits %+v; want 2 grants, both untimed", name, got.Acquisitions, got.Waits)
		}
	}
	queueOnce("w")
	queueOnce("f/1")
	for _, name := range []string{"w", "f/*"} {
		got := statsOf(t, s, name)
		if got.Acquisitions != 4 || got.Waits.Count != 4 || got.Waits.Buckets[store.Bucket(3*time.Second)] != 1 || got.Waits.Sum != 3*time.Second {
			t.Fatalf("%s after the first read: %d grants, waits %+v; want 4 grants, one wait of 3 s", name, got.Acquisitions, got.Waits)
		}
	}
}

// A family member in use that becomes a lock of its own (Define) counts
// its live holds as its acquisitions, none released yet, so its releases
// (acquisitions less the holds) never go below zero; each release after
// is counted.
func TestStatsMemberDefinedWhileHeld(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	locks := sleeplock.New(s)
	must(t, locks.Define(ctx, "f/*", 3))
	a, err := locks.TryAcquire(ctx, "f/a")
	must(t, err)
	b, err := locks.TryAcquire(ctx, "f/a")
	must(t, err)
	must(t, locks.Define(ctx, "f/a", 3))
	if got := statsOf(t, s, "f/a"); got.Acquisitions != 2 || got.Releases != 0 || got.Running != 2 {
		t.Fatalf("stats of the member defined while held twice: %+v, want 2 acquisitions, 0 releases, 2 running", got)
	}
	must(t, a.Release(ctx))
	must(t, b.Release(ctx))
	c, err := locks.TryAcquire(ctx, "f/a")
	must(t, err)
	if got := statsOf(t, s, "f/a"); got.Acquisitions != 3 || got.Releases != 2 || got.Running != 1 {
		t.Fatalf("stats after two releases and a grant: %+v, want 3 acquisitions, 2 releases, 1 running", got)
	}
	must(t, c.Release(ctx))
}
