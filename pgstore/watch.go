package pgstore

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/sleeplock/sleeplock/store"
)

// watchers implements store.Watcher for the holds that this process sees
// end: taken over by a grant made here, released here (by the holder, by a
// stale release or an undo), or found not held by a release, renewal or
// check made here. A hold that ends on another node is learnt by the
// holder's next renewal, as with any database store.
type watchers struct {
	mu   sync.Mutex
	m    map[string][]func(error)
	gone map[string]error // holds seen ending here, the last goneKeep of them
	ring []string         // keys of gone, oldest first
}

// goneKeep is how many ended holds a store remembers for Watch calls that
// come after the end.
const goneKeep = 4096

func watchKey(lock, ref string, token int64) string {
	return lock + "\x00" + ref + "\x00" + strconv.FormatInt(token, 10)
}

// Watch implements store.Watcher. It registers f on h's first lock. It
// reads nothing from the database: f is called at once when this process
// saw the hold end (among its last 4096 ended holds); otherwise the hold is
// taken to be held.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	if s == nil || f == nil {
		return
	}
	k := watchKey(h.Name, h.Ref.String(), h.Token)
	s.w.mu.Lock()
	if reason, ok := s.w.gone[k]; ok {
		s.w.mu.Unlock()
		f(reason)
		return
	}
	if s.w.m == nil {
		s.w.m = make(map[string][]func(error))
	}
	s.w.m[k] = append(s.w.m[k], f)
	s.w.mu.Unlock()
}

// ended calls and forgets the watchers of a hold that ended.
func (s *Store) ended(lock, ref string, token int64, reason error) {
	k := watchKey(lock, ref, token)
	s.w.mu.Lock()
	fs := s.w.m[k]
	delete(s.w.m, k)
	if s.w.gone == nil {
		s.w.gone = make(map[string]error)
	}
	if _, ok := s.w.gone[k]; !ok {
		if len(s.w.ring) >= goneKeep {
			delete(s.w.gone, s.w.ring[0])
			s.w.ring = s.w.ring[1:]
		}
		s.w.ring = append(s.w.ring, k)
	}
	s.w.gone[k] = reason
	s.w.mu.Unlock()
	for _, f := range fs {
		f(reason)
	}
}

// lostHandle calls the watchers of h's first lock: h was found not held.
func (s *Store) lostHandle(h *store.Handle, why string) {
	s.ended(h.Name, h.Ref.String(), h.Token, fmt.Errorf("%w: %s", store.ErrLeaseLost, why))
}
