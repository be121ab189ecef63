package redisstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

func TestMain(m *testing.M) {
	if role := os.Getenv("SLEEPLOCK_REDIS_CHILD"); role != "" {
		child(role)
		return
	}
	// No test leaves keys behind on the shared server.
	goleak.VerifyTestMain(m, goleak.Cleanup(redistest.Exit))
}

// The shared test server (redistest): its URL, a client of it that skips
// the test when it is unreachable (fails it when CI is set), and a key
// prefix of the test's own, deleted after the test.
var (
	testURL   = redistest.URL
	client    = redistest.Client
	newPrefix = redistest.Prefix
)

// open returns a store of the test's own prefix on c, closed after the test.
func open(t testing.TB, c *redis.Client, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(context.Background(), c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
