package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"

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
