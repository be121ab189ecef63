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
	url := testURL() // redis://127.0.0.1:6379/0
	// readme:begin
	s, err := redisstore.Open(ctx, url, redisstore.WithPrefix("example:"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = s.Close() }()
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
	var tx redisstore.Tx // written only while the lease is held
	tx.Set("example:report"+redisstore.KeyTag("report"), "done", 0)
	fmt.Println("guarded write:", lease.Guard(ctx, &tx))
	fmt.Println("release:", lease.Release(ctx))
	// readme:end
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
