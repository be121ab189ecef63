package redisstore

import (
	"context"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

var scriptAdvance = func() *redis.Script {
	common, err := luaFiles.ReadFile("lua/common.lua")
	if err != nil {
		panic(err)
	}
	body, err := os.ReadFile("testdata/advance.lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(common) + "\nbegin(ARGV)\n" + string(body))
}()

// Advance moves every stored time of the store's locks back by d, as if d
// had passed on the server's clock, and wakes every node's waiters.
// Advance is exported for tests only.
func (s *Store) Advance(ctx context.Context, d time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	roots, err := s.allRoots(ctx)
	if err != nil {
		return err
	}
	for _, r := range roots {
		err := scriptAdvance.Run(ctx, s.c, []string{s.rootKey(r, "d")}, s.cfg.prefix, s.id, micros(d), r).Err()
		if err != nil {
			return err
		}
	}
	return nil
}

// Root returns the hash tag root of name.
func Root(name string) string { return root(name) }
