package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/redisstore"
)

func TestMain(m *testing.M) {
	if role := os.Getenv("SLEEPLOCK_REDIS_CHILD"); role != "" {
		child(role)
		return
	}
	goleak.VerifyTestMain(m)
}

// testURL is the shared test server: SLEEPLOCK_TEST_REDIS_URL, or the
// Redis at 127.0.0.1:6379.
func testURL() string {
	if u := os.Getenv("SLEEPLOCK_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// client returns a client of the test server, closed after the test. It
// skips the test when the server cannot be reached, or fails it when CI
// is set.
func client(t testing.TB) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(testURL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		if os.Getenv("CI") != "" {
			t.Fatalf("Redis at %s unreachable (CI is set): %v", testURL(), err)
		}
		t.Skipf("Redis at %s unreachable: %v", testURL(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newPrefix returns a key prefix of the test's own, whose keys are deleted
// after the test.
func newPrefix(t testing.TB, c *redis.Client) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := "sltest:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { dropPrefix(c, p) })
	return p
}

func dropPrefix(c *redis.Client, p string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		c.Del(ctx, keys...)
	}
}

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
