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
// process learns it at its next renewal, which finds no definition); its
// waiters, woken, find no definition at their next check.
func (s *Store) Delete(ctx context.Context, name string, force bool, ev store.Emitter) (store.Deleted, error) {
	if err := store.CheckDefinition(name, 1); err != nil {
		return store.Deleted{}, err
	}
	if err := s.check(ctx); err != nil {
		return store.Deleted{}, err
	}
	type drow struct {
		ev, lock, ref, kind     string
		slots, holders, waiters int32
		weight                  int32
		token, at, dur, seq     int64
	}
	var rows []drow
	err := s.retry(ctx, false, func() error {
		rows = rows[:0]
		return s.c.query(ctx, s.q.deleteDef, []any{name, force}, func(scan func(...any) error) error {
			var r drow
			if err := scan(&r.ev, &r.lock, &r.slots, &r.holders, &r.waiters, &r.ref, &r.kind, &r.token, &r.weight,
				&r.at, &r.dur, &r.seq); err != nil {
				return err
			}
			rows = append(rows, r)
			return nil
		})
	})
	if err != nil {
		return store.Deleted{}, fmt.Errorf("pgstore: delete %q: %w", name, err)
	}
	var d store.Deleted
	for _, r := range rows {
		switch r.ev {
		case "notfound":
			return store.Deleted{}, store.NotDeletable(name)
		case "inuse":
			return store.Deleted{}, &store.InUseError{Lock: r.lock, Holders: int(r.holders), Waiters: int(r.waiters)}
		case "released":
			reason := store.DeletedHold(r.lock)
			s.ended(r.lock, r.ref, r.token, reason)
			emit(ev, store.Event{Type: store.EventReleased, Lock: r.lock, Slots: int(r.slots), Ref: r.ref, Kind: r.kind,
				Token: r.token, Weight: int(r.weight), Held: time.Duration(r.dur) * time.Microsecond,
				Time: fromMicros(r.at), Seq: uint64(r.seq)})
		case "deleted":
			emit(ev, store.Event{Type: store.EventDeleted, Lock: r.lock, Slots: int(r.slots), Time: fromMicros(r.at),
				Seq: uint64(r.seq)})
			if r.lock == name {
				d = store.Deleted{Holds: int(r.holders), Waiters: int(r.waiters)}
			}
		}
	}
	s.refusals.forget(name)
	s.d.wakeAll() // this store's waiters of the deleted locks find them gone
	return d, nil
}
