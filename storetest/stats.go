package storetest

import (
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// The counters of Locks.Stats (DESIGN.md §6): kept by the store, exact,
// the same whatever path a grant took (plain, with options, with a
// notifier), a family's members folded into it, and on a shared store
// counting every process's grants.

// statsOf returns the Stats entry of name. A store that keeps no
// counters (not a store.StatsReader) skips the test: Locks.Stats reports
// its gauges only.
func statsOf(t *testing.T, l *sleeplock.Locks, name string) sleeplock.Stats {
	t.Helper()
	if _, ok := l.Store().(store.StatsReader); !ok {
		t.Skipf("%T keeps no counters (not a store.StatsReader)", l.Store())
	}
	all, err := l.Stats(ctx(t))
	must(t, err)
	for i, s := range all {
		if i > 0 && all[i-1].Name >= s.Name {
			t.Fatalf("Stats not sorted by name: %q before %q", all[i-1].Name, s.Name)
		}
	}
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("Stats has no entry %q: %+v", name, all)
	return sleeplock.Stats{}
}

func wantCounts(t *testing.T, got sleeplock.Stats, acq, rel, ref, exp, lost uint64) {
	t.Helper()
	if got.Acquisitions != acq || got.Releases != rel || got.Refusals != ref || got.Expiries != exp || got.Losses != lost {
		t.Fatalf("%s: acquisitions %d releases %d refusals %d expiries %d losses %d, want %d %d %d %d %d",
			got.Name, got.Acquisitions, got.Releases, got.Refusals, got.Expiries, got.Losses, acq, rel, ref, exp, lost)
	}
	if got.Waits.Count != got.Acquisitions {
		t.Fatalf("%s: Waits.Count %d, want Acquisitions %d (grants that did not wait in the first bucket)", got.Name, got.Waits.Count, got.Acquisitions)
	}
	if got.HoldSampling < 1 {
		t.Fatalf("%s: HoldSampling %d", got.Name, got.HoldSampling)
	}
	ended := got.Releases + got.Expiries
	if n := uint64(got.HoldSampling); got.Holds.Count > ended || got.Holds.Count+1 < ended/n {
		t.Fatalf("%s: %d holds timed of %d ended, sampling 1 in %d", got.Name, got.Holds.Count, ended, n)
	}
}

const statsPairs = 300

func pairs(t *testing.T, l *sleeplock.Locks, name string, n int, opts ...sleeplock.AcquireOption) {
	t.Helper()
	for range n {
		x, err := l.TryAcquire(ctx(t), name, opts...)
		must(t, err)
		must(t, x.Release(ctx(t)))
	}
}

var _ = add("Stats/ExactCounts", func(t *testing.T, e *env) {
	for _, c := range []struct {
		name string
		opts []sleeplock.Option
	}{{"plain", nil}, {"notifier", []sleeplock.Option{sleeplock.WithNotifier(sleeplock.NotifierFunc(func(sleeplock.Event) {}))}}} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := e.locks(t, c.opts...)
			define(t, l, "st", 1)
			define(t, l, "st-fam/*", 1)
			wantCounts(t, statsOf(t, l, "st"), 0, 0, 0, 0, 0)
			pairs(t, l, "st", statsPairs)
			pairs(t, l, "st", statsPairs, sleeplock.Kind("job"))
			wantCounts(t, statsOf(t, l, "st"), 2*statsPairs, 2*statsPairs, 0, 0, 0)
			for i := range statsPairs {
				pairs(t, l, "st-fam/"+string(rune('a'+i%7)), 1)
			}
			fam := statsOf(t, l, "st-fam/*")
			wantCounts(t, fam, statsPairs, statsPairs, 0, 0, 0)
			if !fam.Family || fam.Locks != 0 || fam.Running != 0 {
				t.Fatalf("family after its pairs: %+v", fam)
			}
			// A held lock refuses; a re-entrant acquisition is no grant.
			x, err := l.TryAcquire(ctx(t), "st", sleeplock.Ref("me"))
			must(t, err)
			_, err = l.TryAcquire(ctx(t), "st")
			_ = busy(t, err)
			_, err = l.TryAcquire(ctx(t), "st", sleeplock.Ref("me"))
			must(t, err)
			m, err := l.TryAcquire(ctx(t), "st-fam/m")
			must(t, err)
			got := statsOf(t, l, "st")
			wantCounts(t, got, 2*statsPairs+1, 2*statsPairs, 1, 0, 0)
			if got.Running != 1 || got.Locks != 1 || got.Slots != 1 {
				t.Fatalf("gauges of a held lock: %+v", got)
			}
			fam = statsOf(t, l, "st-fam/*")
			if fam.Locks != 1 || fam.Running != 1 || fam.Slots != 1 || fam.Acquisitions != statsPairs+1 {
				t.Fatalf("family with a member held: %+v", fam)
			}
			must(t, x.Release(ctx(t)))
			must(t, m.Release(ctx(t)))
			wantCounts(t, statsOf(t, l, "st"), 2*statsPairs+1, 2*statsPairs+1, 1, 0, 0)
		})
	}
})

var _ = add("Stats/WaitsTimedOnlyWhenWaited", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "sw", 1)
	x, err := l.Acquire(ctx(t), "sw")
	must(t, err)
	ch := make(chan result, 1)
	go goAcquire(ctx(t), l, "sw", 1, ch)
	waitWaiting(t, l, "sw", 1)
	must(t, x.Release(ctx(t)))
	r := <-ch
	must(t, r.err)
	must(t, r.lease.Release(ctx(t)))
	got := statsOf(t, l, "sw")
	wantCounts(t, got, 2, 2, 0, 0, 0)
})

var _ = add("Stats/ExpiriesAndLosses", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "sx", 1)
	_, err := l.TryAcquire(ctx(t), "sx", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive(), sleeplock.Ref("old"))
	must(t, err)
	e.advance(t, s, 2*time.Minute)
	if got := statsOf(t, l, "sx"); got.Expired != 1 || got.Running != 0 {
		t.Fatalf("an expired lease nobody took over: %+v, want Expired 1", got)
	}
	y, err := l.TryAcquire(ctx(t), "sx", sleeplock.Ref("new"))
	must(t, err)
	wantCounts(t, statsOf(t, l, "sx"), 2, 0, 0, 1, 1)
	must(t, y.Release(ctx(t)))
	wantCounts(t, statsOf(t, l, "sx"), 2, 1, 0, 1, 1)
})

var _ = add("Stats/OtherProcessesCounted", func(t *testing.T, e *env) {
	if e.h.Reopen == nil {
		t.Skip("a store of one process")
	}
	l, s := e.locks(t)
	define(t, l, "so", 1)
	define(t, l, "so-fam/*", 1)
	other := sleeplock.New(e.h.Reopen(t, s))
	t.Cleanup(func() { _ = other.Close() })
	pairs(t, other, "so", 5)
	pairs(t, other, "so-fam/1", 3)
	pairs(t, l, "so", 2)
	wantCounts(t, statsOf(t, l, "so"), 7, 7, 0, 0, 0)
	wantCounts(t, statsOf(t, other, "so-fam/*"), 3, 3, 0, 0, 0)
})
