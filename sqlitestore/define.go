package sqlitestore

import (
	"context"
	"sort"
	"strings"

	"github.com/sleeplock/sleeplock/internal/storecall"
	"github.com/sleeplock/sleeplock/store"
)

// Reconcile implements store.Store in one transaction, rolled back when
// anything fails: it reads the definitions (current) and carries out
// store.PlanReconcile's plan.
func (s *Store) Reconcile(ctx context.Context, defs []store.Definition, opts store.ReconcileOptions, ev store.Emitter) (store.Reconciled, error) {
	if _, err := store.CheckDefinitions(defs); err != nil {
		return store.Reconciled{}, err
	}
	var r store.Reconciled
	err := s.do(ctx, func(t *txn) error {
		var err error
		if r, err = t.reconcile(defs, opts, ev); err != nil {
			t.abort = true
		}
		return err
	})
	if err != nil {
		return store.Reconciled{}, err
	}
	return r, nil
}

// reconcile is Reconcile's transaction.
func (t *txn) reconcile(defs []store.Definition, opts store.ReconcileOptions, ev store.Emitter) (store.Reconciled, error) {
	current, doomed, err := t.current(defs, opts.Prune, ev)
	if err != nil {
		return store.Reconciled{}, err
	}
	p, err := store.PlanReconcile(defs, current, opts)
	if err != nil {
		return store.Reconciled{}, err
	}
	for _, st := range p.Steps {
		switch st.Kind {
		case store.StepPrune:
			err = t.remove(doomed[st.Name], ev)
		case store.StepCreate:
			_, err = t.define(st.Name, st.Slots, ev)
		case store.StepResize:
			err = t.resize(st.Name, st.Slots, ev)
		}
		if err != nil {
			return store.Reconciled{}, err
		}
	}
	return p.Result(), nil
}

// current reads the definitions defs name and, with prune, every other
// definition with its use, doomed (loaded) to be removed if the plan
// prunes it.
func (t *txn) current(defs []store.Definition, prune bool, ev store.Emitter) ([]store.Defined, map[string]*doomed, error) {
	var current []store.Defined
	want := make(map[string]bool, len(defs))
	for _, d := range defs {
		if want[d.Name] {
			continue
		}
		want[d.Name] = true
		c := store.Defined{Name: d.Name}
		found, err := t.queryRow("SELECT slots FROM defs WHERE name = ?", []any{d.Name}, &c.Slots)
		if err != nil {
			return nil, nil, err
		}
		if found {
			current = append(current, c)
		}
	}
	if !prune {
		return current, nil, nil
	}
	names, err := t.names("SELECT name FROM defs ORDER BY name")
	if err != nil {
		return nil, nil, err
	}
	doomed := make(map[string]*doomed, len(names))
	for _, n := range names {
		if want[n] {
			continue
		}
		x, err := t.doom(n, ev)
		if err != nil {
			return nil, nil, err
		}
		c := store.Defined{Name: n, Slots: x.slots}
		var d store.Deleted
		if u := x.count(&d); u != nil {
			c.Use = *u
		}
		current = append(current, c)
		doomed[n] = x
	}
	return current, doomed, nil
}

// members returns the locks in use (held or queued for) that family
// covers as their definition, by name.
func (t *txn) members(family string) ([]string, error) {
	prefix := strings.TrimSuffix(family, "*")
	all, err := t.names(`SELECT lock FROM holders WHERE instr(lock, ?) = 1 UNION SELECT lock FROM queue WHERE instr(lock, ?) = 1`,
		prefix, prefix)
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

// Define implements store.Store: a Reconcile of one entry.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	return storecall.Define(ctx, s, name, slots, ev)
}

// define makes the definition name unless it exists with the same slots.
func (t *txn) define(name string, slots int, ev store.Emitter) (bool, error) {
	var have int
	found, err := t.queryRow("SELECT slots FROM defs WHERE name = ?", []any{name}, &have)
	if err != nil {
		return false, err
	}
	if found {
		if have != slots {
			return false, &store.ConflictError{Name: name, Slots: have, Requested: slots}
		}
		return false, nil
	}
	family := strings.HasSuffix(name, store.FamilySuffix)
	if err := t.exec("INSERT INTO defs (name, slots, family) VALUES (?, ?, ?)", name, slots, family); err != nil {
		return false, err
	}
	t.changed = true
	e := store.Event{Type: store.EventCreated, Lock: name, Slots: slots}
	if !family {
		l, err := t.load(name, ev)
		if err != nil {
			return false, err
		}
		e.Running, e.Waiting = l.used(), len(l.queue)
	}
	return true, t.emit(ev, e)
}

// Resize implements store.Store.
func (s *Store) Resize(ctx context.Context, name string, slots int, ev store.Emitter) error {
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	return s.do(ctx, func(t *txn) error { return t.resize(name, slots, ev) })
}

// resize sets the slots of the definition name.
func (t *txn) resize(name string, slots int, ev store.Emitter) error {
	var have int
	var family bool
	found, err := t.queryRow("SELECT slots, family FROM defs WHERE name = ?", []any{name}, &have, &family)
	if err != nil {
		return err
	}
	if !found {
		return store.NotResizable(name)
	}
	if have == slots {
		return nil
	}
	if err := t.exec("UPDATE defs SET slots = ? WHERE name = ?", slots, name); err != nil {
		return err
	}
	t.changed = true
	e := store.Event{Type: store.EventResized, Lock: name, Slots: slots}
	if !family {
		l, err := t.load(name, ev)
		if err != nil {
			return err
		}
		e.Running, e.Waiting = l.used(), len(l.queue)
	}
	return t.emit(ev, e)
}
