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
	m    map[hold]entry // holds watched and not ended yet, and the last Keep holds seen ending
	ring []hold         // the ended holds of m, in the order they ended (up to Keep)
	next int            // once ring is full: its oldest, which the next end replaces
	live int            // holds of m watched and not ended yet
}

// hold is a hold's key: a struct, which costs no allocation to build
// (the hot paths of the stores watch and end one per lease).
type hold struct {
	lock, ref string
	token     int64
}

// entry is a hold of a Set: its watchers until it ends, then why it
// ended. One map holds both, so that a lease's Watch and Ended look its
// hold up once each.
type entry struct {
	f      func(error)   // the first watcher (most holds have one: no slice)
	more   []func(error) // the others
	reason error         // why it ended, once ended
	ended  bool
}

// Watch calls f once the hold (lock, ref, token) ends: at once, on the
// caller's goroutine, when this Set saw it end already (among its last Keep
// ended holds); otherwise when Ended is called for it.
func (s *Set) Watch(lock, ref string, token int64, f func(reason error)) {
	k := hold{lock, ref, token}
	s.mu.Lock()
	e, ok := s.m[k]
	if e.ended {
		s.mu.Unlock()
		f(e.reason)
		return
	}
	if s.m == nil {
		s.m = make(map[hold]entry)
	}
	if !ok {
		e.f = f
		s.live++
	} else {
		e.more = append(e.more, f)
	}
	s.m[k] = e
	s.mu.Unlock()
}

// Len returns how many holds have watchers: holds watched and not seen
// ending yet.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// Ended calls and forgets the watchers of a hold that ended, with reason,
// and remembers the end for later Watch calls.
func (s *Set) Ended(lock, ref string, token int64, reason error) {
	k := hold{lock, ref, token}
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[hold]entry)
	}
	e, ok := s.m[k]
	if !e.ended {
		if ok {
			s.live--
		}
		switch {
		case len(s.ring) < Keep:
			if s.ring == nil {
				s.ring = make([]hold, 0, Keep)
			}
			s.ring = append(s.ring, k)
		default: // forget the oldest end
			delete(s.m, s.ring[s.next])
			s.ring[s.next] = k
			s.next = (s.next + 1) % Keep
		}
	}
	s.m[k] = entry{reason: reason, ended: true}
	s.mu.Unlock()
	if e.ended {
		return
	}
	if e.f != nil {
		e.f(reason)
	}
	for _, f := range e.more {
		f(reason)
	}
}
