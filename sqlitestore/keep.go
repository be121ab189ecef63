package sqlitestore

import (
	"context"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Keep implements store.Store. A lease past its expiry that nobody took
// over is still its holder's, and is renewed.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	var exp time.Time
	err := s.do(ctx, func(t *txn) error {
		exp = time.Time{}
		if err := t.checkNames(&h); err != nil {
			return err
		}
		var rows []*hrow
		var locks []*lk
		err := t.each(&h, nil, func(l *lk, i int, _ store.Lock) error {
			if i >= 0 {
				rows, locks = append(rows, &l.holders[i]), append(locks, l)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(rows) != 1+len(h.More) {
			t.ends = append(t.ends, ending{h.Name, h.Ref.String(), h.Token, lostBecause("taken over or released by another holder")})
			return store.ErrNotHeld
		}
		for i, hd := range rows {
			if err := t.renew(locks[i], hd, ttl, hold); err != nil {
				return err
			}
			if e := fromMicros(hd.expires); !e.IsZero() && (exp.IsZero() || e.Before(exp)) {
				exp = e
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return exp, nil
}

// Held implements store.Store.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	var st store.Status
	err := s.readOrWrite(ctx, func(t *txn) error {
		if err := t.checkNames(&h); err != nil {
			return err
		}
		st = store.Status{Held: true, Now: fromMicros(t.now)}
		first := true
		err := t.each(&h, nil, func(l *lk, i int, _ store.Lock) error {
			if i < 0 {
				st.Held = false
				return nil
			}
			hd := &l.holders[i]
			if !t.live(hd) {
				st.Expired = true // past its expiry, though nobody has taken it over yet
			}
			e := fromMicros(hd.expires)
			if first {
				st.Renewed, st.Expires, first = fromMicros(hd.renewed), e, false
			} else if !e.IsZero() && (st.Expires.IsZero() || e.Before(st.Expires)) {
				st.Expires = e
			}
			return nil
		})
		if !st.Held {
			st.Expired, st.Renewed, st.Expires = false, time.Time{}, time.Time{}
		}
		return err
	})
	return st, err
}
