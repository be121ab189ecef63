package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// refusals counts the refusals of this process: a refused try writes
// nothing to the database (no transaction id, no WAL), so nothing there
// can count it. Counts are kept by definition: a name is counted under its
// own definition or family, as last seen by Stats, so the map holds at
// most the definitions plus the names refused before Stats first saw
// their definition (folded at the next Stats).
type refusals struct {
	mu   sync.Mutex
	n    map[string]uint64
	defs map[string]bool // the definitions Stats last read
}

// refused counts a refusal of lock name.
func (r *refusals) refused(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]uint64{}
	}
	r.n[r.key(name)]++
}

// key returns the definition of name among r.defs, else name.
func (r *refusals) key(name string) string {
	if r.defs[name] {
		return name
	}
	key := name
	store.FamilyOf(name, func(p string) bool {
		if r.defs[p] {
			key = p
			return false
		}
		return true
	})
	return key
}

// forget drops the counts of definition name, which was deleted, and of
// the names it covered.
func (r *refusals) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.n {
		if n == name || r.key(n) == name {
			delete(r.n, n)
		}
	}
	delete(r.defs, name)
}

// fold records the definitions of sts, moves the counts of names under
// their definitions (dropping those of names no definition covers) and
// sets each entry's Refusals.
func (r *refusals) fold(sts []store.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.defs = make(map[string]bool, len(sts))
	for _, s := range sts {
		r.defs[s.Name] = true
	}
	for name, n := range r.n {
		if r.defs[name] {
			continue
		}
		delete(r.n, name)
		if k := r.key(name); k != name {
			r.n[k] += n
		}
	}
	for i := range sts {
		sts[i].Refusals = r.n[sts[i].Name]
	}
}

// holdSampling is Stats' HoldSampling: timed() of sql/stats.sql times the
// holds whose token is a multiple of it.
const holdSampling = 256

// Stats implements store.StatsReader in one statement (stats() of
// sql/stats.sql), whatever the number of locks. Acquisitions, Releases,
// Expiries, Losses, Waits and Holds count every process's holds: the
// statements that grant and end a hold bump them in the lock's row, and
// the sweep folds a deleted row's into its definition's. The counts are
// exact. One hold in holdSampling (256) is timed, at its end, from the
// acquisition time its row keeps: the holds whose fencing token is a
// multiple of 256, so that the release of any other writes its lock row's
// release count and no histogram. Tokens are drawn from one sequence for
// every lock, so a lock's share of timed holds is 1 in 256 on average over
// many grants, not exactly. So that a lock taken seldom (a cron job's,
// whose process releases it once) has hold times too, a hold's end is
// also timed when the store has timed none of that lock (of the locks
// sharing its hint entry) by time in the last 30 s (holdSampleEvery,
// hints.go sampleDue): by the fast path (the sampled statements), by
// release_one() and release() (p_sample: a lock of more than 1,024 slots,
// several locks at once) and by the takeover of an expired hold
// (acquire()'s p_sample, samplePeek). A grant's wait is timed from when it queued,
// every one. Refusals are this process's only: a refused try writes
// nothing to the database.
func (s *Store) Stats(ctx context.Context) ([]store.Stats, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var out []store.Stats
	err := s.c.query(ctx, s.q.stats, nil, func(scan func(...any) error) error {
		var e store.Stats
		var slots, locks, running, expired, waiting int32
		var c [8]int64
		var wb, hb string
		if err := scan(&e.Name, &slots, &e.Family, &locks, &running, &expired, &waiting, &c[0], &c[1], &c[2], &c[3],
			&c[4], &c[5], &wb, &c[6], &c[7], &hb); err != nil {
			return err
		}
		e.Slots, e.Locks, e.Running, e.Expired, e.Waiting = int(slots), int(locks), int(running), int(expired), int(waiting)
		e.Acquisitions, e.Releases, e.Expiries, e.Losses = uint64(c[0]), uint64(c[1]), uint64(c[2]), uint64(c[3])
		e.HoldSampling = holdSampling
		var err error
		if e.Waits, err = histogram(wb, c[4], c[5]); err != nil {
			return err
		}
		if e.Holds, err = histogram(hb, c[6], c[7]); err != nil {
			return err
		}
		// The grants that did not wait: in the first bucket, with 0.
		if e.Acquisitions > e.Waits.Count {
			e.Waits.Buckets[0] += e.Acquisitions - e.Waits.Count
			e.Waits.Count = e.Acquisitions
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: stats: %w", err)
	}
	s.refusals.fold(out)
	return out, nil
}

// histogram parses the buckets of stats() (numbers separated by spaces).
func histogram(buckets string, count, sumMicros int64) (store.Histogram, error) {
	h := store.Histogram{Count: uint64(count), Sum: time.Duration(sumMicros) * time.Microsecond}
	for i, f := range strings.Fields(buckets) {
		if i >= len(h.Buckets) {
			break
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return h, fmt.Errorf("bucket %d: %w", i, err)
		}
		h.Buckets[i] = n
	}
	return h, nil
}

var _ store.StatsReader = (*Store)(nil)
