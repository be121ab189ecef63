package memstore

import (
	"context"
	"fmt"

	"github.com/sleeplock/sleeplock/store"
)

// Watch implements store.Watcher.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	if f == nil {
		return
	}
	if err := s.usable(context.Background()); err != nil {
		f(err)
		return
	}
	var hd *holder
	var lk *lock
	for {
		lk = s.load(h.Name)
		if lk == nil {
			break
		}
		lk.lockMu()
		if !lk.gone {
			hd = lk.find(h.Ref, h.Token)
			break
		}
		s.unlockMu(lk)
	}
	if hd == nil {
		if lk != nil {
			s.unlockMu(lk)
		}
		f(fmt.Errorf("%w: not held", store.ErrLeaseLost))
		return
	}
	x := hd.ext()
	x.watch = append(x.watch, f)
	s.unlockMu(lk)
}
