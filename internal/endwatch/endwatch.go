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
	m    map[hold]watchers // holds watched and not seen ending: few, so a hot map
	gone map[hold]error    // the last Keep holds seen ending (never in m)
	ring []hold            // gone's keys, in the order they ended (up to Keep)
	next int               // once ring is full: its oldest, which the next end replaces
}

// hold is a hold's key: a struct, which costs no allocation to build
// (the hot paths of the stores watch and end one per lease).
type hold struct {
	lock, ref string
	token     int64
}

// watchers are a hold's watchers: most holds have one, which needs no
// slice.
type watchers struct {
	f    func(error)
	more []func(error)
}

// Watch calls f once the hold (lock, ref, token) ends: at once, on the
// caller's goroutine, when this Set saw it end already (among its last Keep
// ended holds); otherwise when Ended is called for it.
func (s *Set) Watch(lock, ref string, token int64, f func(reason error)) {
	k := hold{lock, ref, token}
	s.mu.Lock()
	if w, ok := s.m[k]; ok { // watched already: not ended
		w.more = append(w.more, f)
		s.m[k] = w
		s.mu.Unlock()
		return
	}
	if reason, ok := s.gone[k]; ok {
		s.mu.Unlock()
		f(reason)
		return
	}
	if s.m == nil {
		s.m = make(map[hold]watchers)
	}
	s.m[k] = watchers{f: f}
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
	w, watched := s.m[k]
	if watched {
		delete(s.m, k)
	}
	if s.gone == nil {
		s.gone = make(map[hold]error)
	}
	// A watched hold is not in gone (Watch watches none that is): only
	// an unwatched one may have ended before.
	again := false
	if !watched {
		_, again = s.gone[k]
	}
	if !again {
		switch {
		case len(s.ring) < Keep:
			if s.ring == nil {
				s.ring = make([]hold, 0, Keep)
			}
			s.ring = append(s.ring, k)
		default: // forget the oldest end
			delete(s.gone, s.ring[s.next])
			s.ring[s.next] = k
			s.next = (s.next + 1) % Keep
		}
	}
	s.gone[k] = reason
	s.mu.Unlock()
	if w.f != nil {
		w.f(reason)
	}
	for _, f := range w.more {
		f(reason)
	}
}
