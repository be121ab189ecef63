// Package announce keeps the listeners of a store's announcements (see
// store.Announcer), per lock name, for the stores of this module: the
// memory store calls them directly, the database stores when a
// notification or a change of their file arrives.
package announce

import "sync"

// Set is the listeners of one store. The zero Set is ready to use; it is
// safe for concurrent use.
type Set struct {
	mu sync.Mutex
	m  map[string][]*listener
	n  int
}

// listener is one Listen call: mu keeps its calls from overlapping and
// from running after stop.
type listener struct {
	mu      sync.Mutex
	f       func(string)
	stopped bool
}

// Listen adds f as a listener of name; stop removes it, and once stop
// returns f is not called again.
func (s *Set) Listen(name string, f func(msg string)) (stop func()) {
	if s == nil || f == nil {
		return func() {}
	}
	l := &listener{f: f}
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string][]*listener)
	}
	s.m[name] = append(s.m[name], l)
	s.n++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			ls := s.m[name]
			for i, x := range ls {
				if x == l {
					ls = append(ls[:i:i], ls[i+1:]...)
					break
				}
			}
			if len(ls) == 0 {
				delete(s.m, name)
			} else {
				s.m[name] = ls
			}
			s.n--
			s.mu.Unlock()
			l.mu.Lock()
			l.stopped = true
			l.mu.Unlock()
		})
	}
}

// Len returns the number of listeners.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Send calls the listeners of name with msg.
func (s *Set) Send(name, msg string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	ls := append([]*listener(nil), s.m[name]...)
	s.mu.Unlock()
	for _, l := range ls {
		l.call(msg)
	}
}

// SendAll calls every listener with msg (an empty msg: something may have
// changed).
func (s *Set) SendAll(msg string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	var ls []*listener
	for _, x := range s.m {
		ls = append(ls, x...)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.call(msg)
	}
}

func (l *listener) call(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.f(msg)
	}
}
