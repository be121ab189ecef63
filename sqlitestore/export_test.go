package sqlitestore

import "github.com/sleeplock/sleeplock/store"

// BeforeCommit makes f run just before each COMMIT of s's write
// transactions, with the events the transaction emitted (to be delivered
// once it commits). Set it before s is used.
func BeforeCommit(s *Store, f func(evs []store.Event)) {
	s.beforeCommit = func(t *txn) {
		evs := make([]store.Event, len(t.evs))
		for i, p := range t.evs {
			evs[i] = p.e
		}
		f(evs)
	}
}

// OnBusy makes f run each time a statement of s finds the database busy,
// before s tries again. Set it before s is used.
func OnBusy(s *Store, f func()) { s.onBusy = f }
