package pgstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

// Watch implements store.Watcher for the holds that this process sees end:
// taken over by a grant made here, released here (by the holder, by a stale
// release or an undo), or found not held by a release, renewal or check
// made here; and for the holds that another node released naming their
// ref, released as stale or deleted (Delete with force), which that node's
// statement tells every store of the schema on its channel when it
// commits (lost() of sql/release.sql). It reads nothing from the database:
// f is called at once when this process saw the hold of h's first lock end
// (among its last 4096 ended holds); otherwise when it does. The first
// Watch starts the store's LISTEN connection (not its heartbeat). A hold
// taken over by another node after its TTL, or whose end was told while
// the LISTEN connection was down, is learnt by the holder's next renewal.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	if s == nil || f == nil {
		return
	}
	s.w.Watch(h.Name, h.Ref.String(), h.Token, f)
	s.d.watch()
}

// lost handles the notification of lost(), a hold that another node
// ended, without its "e": why, token, lock and ref, each after a tab
// (names and refs have no control characters); why is r (released naming
// its ref), s (released as stale) or d (its lock deleted).
func (d *dispatcher) lost(msg string) {
	f := strings.SplitN(msg, "\t", 4)
	if len(f) != 4 {
		return
	}
	token, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return
	}
	lock, ref := f[2], f[3]
	var reason error
	switch f[0] {
	case "d":
		reason = store.DeletedHold(lock)
	case "s":
		reason = fmt.Errorf("%w: released as stale", store.ErrLeaseLost)
	default:
		reason = fmt.Errorf("%w: released by another caller naming its ref", store.ErrLeaseLost)
	}
	d.s.ended(lock, ref, token, reason)
}

// ended calls and forgets the watchers of a hold that ended.
func (s *Store) ended(lock, ref string, token int64, reason error) {
	s.w.Ended(lock, ref, token, reason)
}

// lostHandle calls the watchers of h's first lock: h was found not held.
func (s *Store) lostHandle(h *store.Handle, why string) {
	s.ended(h.Name, h.Ref.String(), h.Token, fmt.Errorf("%w: %s", store.ErrLeaseLost, why))
}
