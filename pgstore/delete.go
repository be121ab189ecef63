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

// Reconcile implements store.Store in one transaction: the definitions to
// prune are deleted first (delete_def(); when one is in use and force is
// not given, the others are still asked, so that the error counts every
// holder and waiter, and the transaction is rolled back), then each entry
// is defined (define()) or resized (resize()). Events are emitted once
// the transaction has committed.
func (s *Store) Reconcile(ctx context.Context, defs []store.Definition, opts store.ReconcileOptions, ev store.Emitter) (store.Reconciled, error) {
	seen, err := store.CheckDefinitions(defs)
	if err != nil {
		return store.Reconciled{}, err
	}
	if err := s.check(ctx); err != nil {
		return store.Reconciled{}, err
	}
	var r store.Reconciled
	var xs []deletion
	var events []store.Event
	resized := false
	err = s.retry(ctx, false, func() error {
		r, xs, events, resized = store.Reconciled{}, xs[:0], events[:0], false
		return s.c.inTx(ctx, func(c conn) error {
			if opts.Prune {
				var inUse *store.InUseError
				var names []string
				err := c.query(ctx, s.q.defNames, nil,
					func(scan func(...any) error) error {
						var n string
						if err := scan(&n); err != nil {
							return err
						}
						if _, ok := seen[n]; !ok {
							names = append(names, n)
						}
						return nil
					})
				if err != nil {
					return err
				}
				for _, n := range names {
					x, err := s.deleteDef(ctx, c, n, opts.Force)
					if err != nil {
						return err
					}
					if x.inUse != nil {
						if inUse == nil {
							inUse = &store.InUseError{Lock: x.inUse.Lock}
						}
						inUse.Holders += x.inUse.Holders
						inUse.Waiters += x.inUse.Waiters
						continue
					}
					if x.notFound {
						continue // deleted meanwhile
					}
					xs = append(xs, x)
					r.Deleted = append(r.Deleted, n)
					r.Holds += x.done.Holds
					r.Waiters += x.done.Waiters
				}
				if inUse != nil {
					return inUse
				}
			}
			done := make(map[string]bool, len(defs))
			for _, d := range defs {
				if done[d.Name] {
					continue
				}
				done[d.Name] = true
				var created bool
				var err error
				created, events, err = s.defineOne(ctx, c, d, events)
				var conflict *store.ConflictError
				switch {
				case err == nil && created:
					r.Created = append(r.Created, d.Name)
				case err == nil:
				case errors.As(err, &conflict) && opts.Resize:
					e, err := s.resizeOne(ctx, c, d.Name, d.Slots)
					if err != nil {
						return err
					}
					events = append(events, e...)
					r.Resized = append(r.Resized, d.Name)
					resized = true
				default:
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		var inUse *store.InUseError
		var conflict *store.ConflictError
		if errors.As(err, &inUse) || errors.As(err, &conflict) {
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
	if resized {
		s.d.wakeAll()
	}
	return r, nil
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
