package labels

import (
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Holds is what the holders of the locks under one label show, for the
// gauges of a stuck lock: the age of the oldest hold (0 when none, or when
// the store did not date them) and the holders that are late
// (store.Holder.Late: they missed a renewal they owed).
type Holds struct {
	Oldest time.Duration
	Late   int
}

// Holds sums the holders of states (one Locks.List, with detail) by
// label: the oldest hold's age on each lock's clock, and the late holders.
// Labels whose locks have no holder are absent.
func (s *Set[T]) Holds(states []store.State) map[*T]Holds {
	out := make(map[*T]Holds)
	for i := range states {
		st := &states[i]
		if len(st.Holders) == 0 {
			continue
		}
		l := s.Get(st.Name)
		h := out[l]
		for _, hd := range st.Holders {
			if !hd.Acquired.IsZero() {
				h.Oldest = max(h.Oldest, st.Now.Sub(hd.Acquired))
			}
			if hd.Late(st.Now) {
				h.Late++
			}
		}
		out[l] = h
	}
	return out
}
