package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sleeplock/sleeplock/internal/storecall"
	"github.com/sleeplock/sleeplock/store"
)

// Define implements store.Store: a Reconcile of one entry.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	return storecall.Define(ctx, s, name, slots, ev)
}

// defineOne runs define() for d on c. It reports whether d was created and
// appends the events to emit once the statement (or its transaction) has
// committed: created, and resized when a family member in use became a
// lock of its own with other slots. The same definition again creates
// nothing; another one is a *store.ConflictError.
func (s *Store) defineOne(ctx context.Context, c conn, d store.Definition, events []store.Event) (bool, []store.Event, error) {
	var created bool
	var have, running, waiting, old int32
	var at, seq, seq2 int64
	err := queryOne(ctx, c, s.q.define, []any{d.Name, int64(d.Slots), strings.HasSuffix(d.Name, store.FamilySuffix)},
		&created, &have, &running, &waiting, &at, &old, &seq, &seq2)
	if err != nil {
		return false, events, fmt.Errorf("pgstore: define %q: %w", d.Name, err)
	}
	if !created {
		if int(have) != d.Slots {
			return false, events, &store.ConflictError{Name: d.Name, Slots: int(have), Requested: d.Slots}
		}
		return false, events, nil
	}
	t := fromMicros(at)
	events = append(events, store.Event{Type: store.EventCreated, Lock: d.Name, Slots: d.Slots,
		Running: int(running), Waiting: int(waiting), Time: t, Seq: uint64(seq)})
	if old != 0 && int(old) != d.Slots {
		events = append(events, store.Event{Type: store.EventResized, Lock: d.Name, Slots: d.Slots,
			Running: int(running), Waiting: int(waiting), Time: t, Seq: uint64(seq2)})
	}
	return true, events, nil
}

// Resize implements store.Store in one statement. Waiters see the new slots
// at their next check; this store's own are woken.
func (s *Store) Resize(ctx context.Context, name string, slots int, ev store.Emitter) error {
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	var events []store.Event
	err := s.retry(ctx, true, func() error {
		var err error
		events, err = s.resizeOne(ctx, s.c, name, slots)
		return err
	})
	if err != nil {
		return err
	}
	for _, e := range events {
		emit(ev, e)
	}
	if len(events) > 0 {
		// Waiters may fit now, or be left too heavy (resize() wakes other
		// stores' waiters).
		s.d.wakeAll()
	}
	return nil
}

// Reconcile implements store.Store in one transaction, under the
// definitions' advisory lock: it reads the definitions (current) and
// carries out store.PlanReconcile's plan, pruning with delete_def(),
// defining with define() and resizing with resize(). A definition read
// unused but found in use by delete_def(), which checks again under its
// locks' rows, is an *InUseError: the transaction is rolled back. Events
// are emitted once the transaction has committed.
func (s *Store) Reconcile(ctx context.Context, defs []store.Definition, opts store.ReconcileOptions, ev store.Emitter) (store.Reconciled, error) {
	if _, err := store.CheckDefinitions(defs); err != nil {
		return store.Reconciled{}, err
	}
	if err := s.check(ctx); err != nil {
		return store.Reconciled{}, err
	}
	var r store.Reconciled
	var xs []deletion
	var events []store.Event
	err := s.retry(ctx, false, func() error {
		xs, events = xs[:0], events[:0]
		return s.c.inTx(ctx, func(c conn) error {
			current, err := s.current(ctx, c, defs, opts.Prune)
			if err != nil {
				return err
			}
			p, err := store.PlanReconcile(defs, current, opts)
			if err != nil {
				return err
			}
			r = p.Result()
			r.Holds, r.Waiters = 0, 0
			for _, st := range p.Steps {
				switch st.Kind {
				case store.StepPrune:
					x, err := s.deleteDef(ctx, c, st.Name, opts.Force)
					if err == nil {
						err = x.err()
					}
					if err != nil {
						return err
					}
					xs = append(xs, x)
					r.Holds += x.done.Holds
					r.Waiters += x.done.Waiters
				case store.StepCreate:
					_, events, err = s.defineOne(ctx, c, store.Definition{Name: st.Name, Slots: st.Slots}, events)
				case store.StepResize:
					var e []store.Event
					e, err = s.resizeOne(ctx, c, st.Name, st.Slots)
					events = append(events, e...)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		var inUse *store.InUseError
		var conflict *store.ConflictError
		if errors.As(err, &inUse) || errors.As(err, &conflict) || errors.Is(err, store.ErrNotFound) {
			return store.Reconciled{}, err
		}
		return store.Reconciled{}, fmt.Errorf("pgstore: reconcile: %w", err)
	}
	for i := range xs {
		s.deleted(&xs[i], ev)
	}
	for _, e := range events {
		emit(ev, e)
	}
	if len(r.Resized) > 0 {
		s.d.wakeAll()
	}
	return r, nil
}

// current takes the definitions' advisory lock for c's transaction and
// reads the definitions defs name and, with prune, every other one with
// its use.
func (s *Store) current(ctx context.Context, c conn, defs []store.Definition, prune bool) ([]store.Defined, error) {
	if err := c.exec(ctx, s.q.defsLock); err != nil {
		return nil, err
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	var current []store.Defined
	err := c.query(ctx, s.q.defsNamed, []any{textArray(names)}, func(scan func(...any) error) error {
		var d store.Defined
		var slots int32
		if err := scan(&d.Name, &slots); err != nil {
			return err
		}
		d.Slots = int(slots)
		current = append(current, d)
		return nil
	})
	if err != nil || !prune {
		return current, err
	}
	err = c.query(ctx, s.q.defsUse, []any{textArray(names)}, func(scan func(...any) error) error {
		var d store.Defined
		var slots, holders, waiters int32
		if err := scan(&d.Name, &slots, &d.Use.Lock, &holders, &waiters); err != nil {
			return err
		}
		d.Slots, d.Use.Holders, d.Use.Waiters = int(slots), int(holders), int(waiters)
		current = append(current, d)
		return nil
	})
	return current, err
}

// resizeOne runs resize() for name on c and returns its event (none when
// the slots did not change); ErrNotFound when name is not a definition.
func (s *Store) resizeOne(ctx context.Context, c conn, name string, slots int) ([]store.Event, error) {
	var old, running, waiting int32
	var family bool
	var at, seq int64
	err := queryOne(ctx, c, s.q.resize, []any{name, int64(slots)}, &old, &family, &running, &waiting, &at, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.NotResizable(name)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: resize %q: %w", name, err)
	}
	if !family && int(old) == slots {
		return nil, nil
	}
	return []store.Event{{Type: store.EventResized, Lock: name, Slots: slots, Running: int(running), Waiting: int(waiting),
		Time: fromMicros(at), Seq: uint64(seq)}}, nil
}
