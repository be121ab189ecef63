package redispeer_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
)

// clientLib is a function that answers at once what a granted fast
// acquire answers: the call's cost is the client's and the round trip's.
const clientLib = "#!lua name=slpeer_clients\n" +
	"redis.register_function('slpeer_grant', function(k, a) return {'G', 1796234809363832, 1796234809363832, 0, 1} end)"

// BenchmarkClients: go-redis v9 (redisstore's client) against rueidis, one
// FCALL shaped like redisstore's acquire (4 keys, 16 arguments, a flat
// reply of 5) by 1 and 8 goroutines, side by side: the client's part of
// a pair, which the server's does not explain (issue 32's choice of
// client). ratio is rueidis's calls/s over go-redis's.
func BenchmarkClients(b *testing.B) {
	ctx := context.Background()
	gr := newClient(b)
	if err := gr.FunctionLoadReplace(ctx, clientLib).Err(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gr.FunctionDelete(ctx, "slpeer_clients") })
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{gr.Options().Addr},
		SelectDB: gr.Options().DB, Password: gr.Options().Password, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ru.Close)
	keys := []string{"p{p}:l:p/1", "p{p}:d", "p{p}:s", "p{p}:u"}
	args := []string{"p:", "4a0178cd2e607120b517c01d", "", "try", "f77eab491590f3cc80d7f5e8b59ac4e0", "",
		"60000000", "0", "0", "0", "0", "1000000", "1", "p/1", "1", "0"}
	cmd := []any{"fcall", "slpeer_grant", strconv.Itoa(len(keys))}
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	for _, a := range args {
		cmd = append(cmd, a)
	}
	check := func(peer string, n int, err error) error {
		if err == nil && n != 5 {
			err = fmt.Errorf("a reply of %d", n)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", peer, err)
		}
		return nil
	}
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			for b.Loop() {
				sideBySideAs(b, "rueidis", "go-redis", func() int64 {
					return parallel(b, g, span, func(int) error {
						v, err := ru.Do(ctx, ru.B().Fcall().Function("slpeer_grant").Numkeys(int64(len(keys))).
							Key(keys...).Arg(args...).Build()).ToArray()
						return check("rueidis", len(v), err)
					})
				}, func() int64 {
					return parallel(b, g, span, func(int) error {
						v, err := gr.Do(ctx, cmd...).Slice()
						return check("go-redis", len(v), err)
					})
				})
			}
		})
	}
}

// newRueidisLocks is newLocks on a store that sends its lock operations
// through a rueidis client of the same server (redisstore.WithRueidis).
func newRueidisLocks(b *testing.B, c *redis.Client, prefix string, opts ...sleeplock.Option) *sleeplock.Locks {
	b.Helper()
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.Options().Addr},
		SelectDB: c.Options().DB, Password: c.Options().Password, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ru.Close)
	s, err := redisstore.New(context.Background(), c, redisstore.WithPrefix(prefix), redisstore.WithoutSafetyChecks(),
		redisstore.WithRueidis(ru))
	if err != nil {
		b.Fatal(err)
	}
	l := sleeplock.New(s, append([]sleeplock.Option{sleeplock.WithTTL(ttl)}, opts...)...)
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkRueidis: BenchmarkPair's and BenchmarkRefusedTry's rows with
// the store's calls sent through rueidis (redisstore.WithRueidis), against
// redislock on go-redis.
func BenchmarkRueidis(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("pair/clients=%d", clients), func(b *testing.B) { pairRow(b, clients, newRueidisLocks) })
	}
	b.Run("refused/clients=8", func(b *testing.B) { refusedRow(b, newRueidisLocks) })
}
