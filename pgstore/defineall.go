package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

// DefineAll implements store.Store: Define's statement for every entry in
// one transaction, rolled back at the first entry that fails. Events are
// emitted once the transaction has committed.
func (s *Store) DefineAll(ctx context.Context, defs []store.Definition, ev store.Emitter) ([]bool, error) {
	for _, d := range defs {
		if err := store.CheckDefinition(d.Name, d.Slots); err != nil {
			return nil, err
		}
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var created []bool
	var events []store.Event
	err := s.retry(ctx, false, func() error {
		created, events = make([]bool, len(defs)), events[:0]
		return s.c.inTx(ctx, func(c conn) error {
			for i, d := range defs {
				var have, running, waiting, old int32
				var at, seq, seq2 int64
				if err := queryOne(ctx, c, s.q.define, []any{d.Name, int64(d.Slots), strings.HasSuffix(d.Name, store.FamilySuffix)},
					&created[i], &have, &running, &waiting, &at, &old, &seq, &seq2); err != nil {
					return fmt.Errorf("pgstore: define %q: %w", d.Name, err)
				}
				if !created[i] {
					if int(have) != d.Slots {
						return &store.ConflictError{Name: d.Name, Slots: int(have), Requested: d.Slots}
					}
					continue
				}
				t := fromMicros(at)
				events = append(events, store.Event{Type: store.EventCreated, Lock: d.Name, Slots: d.Slots,
					Running: int(running), Waiting: int(waiting), Time: t, Seq: uint64(seq)})
				if old != 0 && int(old) != d.Slots {
					events = append(events, store.Event{Type: store.EventResized, Lock: d.Name, Slots: d.Slots,
						Running: int(running), Waiting: int(waiting), Time: t, Seq: uint64(seq2)})
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		emit(ev, e)
	}
	return created, nil
}
