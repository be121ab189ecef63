package sqlitestore

import (
	"context"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

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

// Advance dates every lease and waiter of the database back by d, as if d
// had passed on the host's clock. Tests use it to make a TTL pass without
// waiting; waiters' own liveness leases are left as they are.
func (s *Store) Advance(ctx context.Context, d time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	us := d.Microseconds()
	return s.do(ctx, func(t *txn) error {
		if err := t.exec(`UPDATE holders SET acquired = acquired - ?1, renewed = renewed - ?1,
			expires = CASE WHEN expires = 0 THEN 0 ELSE expires - ?1 END`, us); err != nil {
			return err
		}
		t.changed = true
		return t.exec("UPDATE waiters SET since = since - ?", us)
	})
}
