package redisstore_test

import (
	"sync"
	"testing"

	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// ports are the ports this package's own servers may use.
var ports = struct {
	sync.Mutex
	next int
}{next: 6380}

// startServer starts a redis-server of the test's own (redistest.Start)
// with args, on a port of 6380–6389.
func startServer(t testing.TB, args ...string) *redistest.Server {
	t.Helper()
	ports.Lock()
	port := ports.next
	if ports.next++; ports.next > 6389 {
		ports.next = 6380
	}
	ports.Unlock()
	return redistest.Start(t, port, args...)
}
