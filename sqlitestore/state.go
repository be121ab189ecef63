package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// State implements store.Store.
func (s *Store) State(ctx context.Context, name string, detail bool) (store.State, error) {
	var st store.State
	err := s.readOrWrite(ctx, func(t *txn) error {
		var err error
		st, err = t.state(name, detail)
		return err
	})
	return st, err
}

// readOrWrite runs f on a snapshot, and again in a write transaction when
// it found something to change (a row of a dead process to delete).
func (s *Store) readOrWrite(ctx context.Context, f func(t *txn) error) error {
	err := s.read(ctx, f)
	if errors.Is(err, errNeedWrite) {
		err = s.do(ctx, f)
	}
	return err
}

func (t *txn) state(name string, detail bool) (store.State, error) {
	if strings.HasSuffix(name, store.FamilySuffix) {
		var slots int
		found, err := t.queryRow("SELECT slots FROM defs WHERE name = ? AND family", []any{name}, &slots)
		if err != nil {
			return store.State{}, err
		}
		if !found {
			return store.State{}, store.NotFound(name)
		}
		return store.State{Name: name, Slots: slots, Family: true, Now: fromMicros(t.now)}, nil
	}
	l, err := t.load(name, nil)
	if err != nil {
		return store.State{}, err
	}
	st := store.State{Name: name, Slots: l.slots, Waiting: len(l.queue), Leases: len(l.holders), Now: fromMicros(t.now)}
	for i := range l.holders {
		if t.live(&l.holders[i]) {
			st.Running += l.holders[i].weight
		} else {
			st.Expired += l.holders[i].weight
		}
	}
	if !detail {
		return st, nil
	}
	for _, h := range l.holders {
		st.Holders = append(st.Holders, store.Holder{Ref: h.ref, Kind: h.kind, Token: h.token, Count: h.count, Weight: h.weight,
			Acquired: fromMicros(h.acquired), Renewed: fromMicros(h.renewed), Expires: fromMicros(h.expires),
			Hold: time.Duration(h.hold) * time.Microsecond})
	}
	for _, ticket := range l.queue {
		var w store.Waiter
		var since int64
		var locks string
		found, err := t.queryRow("SELECT ref, kind, since, locks FROM waiters WHERE ticket = ?", []any{ticket},
			&w.Ref, &w.Kind, &since, &locks)
		if err != nil {
			return store.State{}, err
		}
		if !found {
			continue
		}
		w.Since, w.Weight = fromMicros(since), l.asks(ticket)
		if err := json.Unmarshal([]byte(locks), &w.Locks); err != nil {
			return store.State{}, &dbError{fmt.Errorf("waiter %d: %w", ticket, err)}
		}
		st.Queue = append(st.Queue, w)
	}
	return st, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, detail bool) ([]store.State, error) {
	var out []store.State
	err := s.readOrWrite(ctx, func(t *txn) error {
		names, err := t.names(`SELECT name FROM defs UNION SELECT lock FROM holders UNION SELECT lock FROM queue`)
		if err != nil {
			return err
		}
		sort.Strings(names)
		out = make([]store.State, 0, len(names))
		for _, n := range names {
			st, err := t.state(n, detail)
			if err != nil {
				if isDB(err) || errors.Is(err, errNeedWrite) {
					return err
				}
				continue // a row of a lock whose definition went away
			}
			if !st.Family && !isDefined(t, n) && st.Running == 0 && st.Expired == 0 && st.Waiting == 0 {
				continue // a family member no longer in use (its rows went on the way)
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

func isDefined(t *txn, name string) bool {
	var x int
	found, _ := t.queryRow("SELECT 1 FROM defs WHERE name = ?", []any{name}, &x)
	return found
}
