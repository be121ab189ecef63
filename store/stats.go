package store

import (
	"context"
	"time"
)

// StatsReader is implemented by stores that keep counters in their lock
// records (every store of this module does). Package sleeplock's
// Locks.Stats reads it; a store without it reports gauges only.
type StatsReader interface {
	// Stats reports every defined lock and every family (its members in
	// use and forgotten folded into it), sorted by name, in one read: on
	// a database store one query, whatever the number of locks. Counters
	// count every process's changes since the lock or family was defined
	// (the memory store: since it was made in this process); they never
	// go down while the definition lives.
	Stats(ctx context.Context) ([]Stats, error)
}

// Stats are the counters and gauges of a lock, or of a family with its
// members folded in: the one source of package sleeplock's Locks.Stats,
// of the metrics packages, and of the CLI's state and serve.
type Stats struct {
	Name   string // a lock's name, or a family's pattern ("chat/*")
	Family bool
	// Gauges, now. A family's Slots, Running, Expired and Waiting are the
	// sums over its members in use, Locks their number (1 for a lock).
	Slots, Locks, Running, Expired, Waiting int
	// Acquisitions counts grants (a re-entrant acquisition is not one).
	Acquisitions uint64
	// Releases counts holds ended by a release, by the holder or by
	// someone else (ReleaseStale, an operator).
	Releases uint64
	// Refusals counts tries and no-wait acquisitions turned down. On
	// PostgreSQL (pgstore) and Redis (redisstore), whose refused tries
	// write nothing, it counts the refusals of the reading process only.
	Refusals uint64
	// Expiries counts holds taken over after their TTL (or as stale).
	Expiries uint64
	// Losses counts holds that ended by someone else's hand: taken over
	// (Expired) or released by someone other than their holder.
	Losses uint64
	// Waits is the time grants spent in the queue. Only grants that
	// waited are timed; the others (Acquisitions - Waits.Count of them) are
	// in its first bucket with a duration of 0, so Waits.Count equals
	// Acquisitions. The memory store times waits only from its first
	// Stats read on: a grant that queued before it is counted in the
	// first bucket, as one that did not wait.
	Waits Histogram
	// Holds is the time holds lasted, observed when they end: every
	// HoldSampling-th grant of a lock (by fencing token) is timed, so the
	// uncontended path reads no clock. Holds.Count counts the samples;
	// Releases+Expiries is the exact number of ended holds.
	Holds Histogram
	// HoldSampling is N of "1 in N" for Holds (1: every hold is timed):
	// 256 on the memory store and PostgreSQL, 1 on SQLite and Redis. It
	// is at least 1 in N: so that a lock taken seldom has figures, each
	// PostgreSQL store also times the first hold its fast path releases
	// of a lock, and one every 30 s after; the memory store, from its
	// first Stats read on, the next hold of a lock after a read, at most
	// one every 30 s.
	HoldSampling int
}

// HistogramBounds are the upper bounds of the buckets of Histogram: 1 ms
// times powers of 4, up to about 17 minutes; a last bucket counts the
// rest.
var HistogramBounds = [HistogramBuckets - 1]time.Duration{
	time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond, 64 * time.Millisecond,
	256 * time.Millisecond, 1024 * time.Millisecond, 4096 * time.Millisecond, 16384 * time.Millisecond,
	65536 * time.Millisecond, 262144 * time.Millisecond, 1048576 * time.Millisecond,
}

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = 12

// Histogram counts durations in the buckets of HistogramBounds.
type Histogram struct {
	// Buckets[i] counts the durations d with HistogramBounds[i-1] < d <=
	// HistogramBounds[i] (not cumulative); the last counts those above
	// every bound.
	Buckets [HistogramBuckets]uint64
	Count   uint64
	Sum     time.Duration
}

// Bucket returns the index in Histogram.Buckets of d.
func Bucket(d time.Duration) int {
	for i, b := range HistogramBounds {
		if d <= b {
			return i
		}
	}
	return len(HistogramBounds)
}

// Observe counts d.
func (h *Histogram) Observe(d time.Duration) {
	if h == nil {
		return
	}
	if d < 0 {
		d = 0
	}
	h.Buckets[Bucket(d)]++
	h.Count++
	h.Sum += d
}

// Add adds o's counts to h.
func (h *Histogram) Add(o Histogram) {
	if h == nil {
		return
	}
	for i := range h.Buckets {
		h.Buckets[i] += o.Buckets[i]
	}
	h.Count += o.Count
	h.Sum += o.Sum
}

// Add adds o's gauges and counters to s (to report several entries under
// one label); s keeps its Name and Family.
func (s *Stats) Add(o *Stats) {
	if s == nil || o == nil {
		return
	}
	s.Slots += o.Slots
	s.Locks += o.Locks
	s.Running += o.Running
	s.Expired += o.Expired
	s.Waiting += o.Waiting
	s.Acquisitions += o.Acquisitions
	s.Releases += o.Releases
	s.Refusals += o.Refusals
	s.Expiries += o.Expiries
	s.Losses += o.Losses
	s.Waits.Add(o.Waits)
	s.Holds.Add(o.Holds)
	s.HoldSampling = max(s.HoldSampling, o.HoldSampling)
}
