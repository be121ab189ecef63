package sqlitestore

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/sleeplock/sleeplock/store"
)

// watchers implements store.Watcher for the holds this process sees end
// (released, taken over or found gone by an operation of this store). A
// hold ended by another process is learnt by the holder's next renewal.
type watchers struct {
	mu   sync.Mutex
	m    map[string][]func(error)
	gone map[string]error // the last goneKeep holds seen ending
	ring []string
}

const goneKeep = 4096

type ending struct {
	lock, ref string
	token     int64
	reason    error
}

func watchKey(lock, ref string, token int64) string {
	return lock + "\x00" + ref + "\x00" + strconv.FormatInt(token, 10)
}

// Watch implements store.Watcher: f is called when this process sees h's
// first lock end, at once if it has seen that already.
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

func (s *Store) ended(e ending) {
	k := watchKey(e.lock, e.ref, e.token)
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
	s.w.gone[k] = e.reason
	s.w.mu.Unlock()
	for _, f := range fs {
		f(e.reason)
	}
}

func lostBecause(why string) error { return fmt.Errorf("%w: %s", store.ErrLeaseLost, why) }
