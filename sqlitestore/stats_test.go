package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// TestEveryHoldTimed: SQLite samples no hold, by count or otherwise
// (HoldSampling 1): a lock taken seldom, once per process as a cron job's
// is (here 5 runs, each its own store on the file), has the time of every
// hold, whichever the release path (a plain lease, and one with a TTL).
// Time passes by Advance, which dates the leases back.
func TestEveryHoldTimed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locks.db")
	const runs = 5
	for run := range runs {
		s := openAt(t, path)
		locks := sleeplock.New(s)
		if err := locks.Define(ctx, "cron", 1); err != nil {
			t.Fatal(err)
		}
		var opts []sleeplock.AcquireOption
		if run%2 == 1 {
			opts = append(opts, sleeplock.TTL(time.Minute))
		}
		l, err := locks.TryAcquire(ctx, "cron", opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Advance(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := locks.Close(); err != nil {
			t.Fatal(err)
		}
	}
	all, err := openAt(t, path).Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.Name != "cron" {
			continue
		}
		if e.HoldSampling != 1 || e.Releases != runs || e.Holds.Count != runs || e.Holds.Buckets[store.Bucket(2*time.Second)] != runs {
			t.Fatalf("%d runs of one hold of 2 s: %+v, want every hold timed", runs, e)
		}
		return
	}
	t.Fatalf("no Stats entry for cron: %+v", all)
}
