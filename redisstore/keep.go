package redisstore

import (
	"context"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Keep implements store.Store.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	if err := s.enter(ctx, "Keep", &h); err != nil {
		return time.Time{}, err
	}
	keys, args := s.handleArgs(&h)
	r, err := s.run(ctx, fnKeep, nil, keys, append([]any{h.Ref.String(), micros(ttl), micros(hold)}, args...)...)
	if err != nil {
		return time.Time{}, err
	}
	switch r.status {
	case "notfound":
		return time.Time{}, store.NotFound(str(r.arg(0)))
	case "notheld":
		s.w.Ended(h.Name, "", h.Token, lostBecause("taken over or released by another holder"))
		return time.Time{}, store.ErrNotHeld
	}
	return fromMicros(integer(r.arg(0))), nil
}

// Held implements store.Store; it writes nothing.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	if err := s.enter(ctx, "Held", &h); err != nil {
		return store.Status{}, err
	}
	keys, args := s.handleArgs(&h)
	r, err := s.run(ctx, fnHeld, nil, keys, append([]any{h.Ref.String()}, args...)...)
	if err != nil {
		return store.Status{}, err
	}
	if r.status == "notfound" {
		return store.Status{}, store.NotFound(str(r.arg(0)))
	}
	return store.Status{Held: integer(r.arg(0)) == 1, Expired: integer(r.arg(1)) == 1, Now: fromMicros(r.now),
		Renewed: fromMicros(integer(r.arg(2))), Expires: fromMicros(integer(r.arg(3)))}, nil
}
