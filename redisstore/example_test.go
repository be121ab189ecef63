package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
)

// A lock on Redis, taken and released; Guard writes a key only while the
// lease is held.
func Example() {
	ctx := context.Background()
	s, err := redisstore.Open(ctx, testURL(), redisstore.WithPrefix("example:"), redisstore.WithoutSafetyChecks())
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer func() { _ = s.Close() }()
	defer s.Client().Del(ctx, "example:report"+redisstore.KeyTag("report"))
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	if err := locks.Define(ctx, "report", 1); err != nil {
		fmt.Println(err)
		return
	}
	lease, err := locks.TryAcquire(ctx, "report", sleeplock.TTL(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	var tx redisstore.Tx
	tx.Set("example:report"+redisstore.KeyTag("report"), "done", 0)
	fmt.Println("guarded write:", lease.Guard(ctx, &tx))
	fmt.Println("release:", lease.Release(ctx))
	dropExample(ctx, s)
	// Output:
	// guarded write: <nil>
	// release: <nil>
}

func dropExample(ctx context.Context, s *redisstore.Store) {
	iter := s.Client().Scan(ctx, 0, "example:*", 100).Iterator()
	for iter.Next(ctx) {
		s.Client().Del(ctx, iter.Val())
	}
}
