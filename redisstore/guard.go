package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Tx is a batch of writes that Guard runs only while a lease is held, in
// the same script as the check: a fenced write. Redis cannot join a
// transaction of the caller's (MULTI runs every command even when one
// fails), so the write goes to the check instead.
//
//	var tx redisstore.Tx
//	tx.Set("report:"+redisstore.KeyTag("report"), body, 0)
//	err := lease.Guard(ctx, &tx) // ErrLeaseLost: nothing was written
//
// On Redis Cluster every key of a Tx must carry the lock's hash tag: put
// KeyTag(name) in it; Guard refuses a key with another (or none) with a
// *store.ShardError, writing nothing.
type Tx struct {
	keys []string
	cmds [][]any
	// Results holds each write's reply after a Guard that ran them.
	Results []any
}

// Do adds a command (its name and arguments) writing key, which must be
// among its arguments.
func (t *Tx) Do(key string, cmd ...any) {
	if t == nil || len(cmd) == 0 {
		return
	}
	t.keys = append(t.keys, key)
	t.cmds = append(t.cmds, cmd)
}

// Set adds SET key value (with PX ttl when ttl > 0).
func (t *Tx) Set(key, value string, ttl time.Duration) {
	if t == nil {
		return
	}
	if ttl > 0 {
		t.Do(key, "SET", key, value, "PX", strconv.FormatInt(ttl.Milliseconds(), 10))
		return
	}
	t.Do(key, "SET", key, value)
}

// Del adds DEL key.
func (t *Tx) Del(key string) {
	if t != nil {
		t.Do(key, "DEL", key)
	}
}

// Guard implements store.Guarder: tx is a *Tx, whose writes run only while
// h's ref still holds every lock of h with h's tokens (past its expiry or
// not, as long as nobody took it over), atomically with that check. When
// the lease is lost nothing is written and the error matches
// store.ErrLeaseLost. An empty Tx only checks.
func (s *Store) Guard(ctx context.Context, tx any, h store.Handle) error {
	if err := s.enter(ctx, "Guard", &h); err != nil {
		return err
	}
	t, ok := tx.(*Tx)
	if !ok || t == nil {
		return fmt.Errorf("%w: Guard on Redis takes a *redisstore.Tx, not %T", store.ErrUnsupported, tx)
	}
	if err := s.spanKeys(h.Name, t.keys); err != nil {
		return err
	}
	keys, args := s.handleArgs(&h)
	args = append([]any{h.Ref.String()}, args...)
	for _, c := range t.cmds {
		args = append(append(args, len(c)), c...)
	}
	r, err := s.run(ctx, fnGuard, nil, append(keys, t.keys...), args...)
	if err != nil {
		return err
	}
	if err := r.refusal(); err != nil {
		return err
	}
	if r.status == "lost" {
		return store.GuardLost(h.Name, h.Token)
	}
	t.Results = list(r.arg(0))
	return nil
}

var _ store.Guarder = (*Store)(nil)
