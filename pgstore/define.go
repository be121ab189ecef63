package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

// Define implements store.Store: a Reconcile of one entry.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	r, err := s.Reconcile(ctx, []store.Definition{{Name: name, Slots: slots}}, store.ReconcileOptions{}, ev)
	return len(r.Created) == 1, err
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
