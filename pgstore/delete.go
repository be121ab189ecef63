package pgstore

import (
	"context"
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
