package sqlitestore

import (
	"context"
	"sort"
	"strings"

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
		var slots int
		found, err := t.queryRow("SELECT slots FROM defs WHERE name = ?", []any{name}, &slots)
		if err != nil {
			return err
		}
		if !found {
			return store.NotDeletable(name)
		}
		names := []string{name}
		family := strings.HasSuffix(name, store.FamilySuffix)
		if family {
			if names, err = t.members(name); err != nil {
				return err
			}
		}
		locks := make([]*lk, 0, len(names))
		inUse := ""
		for _, n := range names {
			l, err := t.load(n, ev)
			if err != nil {
				return err
			}
			locks = append(locks, l)
			d.Holds += len(l.holders)
			d.Waiters += len(l.queue)
			if inUse == "" && len(l.holders)+len(l.queue) > 0 {
				inUse = n
			}
		}
		if inUse != "" && !force {
			return &store.InUseError{Lock: inUse, Holders: d.Holds, Waiters: d.Waiters}
		}
		for _, l := range locks {
			for len(l.queue) > 0 {
				if err := t.dropWaiter(l.queue[0]); err != nil {
					return err
				}
			}
			reason := store.DeletedHold(l.name)
			for len(l.holders) > 0 {
				if err := t.drop(l, len(l.holders)-1, ev, store.EventReleased, reason); err != nil {
					return err
				}
			}
			delete(t.locks, l.name)
			if l.name != name {
				if err := t.emit(ev, store.Event{Type: store.EventDeleted, Lock: l.name, Slots: l.slots}); err != nil {
					return err
				}
			}
		}
		if err := t.exec("DELETE FROM defs WHERE name = ?", name); err != nil {
			return err
		}
		// Its counters go with it, those this transaction counted too.
		delete(t.stats, name)
		if err := t.exec("DELETE FROM stats WHERE name = ?", name); err != nil {
			return err
		}
		t.changed = true
		return t.emit(ev, store.Event{Type: store.EventDeleted, Lock: name, Slots: slots})
	})
	if err != nil {
		return store.Deleted{}, err
	}
	return d, nil
}

// members returns the locks in use (held or queued for) that family
// covers as their definition, by name.
func (t *txn) members(family string) ([]string, error) {
	prefix := strings.TrimSuffix(family, "*")
	var all []string
	err := t.query(`SELECT lock FROM holders WHERE instr(lock, ?) = 1 UNION SELECT lock FROM queue WHERE instr(lock, ?) = 1`,
		[]any{prefix, prefix}, func(scan func(...any) error) error {
			var n string
			if err := scan(&n); err != nil {
				return err
			}
			all = append(all, n)
			return nil
		})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range all {
		def, _, err := t.defOf(n)
		if err != nil {
			return nil, err
		}
		if def == family {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}
