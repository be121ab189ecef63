package memstore

import (
	"context"
	"sort"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

// Delete implements store.Store under the store's mutex and the mutexes
// of the locks it deletes: a lock in use is refused before anything
// changes; with force its holds end (released by another) and its
// waiters return DeletedWhileWaiting. A deleted record is forgotten as an
// idle family member is (gone, the token floor raised to its last token),
// so a lock made again under the name grants tokens above its old ones.
func (s *Store) Delete(ctx context.Context, name string, force bool, ev store.Emitter) (store.Deleted, error) {
	if err := s.usable(ctx); err != nil {
		return store.Deleted{}, err
	}
	if err := store.CheckDefinition(name, 1); err != nil {
		return store.Deleted{}, err
	}
	o := op{s: s, ev: ev}
	o.enterGlobal()
	defer o.done()
	if s.closed.Load() {
		return store.Deleted{}, store.ErrClosed
	}
	var locks []*lock
	fam := s.fams[name]
	if strings.HasSuffix(name, store.FamilySuffix) {
		if fam == nil {
			return store.Deleted{}, store.NotDeletable(name)
		}
		s.locks.Range(func(lk *lock) bool {
			if !lk.defined && s.familyOf(lk.name) == fam {
				o.lock(lk)
				if !lk.gone && !lk.defined {
					locks = append(locks, lk)
				}
			}
			return true
		})
		sort.Slice(locks, func(i, j int) bool { return locks[i].name < locks[j].name })
	} else {
		lk := s.load(name)
		if lk == nil {
			return store.Deleted{}, store.NotDeletable(name)
		}
		o.lock(lk)
		if lk.gone || !lk.defined {
			return store.Deleted{}, store.NotDeletable(name)
		}
		locks = append(locks, lk)
	}
	var d store.Deleted
	inUse := ""
	for _, lk := range locks {
		d.Holds += len(lk.holders)
		d.Waiters += len(lk.waits())
		if inUse == "" && len(lk.holders)+len(lk.waits()) > 0 {
			inUse = lk.name
		}
	}
	if inUse != "" && !force {
		return store.Deleted{}, &store.InUseError{Lock: inUse, Holders: d.Holds, Waiters: d.Waiters}
	}
	var others []*lock // the other locks of ended waiters for several
	for _, lk := range locks {
		others = s.endWaiters(&o, lk, others)
		reason := store.DeletedHold(lk.name)
		for len(lk.holders) > 0 {
			s.releaseHolder(&o, lk, lk.holders[len(lk.holders)-1], reason)
		}
		s.stopTimer(lk)
		lk.gone = true
		s.raiseFloor(lk.token) // before the name is free to be made again
		if lk.defined {
			s.locks.Undefine(lk.name, lk)
		}
		s.locks.CompareAndDelete(lk.name, lk)
		if lk.indexed {
			lk.unindex(nil, true)
		}
		o.emit(store.Event{Type: store.EventDeleted, Lock: lk.name, Slots: int(lk.slots)})
	}
	if fam != nil {
		delete(s.fams, name)
		o.emit(store.Event{Type: store.EventDeleted, Lock: name, Slots: fam.slots})
	}
	for _, l := range others {
		if !l.gone {
			s.pump(&o, l)
			s.forget(l)
		}
	}
	return d, nil
}

// endWaiters ends every waiter of lk with DeletedWhileWaiting, taking it
// out of the queues of its other locks too, which it appends to others
// (their queues may move on); global.
func (s *Store) endWaiters(o *op, lk *lock, others []*lock) []*lock {
	for len(lk.waits()) > 0 {
		w := lk.waits()[0]
		for _, l := range w.locks {
			o.lock(l)
			l.dequeue(w)
			if l != lk {
				others = append(others, l)
			}
		}
		w.err = store.DeletedWhileWaiting(lk.name)
		w.signal()
	}
	return others
}
