package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	return s.do(ctx, func(t *txn) error {
		if err := t.checkNames(&h); err != nil {
			return err
		}
		return t.release(&h, ev, endByRef)
	})
}

// release releases h's holds. A lock of h named without a token (0) is
// released as ended by another caller, why (endByRef, endStale): its
// holder's process is told (see watchEnded).
func (t *txn) release(h *store.Handle, ev store.Emitter, why string) error {
	var missing []string
	freed := 0
	err := t.each(h, ev, func(l *lk, i int, x store.Lock) error {
		if i < 0 {
			missing = append(missing, fmt.Sprintf("%q", x.Name))
			return nil
		}
		freed++
		if hd := &l.holders[i]; hd.count > 1 {
			hd.count--
			return t.exec("UPDATE holders SET count = count - 1 WHERE lock = ? AND ref = ?", l.name, hd.ref)
		}
		if x.Token != 0 {
			return t.drop(l, i, ev, store.EventReleased, store.ErrReleased)
		}
		return t.dropTelling(l, i, ev, store.EventReleased, endReason(why, l.name), why)
	})
	switch {
	case err != nil:
		return err
	case freed == 0:
		return store.ErrNotHeld
	case len(missing) > 0:
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(missing, ", "))
	}
	return nil
}

// ReleaseStale implements store.Store.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	var ok bool
	err := s.do(ctx, func(t *txn) error {
		l, i, err := t.first(&h, ev)
		if err != nil || i < 0 {
			return err
		}
		hd := &l.holders[i]
		if hd.expires == 0 {
			return nil // a lease with no TTL is never stale
		}
		stale := hd.expires <= t.now
		if staleAfter > 0 {
			stale = hd.renewed+staleAfter.Microseconds() <= t.now
		}
		if !stale {
			return nil
		}
		all := h
		all.Token = 0 // the rest go whatever their tokens, as long as the ref holds them
		all.More = make([]store.Lock, len(h.More))
		for i, m := range h.More {
			all.More[i] = store.Lock{Name: m.Name}
		}
		if err := t.release(&all, ev, endStale); err != nil && !errors.Is(err, store.ErrNotHeld) {
			return err
		}
		ok = true
		return nil
	})
	return ok, err
}
