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
// A hold past its expiry is left out: nobody renews it, but the next
// caller takes its slot, so it is not stuck (an alert on it would fire
// until the lock is taken again). Labels whose locks have no live holder
// are absent.
func (s *Set[T]) Holds(states []store.State) map[*T]Holds {
	out := make(map[*T]Holds)
	for i := range states {
		st := &states[i]
		var l *T
		var h Holds
		for _, hd := range st.Holders {
			if !hd.Expires.IsZero() && !st.Now.Before(hd.Expires) {
				continue
			}
			if l == nil {
				l = s.Get(st.Name)
				h = out[l]
			}
			if !hd.Acquired.IsZero() {
				h.Oldest = max(h.Oldest, st.Now.Sub(hd.Acquired))
			}
			if hd.Late(st.Now) {
				h.Late++
			}
		}
		if l != nil {
			out[l] = h
		}
	}
	return out
}
