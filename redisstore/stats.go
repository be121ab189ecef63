package redisstore

import (
	"context"
	"sort"

	"github.com/sleeplock/sleeplock/store"
)

// Stats implements store.StatsReader: one script per root, in one
// pipeline. Refusals are this process's own: a refused try writes
// nothing. Every hold is timed (HoldSampling 1).
func (s *Store) Stats(ctx context.Context) ([]store.Stats, error) {
	replies, err := s.perRoot(ctx, fnStats)
	if err != nil {
		return nil, err
	}
	out := []store.Stats{}
	for _, r := range replies {
		for _, x := range list(r.arg(0)) {
			if e, ok := statsOf(list(x)); ok {
				e.Refusals = s.refusalsOf(e.Name)
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// statsOf reads an entry of lua/stats.lua.
func statsOf(a []any) (store.Stats, bool) {
	if len(a) < 10 {
		return store.Stats{}, false
	}
	e := store.Stats{Name: str(a[0]), Family: integer(a[1]) == 1, Slots: int(integer(a[2])), Locks: int(integer(a[3])),
		Running: int(integer(a[4])), Expired: int(integer(a[5])), Waiting: int(integer(a[6])), HoldSampling: 1}
	c := list(a[7])
	if len(c) < 8 {
		return store.Stats{}, false
	}
	e.Acquisitions, e.Releases = uint64(integer(c[0])), uint64(integer(c[1]))
	e.Expiries, e.Losses = uint64(integer(c[2])), uint64(integer(c[3]))
	e.Waits.Count, e.Waits.Sum = uint64(integer(c[4])), durMicros(integer(c[5]))
	e.Holds.Count, e.Holds.Sum = uint64(integer(c[6])), durMicros(integer(c[7]))
	for i, b := range list(a[8]) {
		if i < store.HistogramBuckets {
			e.Waits.Buckets[i] = uint64(integer(b))
		}
	}
	for i, b := range list(a[9]) {
		if i < store.HistogramBuckets {
			e.Holds.Buckets[i] = uint64(integer(b))
		}
	}
	if e.Acquisitions > e.Waits.Count {
		e.Waits.Buckets[0] += e.Acquisitions - e.Waits.Count
		e.Waits.Count = e.Acquisitions
	}
	return e, true
}

var _ store.StatsReader = (*Store)(nil)
