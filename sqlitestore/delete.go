package sqlitestore

import (
	"context"
	"strings"

	"github.com/sleeplock/sleeplock/internal/inuse"
	"github.com/sleeplock/sleeplock/store"
)

// Delete implements store.Store in one transaction: a lock in use is
// refused before anything is written (but the rows of dead processes,
// which loading a lock drops); with force its holders end (released by
// another) and its waiters' rows go, so that their next poll finds no
// definition (ErrNotFound). Tokens come from the counter every grant
// draws from, so a lock defined again grants tokens above its old ones.
func (s *Store) Delete(ctx context.Context, name string, force bool, ev store.Emitter) (store.Deleted, error) {
	if err := store.CheckDefinition(name, 1); err != nil {
		return store.Deleted{}, err
	}
	var d store.Deleted
	err := s.do(ctx, func(t *txn) error {
		d = store.Deleted{}
		x, err := t.doom(name, ev)
		if err != nil {
			return err
		}
		if u := x.count(&d); u != nil && !force {
			return u
		}
		return t.remove(x, ev)
	})
	if err != nil {
		return store.Deleted{}, err
	}
	return d, nil
}

// doomed is a definition that a Delete (or a Reconcile's prune) removes,
// with its locks (a family's members in use) as the transaction loaded
// them.
type doomed struct {
	name  string
	slots int
	locks []*lk
}

// doom loads the definition name and its locks; NotDeletable when name
// has no definition of its own.
func (t *txn) doom(name string, ev store.Emitter) (*doomed, error) {
	x := &doomed{name: name}
	found, err := t.queryRow("SELECT slots FROM defs WHERE name = ?", []any{name}, &x.slots)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, store.NotDeletable(name)
	}
	names := []string{name}
	if strings.HasSuffix(name, store.FamilySuffix) {
		if names, err = t.members(name); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		l, err := t.load(n, ev)
		if err != nil {
			return nil, err
		}
		x.locks = append(x.locks, l)
	}
	return x, nil
}

// count adds x's holds and waiters to d, and returns the *InUseError of x
// (counting d's totals) when x is in use.
func (x *doomed) count(d *store.Deleted) *store.InUseError {
	return inuse.Count(d, x.locks, func(l *lk) (string, int, int) {
		return l.name, len(l.holders), len(l.queue)
	})
}

// remove deletes x: its waiters' rows (their next poll finds no
// definition), its holders (released by another), its definition and its
// counters.
func (t *txn) remove(x *doomed, ev store.Emitter) error {
	for _, l := range x.locks {
		for len(l.queue) > 0 {
			if err := t.dropWaiter(l.queue[0]); err != nil {
				return err
			}
		}
		reason := endReason(endDeleted, l.name)
		for len(l.holders) > 0 {
			if err := t.dropTelling(l, len(l.holders)-1, ev, store.EventReleased, reason, endDeleted); err != nil {
				return err
			}
		}
		delete(t.locks, l.name)
		if l.name != x.name {
			if err := t.emit(ev, store.Event{Type: store.EventDeleted, Lock: l.name, Slots: l.slots}); err != nil {
				return err
			}
		}
	}
	if err := t.exec("DELETE FROM defs WHERE name = ?", x.name); err != nil {
		return err
	}
	// Its counters go with it, those this transaction counted too.
	delete(t.stats, x.name)
	if err := t.exec("DELETE FROM stats WHERE name = ?", x.name); err != nil {
		return err
	}
	t.changed = true
	return t.emit(ev, store.Event{Type: store.EventDeleted, Lock: x.name, Slots: x.slots})
}
