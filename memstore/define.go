package memstore

import (
	"context"
	"strings"

	"github.com/sleeplock/sleeplock/internal/storecall"
	"github.com/sleeplock/sleeplock/store"
)

// family is a definition "prefix/*"; its members are locks made on first
// use and forgotten when idle. Guarded by the store's mutex.
type family struct {
	pattern string
	slots   int
	st      *lockStats // the counters of the family and its members
}

// Define implements store.Store: a Reconcile of one entry.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	return storecall.Define(ctx, s, name, slots, ev)
}

// Reconcile implements store.Store under the store's mutex: it reads the
// definitions the entries name (with opts.Prune, every definition, and the
// use of those to prune), and carries out store.PlanReconcile's plan.
func (s *Store) Reconcile(ctx context.Context, defs []store.Definition, opts store.ReconcileOptions, ev store.Emitter) (store.Reconciled, error) {
	if err := s.usable(ctx); err != nil {
		return store.Reconciled{}, err
	}
	if _, err := store.CheckDefinitions(defs); err != nil {
		return store.Reconciled{}, err
	}
	o := op{s: s, ev: ev}
	if err := o.enterOpen(); err != nil {
		return store.Reconciled{}, err
	}
	defer o.done()
	current, doomed := s.current(&o, defs, opts.Prune)
	p, err := store.PlanReconcile(defs, current, opts)
	if err != nil {
		return store.Reconciled{}, err
	}
	var others []*lock
	for _, st := range p.Steps {
		if st.Kind == store.StepPrune {
			others = s.remove(&o, doomed[st.Name], others)
		}
	}
	s.pumpAll(&o, others)
	for _, st := range p.Steps {
		switch st.Kind {
		case store.StepCreate:
			s.define(&o, st.Name, st.Slots)
		case store.StepResize:
			_ = s.resize(&o, st.Name, st.Slots) // defined: read above
		}
	}
	return p.Result(), nil
}

// current reads the definitions defs name and, with prune, every other
// definition with its use, doomed (its locks' mutexes taken) to be
// removed if the plan prunes it; global.
func (s *Store) current(o *op, defs []store.Definition, prune bool) ([]store.Defined, map[string]*doomed) {
	var current []store.Defined
	want := make(map[string]bool, len(defs))
	for _, d := range defs {
		if slots, ok := s.defined(d.Name); ok && !want[d.Name] {
			current = append(current, store.Defined{Name: d.Name, Slots: slots})
		}
		want[d.Name] = true
	}
	if !prune {
		return current, nil
	}
	var names []string
	for name := range s.fams {
		if !want[name] {
			names = append(names, name)
		}
	}
	s.locks.Range(func(lk *lock) bool {
		if !want[lk.name] && lk.defined && !lk.gone {
			names = append(names, lk.name)
		}
		return true
	})
	doomed := make(map[string]*doomed, len(names))
	for _, name := range names {
		d, err := s.doom(o, name)
		if err != nil {
			continue // forgotten meanwhile: nothing to prune
		}
		slots, _ := s.defined(name)
		c := store.Defined{Name: name, Slots: slots}
		var del store.Deleted
		if u := d.count(&del); u != nil {
			c.Use = *u
		}
		current = append(current, c)
		doomed[name] = d
	}
	return current, doomed
}

// defined returns the slots of name's own definition (a lock or family
// defined by that name); the store's mutex is held.
func (s *Store) defined(name string) (int, bool) {
	if strings.HasSuffix(name, store.FamilySuffix) {
		if f := s.fams[name]; f != nil {
			return f.slots, true
		}
		return 0, false
	}
	if lk := s.load(name); lk != nil && lk.defined {
		return int(lk.slots), true
	}
	return 0, false
}

// define makes the definition name, which does not exist yet; global.
func (s *Store) define(o *op, name string, slots int) {
	if strings.HasSuffix(name, store.FamilySuffix) {
		s.fams[name] = &family{pattern: name, slots: slots, st: newStats(s, 0)}
		o.emit(store.Event{Type: store.EventCreated, Lock: name, Slots: slots})
		return
	}
	if lk, _ := o.lockName(name, false); lk != nil {
		// A family member in use becomes a lock of its own.
		lk.defined = true
		lk.st.forget(lk)
		lk.st = newStats(s, lk.token-int64(len(lk.holders)))
		s.locks.Defined(name, lk)
		o.emit(store.Event{Type: store.EventCreated, Lock: name, Slots: slots, Running: lk.used(), Waiting: len(lk.waits())})
		s.setSlots(o, lk, slots)
		return
	}
	rng := s.newRange() // before the floor is read: see newRange
	lk := &lock{name: name, slots: int32(slots), defined: true, token: s.floor.Load(), rng: rng}
	lk.st = newStats(s, lk.token)
	lk.fast.Store(fastFrozen)
	s.thaw(lk) // not shared yet: no mutex needed
	s.locks.Store(name, lk)
	s.locks.Defined(name, lk)
	o.emit(store.Event{Type: store.EventCreated, Lock: name, Slots: slots})
}

// Resize implements store.Store.
func (s *Store) Resize(ctx context.Context, name string, slots int, ev store.Emitter) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	o := op{s: s, ev: ev}
	if err := o.enterOpen(); err != nil {
		return err
	}
	defer o.done()
	return s.resize(&o, name, slots)
}

// resize changes the slots of the definition name; global.
func (s *Store) resize(o *op, name string, slots int) error {
	if strings.HasSuffix(name, store.FamilySuffix) {
		f := s.fams[name]
		if f == nil {
			return store.NotResizable(name)
		}
		f.slots = slots
		o.emit(store.Event{Type: store.EventResized, Lock: name, Slots: slots})
		s.locks.Range(func(lk *lock) bool {
			if !lk.defined && s.familyOf(lk.name) == f {
				o.lock(lk)
				if !lk.gone && !lk.defined {
					s.setSlots(o, lk, slots)
				}
			}
			return true
		})
		return nil
	}
	lk := s.load(name)
	if lk == nil {
		return store.NotResizable(name)
	}
	o.lock(lk)
	if !lk.defined {
		return store.NotResizable(name)
	}
	s.setSlots(o, lk, slots)
	return nil
}

// setSlots changes lk's slots and grants what that frees; global.
func (s *Store) setSlots(o *op, lk *lock, slots int) {
	if int(lk.slots) == slots {
		return
	}
	lk.slots = int32(slots)
	if lk.defined {
		o.emit(store.Event{Type: store.EventResized, Lock: lk.name, Slots: slots, Running: lk.used(), Waiting: len(lk.waits())})
	}
	if lk.queue != nil && lk.queue.heavy > 0 {
		s.dropTooHeavy(o, lk)
	}
	s.pump(o, lk)
}

// dropTooHeavy ends, with a *WeightError, the waiters of lk that ask more
// slots than it has now (a Resize made it smaller), and grants what their
// leaving frees on their other locks; global.
func (s *Store) dropTooHeavy(o *op, lk *lock) {
	var others []*lock
	for i := 0; i < len(lk.waits()); {
		w := lk.waits()[i]
		weight := w.weight(lk)
		if weight == store.WeightAll || weight <= int(lk.slots) {
			i++
			continue
		}
		others = o.unqueue(w, lk, others)
		w.err = &store.WeightError{Lock: lk.name, Weight: weight, Slots: int(lk.slots), Resized: true}
		w.signal()
	}
	for _, l := range others {
		s.pump(o, l)
	}
}
