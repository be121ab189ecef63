package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/store"
	"github.com/sleeplock/sleeplock/storetest"
)

// harness runs the conformance suite on the shared server, each test
// with a key prefix of its own.
var harness = storetest.Harness{
	New: func(t *testing.T) store.Store {
		c := client(t)
		return open(t, c, newPrefix(t, c))
	},
	// Another node: a store on the same prefix with a client of its own.
	Reopen: func(t *testing.T, s store.Store) store.Store {
		rs := s.(*redisstore.Store)
		o, _ := redis.ParseURL(testURL())
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return open(t, c, rs.Prefix())
	},
	Crash: func(t *testing.T, s store.Store) { s.(*redisstore.Store).Crash() },
	Advance: func(t *testing.T, s store.Store, d time.Duration) {
		t.Helper()
		if err := s.(*redisstore.Store).Advance(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	},
	// Guard's "transaction": a batch of writes run with the check.
	Begin: func(t *testing.T, s store.Store) (any, func()) {
		return &redisstore.Tx{}, func() {}
	},
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness)
}
