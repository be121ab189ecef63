package sleeplock

import (
	"context"
	"sort"

	"github.com/sleeplock/sleeplock/store"
)

// Stats are the counters and gauges of a lock, or of a family with its
// members folded in (see Locks.Stats).
type Stats = store.Stats

// Histogram counts durations in the buckets of store.HistogramBounds.
type Histogram = store.Histogram

// Stats reports every defined lock and family, sorted by name: its slots,
// holders and waiters now, and its counters (acquisitions, releases,
// refusals, expiries, losses, wait and hold times), counted by the store
// in its lock records as it grants and releases, with no event and no
// notifier. A family's members are folded into it. It is the one source
// of the metrics packages (promevents, otelevents) and of the CLI's state
// and serve: read it at scrape time. On a database store it is one query
// and counts every process's grants (PostgreSQL and Redis: every counter
// but Refusals, which counts this process's refusals); a store that keeps no counters (not
// a store.StatsReader) reports the gauges only. The memory store records
// wait times from its first Stats read on (the first scrape); grants that
// queued before it are counted as grants that did not wait.
func (l *Locks) Stats(ctx context.Context) ([]Stats, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	if r, ok := l.store.(store.StatsReader); ok {
		return r.Stats(ctx)
	}
	states, err := l.store.List(ctx, false)
	if err != nil {
		return nil, err
	}
	return statsOf(states), nil
}

// statsOf folds states into Stats, gauges only.
func statsOf(states []State) []Stats {
	at := make(map[string]int)
	var out []Stats
	for i := range states {
		if st := &states[i]; st.Family {
			at[st.Name] = len(out)
			out = append(out, Stats{Name: st.Name, Family: true, HoldSampling: 1})
		}
	}
	for i := range states {
		st := &states[i]
		if st.Family {
			continue
		}
		j := -1
		store.FamilyOf(st.Name, func(p string) bool {
			if k, ok := at[p]; ok {
				j = k
				return false
			}
			return true
		})
		if j < 0 {
			j = len(out)
			out = append(out, Stats{Name: st.Name, HoldSampling: 1})
		}
		e := &out[j]
		e.Slots += st.Slots
		e.Locks++
		e.Running += st.Running
		e.Expired += st.Expired
		e.Waiting += st.Waiting
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
