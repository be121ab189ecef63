package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

// Define implements store.Store in one statement.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	if err := store.CheckDefinition(name, slots); err != nil {
		return false, err
	}
	if err := s.check(ctx); err != nil {
		return false, err
	}
	var created bool
	var have, running, waiting, old int32
	var at, seq, seq2 int64
	err := s.retry(ctx, false, func() error {
		return queryOne(ctx, s.c, s.q.define, []any{name, int64(slots), strings.HasSuffix(name, store.FamilySuffix)},
			&created, &have, &running, &waiting, &at, &old, &seq, &seq2)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: define %q: %w", name, err)
	}
	if !created {
		if int(have) != slots {
			return false, &store.ConflictError{Name: name, Slots: int(have), Requested: slots}
		}
		return false, nil
	}
	t := fromMicros(at)
	emit(ev, store.Event{Type: store.EventCreated, Lock: name, Slots: slots, Running: int(running), Waiting: int(waiting), Time: t,
		Seq: uint64(seq)})
	if old != 0 && int(old) != slots {
		// A family member in use became a lock of its own with other slots.
		emit(ev, store.Event{Type: store.EventResized, Lock: name, Slots: slots, Running: int(running), Waiting: int(waiting), Time: t,
			Seq: uint64(seq2)})
	}
	return true, nil
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
	var old, running, waiting int32
	var family bool
	var at, seq int64
	err := s.retry(ctx, true, func() error {
		return queryOne(ctx, s.c, s.q.resize, []any{name, int64(slots)}, &old, &family, &running, &waiting, &at, &seq)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return store.NotResizable(name)
	}
	if err != nil {
		return fmt.Errorf("pgstore: resize %q: %w", name, err)
	}
	if family || int(old) != slots {
		emit(ev, store.Event{Type: store.EventResized, Lock: name, Slots: slots, Running: int(running), Waiting: int(waiting),
			Time: fromMicros(at), Seq: uint64(seq)})
	}
	if slots > int(old) {
		s.d.wakeAll()
	}
	return nil
}
