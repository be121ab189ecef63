package redisstore

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/sleeplock/sleeplock/store"
)

// WithRueidis sends the calls of the lock operations (acquire, release,
// keep, held, guard and the others run on one root) through c, a client
// of github.com/redis/rueidis on the same server or cluster as the store's
// go-redis client, which keeps the rest (loading the library, the node's
// subscription, the store-wide reads). rueidis pipelines the calls of
// concurrent goroutines on one connection: with many goroutines, more
// calls per second for the same server. The client stays the caller's.
func WithRueidis(c rueidis.Client) Option {
	return func(cfg *config) {
		if c == nil {
			cfg.Fail(store.Invalid(store.ErrInvalidConfig, "rueidis client", "is nil"))
			return
		}
		cfg.ru = c
	}
}

// sendRueidis sends a command of callOf through the rueidis client.
func (s *Store) sendRueidis(ctx context.Context, a []any) (any, error) {
	nkeys, _ := a[2].(int)
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = text(a[3+i])
	}
	args := make([]string, len(a)-3-nkeys)
	for i, x := range a[3+nkeys:] {
		args[i] = text(x)
	}
	cmd := s.cfg.ru.B().Fcall().Function(text(a[1])).Numkeys(int64(nkeys)).Key(keys...).Arg(args...).Build()
	return s.cfg.ru.Do(ctx, cmd).ToAny()
}

// text is an argument of a call as sent.
func text(x any) string {
	switch v := x.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}
