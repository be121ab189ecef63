// Package endwatch keeps the watchers of holds that a database store sees
// end in its own process (released, taken over by a grant made here, found
// not held, or told by another process that it ended it), for the stores'
// store.Watcher. A hold that ends in another process without a word is
// learnt by the holder's next renewal.
package endwatch

import "sync"

// Keep is how many ended holds a Set remembers, for Watch calls that come
// after the end.
const Keep = 4096

// Set is the watchers of one store. The zero Set is ready to use; it is
// safe for concurrent use.
type Set struct {
	mu   sync.Mutex
	m    map[hold][]func(error)
	gone map[hold]error // the last Keep holds seen ending
	ring []hold         // keys of gone, oldest first
}

// hold is a hold's key: a struct, which costs no allocation to build
// (the hot paths of the stores watch and end one per lease).
type hold struct {
	lock, ref string
	token     int64
}

// Watch calls f once the hold (lock, ref, token) ends: at once, on the
// caller's goroutine, when this Set saw it end already (among its last Keep
// ended holds); otherwise when Ended is called for it.
func (s *Set) Watch(lock, ref string, token int64, f func(reason error)) {
	k := hold{lock, ref, token}
	s.mu.Lock()
	if reason, ok := s.gone[k]; ok {
		s.mu.Unlock()
		f(reason)
		return
	}
	if s.m == nil {
		s.m = make(map[hold][]func(error))
	}
	s.m[k] = append(s.m[k], f)
	s.mu.Unlock()
}

// Len returns how many holds have watchers: holds watched and not seen
// ending yet.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Ended calls and forgets the watchers of a hold that ended, with reason,
// and remembers the end for later Watch calls.
func (s *Set) Ended(lock, ref string, token int64, reason error) {
	k := hold{lock, ref, token}
	s.mu.Lock()
	fs := s.m[k]
	delete(s.m, k)
	if s.gone == nil {
		s.gone = make(map[hold]error)
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
