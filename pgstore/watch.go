package pgstore

import (
	"fmt"

	"github.com/sleeplock/sleeplock/store"
)

// Watch implements store.Watcher for the holds that this process sees end:
// taken over by a grant made here, released here (by the holder, by a stale
// release or an undo), or found not held by a release, renewal or check
// made here. It reads nothing from the database: f is called at once when
// this process saw the hold of h's first lock end (among its last 4096
// ended holds); otherwise when it does. A hold that ends on another node is
// learnt by the holder's next renewal, as with any database store.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	if s == nil || f == nil {
		return
	}
	s.w.Watch(h.Name, h.Ref.String(), h.Token, f)
}

// ended calls and forgets the watchers of a hold that ended.
func (s *Store) ended(lock, ref string, token int64, reason error) {
	s.w.Ended(lock, ref, token, reason)
}

// lostHandle calls the watchers of h's first lock: h was found not held.
func (s *Store) lostHandle(h *store.Handle, why string) {
	s.ended(h.Name, h.Ref.String(), h.Token, fmt.Errorf("%w: %s", store.ErrLeaseLost, why))
}
