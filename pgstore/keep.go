package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Keep implements store.Store in one statement.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	if err := s.check(ctx); err != nil {
		return time.Time{}, err
	}
	var ok bool
	var now, exp int64
	err := s.retry(ctx, true, func() error {
		if len(h.More) == 0 {
			length, back := lease(ttl, hold)
			args := keepOneArgs{name: h.Name, token: h.Token, ref: h.Ref.String(), ttl: micros(ttl), hold: micros(hold),
				lease: length, back: back}
			err := queryOne(ctx, s.c, s.q.keepOne, args.values(),
				&ok, &now, &exp)
			if errors.Is(err, sql.ErrNoRows) {
				ok, err = false, nil
			}
			return err
		}
		names, tokens := handleArgs(&h)
		args := keepArgs{names: names, tokens: tokens, ref: h.Ref.String(), ttl: micros(ttl), hold: micros(hold)}
		return queryOne(ctx, s.c, s.q.keep, args.values(), &ok, &now, &exp)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("pgstore: keep: %w", err)
	}
	if ok && ctx.Err() != nil {
		// The context ended while the renewal was in flight: its driver
		// may have sent a cancel request, and PostgreSQL answers a cancelled
		// wait for synchronous replication with success (and a WARNING)
		// after committing only locally. A renewal not known to be
		// replicated is not a renewal: the lease keeps its old expiry.
		return time.Time{}, fmt.Errorf("pgstore: keep: %w: the context ended before the renewal was confirmed", ErrUnreachable)
	}
	if !ok {
		if err := s.undefined(ctx, &h); err != nil {
			return time.Time{}, err
		}
		s.lostHandle(&h, "taken over or released by another holder")
		return time.Time{}, store.ErrNotHeld
	}
	return fromMicros(exp), nil
}

// Held implements store.Store in one statement. A lease past its expiry
// that nobody took over is held and Expired.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	if err := s.check(ctx); err != nil {
		return store.Status{}, err
	}
	var held bool
	var now, renewed, exp int64
	q, args := s.q.heldOne, []any{h.Name, h.Token, h.Ref.String()}
	if len(h.More) > 0 {
		names, tokens := handleArgs(&h)
		q, args = s.q.held, []any{names, tokens, h.Ref.String()}
	}
	err := s.retry(ctx, true, func() error { return queryOne(ctx, s.c, q, args, &held, &now, &renewed, &exp) })
	if err != nil {
		return store.Status{}, fmt.Errorf("pgstore: held: %w", err)
	}
	st := store.Status{Held: held, Now: fromMicros(now)}
	if held {
		// Past its expiry and not taken over: still its holder's, marked
		// expired (any acquirer may take it at once).
		st.Renewed, st.Expires, st.Expired = fromMicros(renewed), fromMicros(exp), exp != 0 && exp <= now
	} else if err := s.undefined(ctx, &h); err != nil {
		return store.Status{}, err
	}
	return st, nil
}
