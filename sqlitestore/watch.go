package sqlitestore

import (
	"fmt"

	"github.com/sleeplock/sleeplock/store"
)

// ending is a hold this store saw end, for its watchers.
type ending struct {
	lock, ref string
	token     int64
	reason    error
}

// Watch implements store.Watcher for the holds this process sees end
// (released, taken over or found gone by an operation of this store): f is
// called when the hold of h's first lock ends, at once if this store has
// seen that already. A hold ended by another process is learnt by the
// holder's next renewal.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	if s == nil || f == nil {
		return
	}
	s.w.Watch(h.Name, h.Ref.String(), h.Token, f)
}

func (s *Store) ended(e ending) { s.w.Ended(e.lock, e.ref, e.token, e.reason) }

func lostBecause(why string) error { return fmt.Errorf("%w: %s", store.ErrLeaseLost, why) }
