package memstore

import (
	"context"
	"sort"
	"strings"

	"github.com/sleeplock/sleeplock/internal/inuse"
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
	if err := o.enterOpen(); err != nil {
		return store.Deleted{}, err
	}
	defer o.done()
	d, err := s.doom(&o, name)
	if err != nil {
		return store.Deleted{}, err
	}
	var del store.Deleted
	if u := d.count(&del); u != nil && !force {
		return store.Deleted{}, u
	}
	s.pumpAll(&o, s.remove(&o, d, nil))
	return del, nil
}

// doomed is a definition that a Delete (or a Reconcile's prune) removes,
// with its locks (a family's members in use) under their mutexes.
type doomed struct {
	name  string
	fam   *family
	locks []*lock
}

// doom finds the definition name and takes its locks' mutexes; global.
// NotDeletable when name has no definition of its own.
func (s *Store) doom(o *op, name string) (*doomed, error) {
	d := &doomed{name: name, fam: s.fams[name]}
	if strings.HasSuffix(name, store.FamilySuffix) {
		if d.fam == nil {
			return nil, store.NotDeletable(name)
		}
		s.locks.Range(func(lk *lock) bool {
			if !lk.defined && s.familyOf(lk.name) == d.fam {
				o.lock(lk)
				if !lk.gone && !lk.defined {
					d.locks = append(d.locks, lk)
				}
			}
			return true
		})
		sort.Slice(d.locks, func(i, j int) bool { return d.locks[i].name < d.locks[j].name })
		return d, nil
	}
	lk := s.load(name)
	if lk == nil {
		return nil, store.NotDeletable(name)
	}
	o.lock(lk)
	if lk.gone || !lk.defined {
		return nil, store.NotDeletable(name)
	}
	d.locks = append(d.locks, lk)
	return d, nil
}

// count adds d's holds and waiters to del, and returns the *InUseError
// of d (counting del's totals) when d is in use.
func (d *doomed) count(del *store.Deleted) *store.InUseError {
	return inuse.Count(del, d.locks, func(lk *lock) (string, int, int) {
		return lk.name, len(lk.holders), len(lk.waits())
	})
}

// remove deletes d: its waiters end, its holds end (released by another),
// its records are forgotten and its definition goes. It returns others
// with the other locks of the waiters it ended (pumpAll); global.
func (s *Store) remove(o *op, d *doomed, others []*lock) []*lock {
	for _, lk := range d.locks {
		others = s.endWaiters(o, lk, others)
		reason := store.DeletedHold(lk.name)
		for len(lk.holders) > 0 {
			s.releaseHolder(o, lk, lk.holders[len(lk.holders)-1], reason)
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
	if d.fam != nil {
		delete(s.fams, d.name)
		o.emit(store.Event{Type: store.EventDeleted, Lock: d.name, Slots: d.fam.slots})
	}
	return others
}

// pumpAll grants what the ended waiters of several locks left free on
// their other locks; global.
func (s *Store) pumpAll(o *op, others []*lock) {
	for _, l := range others {
		if !l.gone {
			s.pump(o, l)
			s.forget(l)
		}
	}
}

// endWaiters ends every waiter of lk with DeletedWhileWaiting, taking it
// out of the queues of its other locks too, which it appends to others
// (their queues may move on); global.
func (s *Store) endWaiters(o *op, lk *lock, others []*lock) []*lock {
	for len(lk.waits()) > 0 {
		w := lk.waits()[0]
		others = o.unqueue(w, lk, others)
		w.err = store.DeletedWhileWaiting(lk.name)
		w.signal()
	}
	return others
}

// unqueue takes w out of the queue of each of its locks and returns
// others with those of them other than lk, whose queues may move on;
// global.
func (o *op) unqueue(w *waiter, lk *lock, others []*lock) []*lock {
	for _, l := range w.locks {
		o.lock(l)
		l.dequeue(w)
		if l != lk {
			others = append(others, l)
		}
	}
	return others
}
