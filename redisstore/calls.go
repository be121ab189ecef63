package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

func (s *Store) fail(ctx context.Context, err error) error {
	s.reroute(err)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, redis.ErrClosed) {
		return store.ErrClosed
	}
	return fmt.Errorf("redisstore: %w", err)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// handleArgs returns the keys of h's locks and its names and tokens.
func (s *Store) handleArgs(h *store.Handle) ([]string, []any) {
	var keys []string
	var names, tokens []any
	h.Each(func(l store.Lock) {
		keys = append(keys, s.lockKey(l.Name))
		names = append(names, l.Name)
		tokens = append(tokens, l.Token)
	})
	return keys, append(append([]any{len(names)}, names...), tokens...)
}

// roots returns the roots that have definitions.
func (s *Store) allRoots(ctx context.Context) ([]string, error) {
	roots, err := s.c.SMembers(ctx, s.rootsKey()).Result()
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	sort.Strings(roots)
	return roots, nil
}

// perRoot runs f once for every root of the store, in one pipeline,
// each call with the root's definitions key and the root (then args): the
// store-wide reads (List, Stats). A store with no root answers no reply.
func (s *Store) perRoot(ctx context.Context, f function, args ...any) ([]reply, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	roots, err := s.allRoots(ctx)
	if err != nil || len(roots) == 0 {
		return nil, err
	}
	calls := make([]call, len(roots))
	for i, r := range roots {
		calls[i] = call{keys: []string{s.rootKey(r, "d")}, args: append([]any{r}, args...)}
	}
	var replies []reply
	err = s.look(func() (err error) {
		replies, err = s.runEach(ctx, f, calls)
		return err
	})
	return replies, err
}

// boxed is an argument boxed once (see box).
type boxed struct {
	v int64
	a any
}

// box returns v as an argument, the same boxed value as the last call's
// when v is the same (a store's callers mostly give one TTL): no
// allocation per call.
func (s *Store) box(v int64) any {
	if b := s.ttl.Load(); b != nil && b.v == v {
		return b.a
	}
	b := &boxed{v, v}
	s.ttl.Store(b)
	return b.a
}

// leaseEnd returns when a lease granted at now (µs) with ttl and hold
// expires (0: never), as lua/common.lua's leasetimes does.
func leaseEnd(now int64, ttl, hold time.Duration) int64 {
	t, h := micros(ttl), micros(hold)
	if t <= 0 {
		return 0
	}
	if h > 0 && h < t {
		t = h
	}
	return now + t
}

// reckon notes the server's clock, now (µs), read by a call sent at t0
// and answered at once: the offset of the server's clock to this
// process's, taken at the middle of the round trip.
func (s *Store) reckon(t0 time.Time, now int64) {
	if now <= 0 {
		return
	}
	t1 := time.Now()
	s.skew.Store(now - t0.UnixMicro() - t1.Sub(t0).Microseconds()/2)
}

// serverNow returns this process's reckoning of the server's clock (µs),
// which times a hold that lua/fast.lua's release ends (see doc.go,
// "Statistics"): within a round trip of the server's own.
func (s *Store) serverNow() int64 { return time.Now().UnixMicro() + s.skew.Load() }
