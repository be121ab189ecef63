package redisstore_test

import (
	"testing"

	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// startServer starts a redis-server of the test's own (redistest.Start)
// with args, on a free port.
func startServer(t testing.TB, args ...string) *redistest.Server {
	t.Helper()
	return redistest.Start(t, 0, args...)
}
