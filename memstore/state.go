package memstore

import (
	"context"
	"sort"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

// State implements store.Store.
func (s *Store) State(ctx context.Context, name string, detail bool) (store.State, error) {
	if err := s.usable(ctx); err != nil {
		return store.State{}, err
	}
	if s.closed.Load() {
		return store.State{}, store.ErrClosed
	}
	if !strings.HasSuffix(name, store.FamilySuffix) {
		for lk := s.load(name); lk != nil; lk = s.load(name) {
			lk.lockMu()
			if !lk.gone {
				st := s.state(lk, detail)
				s.unlockMu(lk)
				return st, nil
			}
			s.unlockMu(lk)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.fams[name]; f != nil {
		return store.State{Name: name, Slots: f.slots, Family: true, Now: s.clock.Now()}, nil
	}
	lk, err := s.get(name, false, true)
	if err != nil {
		return store.State{}, err
	}
	if lk != nil {
		lk.lockMu()
		defer s.unlockMu(lk)
		return s.state(lk, detail), nil
	}
	var fam *family
	store.FamilyOf(name, func(p string) bool {
		fam = s.fams[p]
		return fam == nil
	})
	return store.State{Name: name, Slots: fam.slots, Now: s.clock.Now()}, nil
}

// state reports lk; its mutex is held.
func (s *Store) state(lk *lock, detail bool) store.State {
	st := store.State{Name: lk.name, Slots: int(lk.slots), Running: lk.used(), Leases: len(lk.holders), Waiting: len(lk.waits()), Now: s.clock.Now()}
	if lk.nexp > 0 {
		for _, h := range lk.holders {
			if exp := h.expires(); !exp.IsZero() && !exp.After(st.Now) {
				st.Running -= h.weight()
				st.Expired += h.weight()
			}
		}
	}
	if !detail {
		return st
	}
	for _, h := range lk.holders {
		st.Holders = append(st.Holders, store.Holder{Ref: h.ref.String(), Kind: h.kind(), Token: h.token, Count: int(h.holds()), Weight: h.weight(),
			Acquired: h.acquired(), Renewed: renewed(h), Expires: h.expires(), Hold: holdOf(h)})
	}
	sort.Slice(st.Holders, func(i, j int) bool { return st.Holders[i].Token < st.Holders[j].Token })
	for _, w := range lk.waits() {
		// Since is dated back from Now by the wait (see waitClock).
		wt := store.Waiter{Ref: w.ref.String(), Since: st.Now.Add(-st.Now.Sub(w.queuedAt())), Weight: w.weight(lk)}
		if w.req != nil {
			wt.Kind, wt.Locks = w.req.Kind, w.req.Names()
		} else {
			wt.Locks = []string{lk.name}
		}
		st.Queue = append(st.Queue, wt)
	}
	return st
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, detail bool) ([]store.State, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	out := make([]store.State, 0, len(s.fams))
	for _, f := range s.fams {
		out = append(out, store.State{Name: f.pattern, Slots: f.slots, Family: true, Now: s.clock.Now()})
	}
	s.locks.Range(func(lk *lock) bool {
		lk.lockMu()
		if !lk.gone {
			out = append(out, s.state(lk, detail))
		}
		s.unlockMu(lk)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
