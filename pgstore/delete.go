package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Delete implements store.Store in one statement (delete_def() of
// sql/delete.sql). A refused Delete writes nothing: it is decided on a
// plain read, and checked again under the locks' rows only when it goes
// ahead. The holds it ends are lost to their holders (a holder of another
// process learns it from lost()'s NOTIFY, or at its next renewal, which
// finds no definition); its
// waiters, woken, find no definition at their next check.
func (s *Store) Delete(ctx context.Context, name string, force bool, ev store.Emitter) (store.Deleted, error) {
	if err := store.CheckDefinition(name, 1); err != nil {
		return store.Deleted{}, err
	}
	if err := s.check(ctx); err != nil {
		return store.Deleted{}, err
	}
	var x deletion
	err := s.retry(ctx, false, func() error {
		var err error
		x, err = s.deleteDef(ctx, s.c, name, force)
		return err
	})
	if err != nil {
		return store.Deleted{}, fmt.Errorf("pgstore: delete %q: %w", name, err)
	}
	if err := x.err(); err != nil {
		return store.Deleted{}, err
	}
	s.deleted(&x, ev)
	return x.done, nil
}

// deletion is what delete_def() answered for one definition.
type deletion struct {
	name     string
	notFound bool
	inUse    *store.InUseError
	done     store.Deleted
	events   []store.Event
	ended    []store.Event // the released events: holds to tell their watchers of
}

func (x *deletion) err() error {
	switch {
	case x.notFound:
		return store.NotDeletable(x.name)
	case x.inUse != nil:
		return x.inUse
	}
	return nil
}

// deleteDef runs delete_def() for name on c.
func (s *Store) deleteDef(ctx context.Context, c conn, name string, force bool) (deletion, error) {
	x := deletion{name: name}
	err := c.query(ctx, s.q.deleteDef, []any{name, force}, func(scan func(...any) error) error {
		var ev, lock, ref, kind string
		var slots, holders, waiters, weight int32
		var token, at, dur, seq int64
		if err := scan(&ev, &lock, &slots, &holders, &waiters, &ref, &kind, &token, &weight, &at, &dur, &seq); err != nil {
			return err
		}
		switch ev {
		case "notfound":
			x.notFound = true
		case "inuse":
			x.inUse = &store.InUseError{Lock: lock, Holders: int(holders), Waiters: int(waiters)}
		case "released":
			e := store.Event{Type: store.EventReleased, Lock: lock, Slots: int(slots), Ref: ref, Kind: kind,
				Token: token, Weight: int(weight), Held: time.Duration(dur) * time.Microsecond,
				Time: fromMicros(at), Seq: uint64(seq)}
			x.events = append(x.events, e)
			x.ended = append(x.ended, e)
		case "deleted":
			x.events = append(x.events, store.Event{Type: store.EventDeleted, Lock: lock, Slots: int(slots),
				Time: fromMicros(at), Seq: uint64(seq)})
			if lock == name {
				x.done = store.Deleted{Holds: int(holders), Waiters: int(waiters)}
			}
		}
		return nil
	})
	return x, err
}

// deleted tells what a committed deletion did: the watchers of its holds,
// ev, the refusal counts and this store's waiters.
func (s *Store) deleted(x *deletion, ev store.Emitter) {
	for _, e := range x.ended {
		s.ended(e.Lock, e.Ref, e.Token, store.DeletedHold(e.Lock))
	}
	for _, e := range x.events {
		emit(ev, e)
	}
	s.refusals.forget(x.name)
	s.d.wakeAll() // this store's waiters of the deleted locks find them gone
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
