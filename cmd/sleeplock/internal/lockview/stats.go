package lockview

import "github.com/sleeplock/sleeplock/store"

// Stats is the JSON form of a lock's or family's counters (Locks.Stats),
// shared by `sleeplock state --stats --json` and serve's /api/stats.
type Stats struct {
	Name         string `json:"name"`
	Family       bool   `json:"family"`
	Slots        int    `json:"slots"`
	Locks        int    `json:"locks"`
	Running      int    `json:"running"`
	Expired      int    `json:"expired"`
	Waiting      int    `json:"waiting"`
	Acquisitions uint64 `json:"acquisitions"`
	Releases     uint64 `json:"releases"`
	Refusals     uint64 `json:"refusals"`
	Expiries     uint64 `json:"expiries"`
	Losses       uint64 `json:"losses"`
	// WaitedOver1ms counts the grants that waited more than 1 ms in the
	// queue, WaitMS the total time grants waited; HoldsTimed counts the
	// holds timed (1 in HoldSampling), HoldMS their total time.
	WaitedOver1ms uint64  `json:"waited_over_1ms"`
	WaitMS        float64 `json:"wait_ms"`
	HoldsTimed    uint64  `json:"holds_timed"`
	HoldMS        float64 `json:"hold_ms"`
	HoldSampling  int     `json:"hold_sampling"`
}

// StatsOf returns the views of all, never nil.
func StatsOf(all []store.Stats) []Stats {
	out := make([]Stats, 0, len(all))
	for _, s := range all {
		out = append(out, Stats{
			Name: s.Name, Family: s.Family, Slots: s.Slots, Locks: s.Locks,
			Running: s.Running, Expired: s.Expired, Waiting: s.Waiting,
			Acquisitions: s.Acquisitions, Releases: s.Releases, Refusals: s.Refusals,
			Expiries: s.Expiries, Losses: s.Losses,
			WaitedOver1ms: s.Waits.Count - s.Waits.Buckets[0],
			WaitMS:        float64(s.Waits.Sum.Microseconds()) / 1000,
			HoldsTimed:    s.Holds.Count, HoldMS: float64(s.Holds.Sum.Microseconds()) / 1000,
			HoldSampling: s.HoldSampling,
		})
	}
	return out
}
