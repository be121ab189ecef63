package redisstore

import (
	"fmt"

	"github.com/sleeplock/sleeplock/store"
)

// Watch implements store.Watcher: f is called when the hold of h's first
// lock ends, at once if this store saw that already. The script that ends
// a hold (a release, a takeover, a release by another caller) sends the
// end to the holder's node, on this process or another, so a holder learns
// of a loss at once, not only at its next renewal. A hold is known by its
// lock and token (tokens are never drawn twice under a root), not its
// ref, which need not be written out.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	if s == nil || s.c == nil || f == nil {
		return
	}
	s.w.Watch(h.Name, "", h.Token, f)
}

func lostBecause(why string) error { return fmt.Errorf("%w: %s", store.ErrLeaseLost, why) }
