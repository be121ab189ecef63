package sleeplock_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/fakeclock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// These tests, and TestCancelAtGrantHasOneOutcome, run on the memory
// store's fake clock rather than in a testing/synctest bubble: the memory
// store keeps its waiters' channels in a package-wide pool, so a waiter
// parked in one bubble would be reused outside it (a fatal error).

// parkedOn returns once n callers wait in name's queue: a read of the
// store's state, no timing.
func parkedOn(t *testing.T, l *sleeplock.Locks, name string, n int) {
	t.Helper()
	for {
		st, err := l.State(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiting == n {
			return
		}
		runtime.Gosched()
	}
}

// newFakeClockLocks returns Locks on a memory store whose clock moves only
// when the test advances it.
func newFakeClockLocks(t *testing.T) (*sleeplock.Locks, *fakeclock.Clock) {
	t.Helper()
	c := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := sleeplock.New(memstore.New(memstore.WithClock(c)))
	t.Cleanup(func() { _ = l.Close() })
	return l, c
}

// statsNamed returns the Stats entry of name (a lock or a family pattern).
func statsNamed(t *testing.T, l *sleeplock.Locks, name string) sleeplock.Stats {
	t.Helper()
	all, err := l.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("Stats has no entry %q: %+v", name, all)
	return sleeplock.Stats{}
}

// wantCounts checks the gauges and counters of an entry of Stats (Running
// counts live holders, each once whatever its weight, as the metrics
// packages report it), and
// that its wait histogram counts every grant (Waits.Count ==
// Acquisitions).
func wantCounts(t *testing.T, s sleeplock.Stats, running, waiting int, acqs, rels uint64) {
	t.Helper()
	if s.Running != running || s.Waiting != waiting || s.Acquisitions != acqs || s.Releases != rels {
		t.Fatalf("%s: running %d waiting %d acquisitions %d releases %d; want %d %d %d %d",
			s.Name, s.Running, s.Waiting, s.Acquisitions, s.Releases, running, waiting, acqs, rels)
	}
	if s.Waits.Count != s.Acquisitions {
		t.Fatalf("%s: Waits.Count %d, want the acquisitions %d", s.Name, s.Waits.Count, s.Acquisitions)
	}
}

// A family member taken with WeightFor in an AcquireAll, by a caller that
// waited, is counted in the family's Stats as one acquisition of the
// weight it holds, with the time it waited, and its release as one
// release; the lock it was taken with is counted the same way.
func TestStatsCountFamilyWeightedWaitedGrants(t *testing.T) {
	l, clock := newFakeClockLocks(t)
	ctx := context.Background()
	must(t, l.Define(ctx, "job/*", 3))
	must(t, l.Define(ctx, "db", 2))
	statsNamed(t, l, "db") // the memory store times waits from the first read on

	first, err := l.AcquireAll(ctx, []string{"job/a", "db"}, sleeplock.WeightFor("job/a", 3), sleeplock.WeightFor("db", 2))
	must(t, err)
	wantCounts(t, statsNamed(t, l, "job/*"), 1, 0, 1, 0)
	wantCounts(t, statsNamed(t, l, "db"), 1, 0, 1, 0)

	type result struct {
		lease sleeplock.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		x, err := l.AcquireAll(ctx, []string{"db", "job/a"}, sleeplock.WeightFor("job/a", 2))
		got <- result{x, err}
	}()
	parkedOn(t, l, "db", 1) // the second caller waits for both locks
	wantCounts(t, statsNamed(t, l, "job/*"), 1, 1, 1, 0)
	wantCounts(t, statsNamed(t, l, "db"), 1, 1, 1, 0)

	const waited = 10 * time.Millisecond
	clock.Advance(waited)
	must(t, first.Release(ctx))
	r := <-got
	must(t, r.err)
	st, err := l.StateDetail(ctx, "job/a")
	must(t, err)
	if r.lease.Weight() != 1 || len(st.Holders) != 1 || st.Holders[0].Weight != 2 {
		t.Fatalf("the waiter holds db at weight %d and job/a as %+v; want 1 and one hold of weight 2", r.lease.Weight(), st.Holders)
	}
	fam, db := statsNamed(t, l, "job/*"), statsNamed(t, l, "db")
	wantCounts(t, fam, 1, 0, 2, 1)
	wantCounts(t, db, 1, 0, 2, 1)
	for _, s := range []sleeplock.Stats{fam, db} {
		// One grant did not wait (first bucket, 0), one waited exactly
		// `waited` on the store's clock.
		if s.Waits.Sum != waited || s.Waits.Buckets[0] != 1 || s.Waits.Buckets[store.Bucket(waited)] != 1 {
			t.Fatalf("%s: waits sum %v buckets %v; want %v, one in bucket 0 and one in bucket %d",
				s.Name, s.Waits.Sum, s.Waits.Buckets, waited, store.Bucket(waited))
		}
	}

	must(t, r.lease.Release(ctx))
	wantCounts(t, statsNamed(t, l, "job/*"), 0, 0, 2, 2)
	wantCounts(t, statsNamed(t, l, "db"), 0, 0, 2, 2)
}

// A weighted grant that waited for a single family member (WeightFor on
// a plain Acquire) is counted once, and a refused try of the member is a
// refusal of the family.
func TestStatsCountFamilyWeightForWaitedGrant(t *testing.T) {
	l, clock := newFakeClockLocks(t)
	ctx := context.Background()
	must(t, l.Define(ctx, "gpu/*", 4))
	statsNamed(t, l, "gpu/*")

	a, err := l.Acquire(ctx, "gpu/0", sleeplock.Weight(3))
	must(t, err)
	if _, err := l.TryAcquire(ctx, "gpu/0", sleeplock.WeightFor("gpu/0", 2)); err == nil {
		t.Fatal("a try of weight 2 with 1 slot free was granted")
	}
	got := make(chan error, 1)
	var b sleeplock.Lease
	go func() {
		var err error
		b, err = l.Acquire(ctx, "gpu/0", sleeplock.WeightFor("gpu/0", 2))
		got <- err
	}()
	parkedOn(t, l, "gpu/0", 1)
	s := statsNamed(t, l, "gpu/*")
	wantCounts(t, s, 1, 1, 1, 0)
	if s.Refusals != 1 {
		t.Fatalf("refusals %d, want 1", s.Refusals)
	}
	clock.Advance(time.Second)
	must(t, a.Release(ctx))
	must(t, <-got)
	if b.Weight() != 2 {
		t.Fatalf("the waiter's weight %d, want 2", b.Weight())
	}
	s = statsNamed(t, l, "gpu/*")
	wantCounts(t, s, 1, 0, 2, 1)
	if s.Waits.Sum != time.Second {
		t.Fatalf("waits sum %v, want 1s", s.Waits.Sum)
	}
	must(t, b.Release(ctx))
	wantCounts(t, statsNamed(t, l, "gpu/*"), 0, 0, 2, 2)
}
