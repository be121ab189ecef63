// Package endwatch keeps the watchers of holds that a database store sees
// end in its own process (released, taken over by a grant made here, found
// not held), for the stores' store.Watcher. A hold that ends in another
// process is learnt by the holder's next renewal, as with any database
// store.
package endwatch

import (
	"strconv"
	"sync"
)

// Keep is how many ended holds a Set remembers, for Watch calls that come
// after the end.
const Keep = 4096

// Set is the watchers of one store. The zero Set is ready to use; it is
// safe for concurrent use.
type Set struct {
	mu   sync.Mutex
	m    map[string][]func(error)
	gone map[string]error // the last Keep holds seen ending
	ring []string         // keys of gone, oldest first
}

func key(lock, ref string, token int64) string {
	return lock + "\x00" + ref + "\x00" + strconv.FormatInt(token, 10)
}

// Watch calls f once the hold (lock, ref, token) ends: at once, on the
// caller's goroutine, when this Set saw it end already (among its last Keep
// ended holds); otherwise when Ended is called for it.
func (s *Set) Watch(lock, ref string, token int64, f func(reason error)) {
	k := key(lock, ref, token)
	s.mu.Lock()
	if reason, ok := s.gone[k]; ok {
		s.mu.Unlock()
		f(reason)
		return
	}
	if s.m == nil {
		s.m = make(map[string][]func(error))
	}
	s.m[k] = append(s.m[k], f)
	s.mu.Unlock()
}

// Ended calls and forgets the watchers of a hold that ended, with reason,
// and remembers the end for later Watch calls.
func (s *Set) Ended(lock, ref string, token int64, reason error) {
	k := key(lock, ref, token)
	s.mu.Lock()
	fs := s.m[k]
	delete(s.m, k)
	if s.gone == nil {
		s.gone = make(map[string]error)
	}
	if _, ok := s.gone[k]; !ok {
		if len(s.ring) >= Keep {
			delete(s.gone, s.ring[0])
			s.ring = s.ring[1:]
		}
		s.ring = append(s.ring, k)
	}
	s.gone[k] = reason
	s.mu.Unlock()
	for _, f := range fs {
		f(reason)
	}
}
