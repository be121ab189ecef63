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
	return redis.NewScript(string(common) + "\nlocal cx = begin(ARGV)\n" + string(body))
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

// Crash stops the store as the death of its process would: its heartbeat
// and listener end, its waiting callers return store.ErrClosed, and
// nothing is written on the way: its waiters stay queued (until its node
// stops counting as alive) and its holds stay held. Close is then a
// no-op. Crash is exported for tests only.
func (s *Store) Crash() {
	if s == nil || s.c == nil {
		return
	}
	s.once.Do(func() {
		s.mu.Lock()
		s.shut = true
		s.mu.Unlock()
		s.closed.Store(true) // before closing: a waiter that returns writes nothing
		close(s.closing)
		s.waits.Wait()
		_ = s.ps.Close()
		s.bg.Wait()
		if s.owned {
			_ = s.c.Close()
		}
	})
}
