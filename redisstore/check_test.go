package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock/redisstore"
)

// TestOpenChecksSettings: Open refuses an eviction policy and a replica,
// warns about a server that keeps nothing on disk, and says nothing of a
// server with the AOF on.
func TestOpenChecksSettings(t *testing.T) {
	ctx := context.Background()
	durable := startServer(t, "--appendonly", "yes")
	s, err := redisstore.Open(ctx, durable.URL())
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings of a server with the AOF: %q", w)
	}
	_ = s.Close()

	volatile := startServer(t)
	s, err = redisstore.Open(ctx, volatile.URL())
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "keeps nothing on disk") {
		t.Errorf("warnings of a server without persistence: %q", w)
	}
	_ = s.Close()

	evicting := startServer(t, "--appendonly", "yes", "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	if _, err := redisstore.Open(ctx, evicting.URL()); !errors.Is(err, redisstore.ErrUnsafeServer) ||
		!strings.Contains(err.Error(), "allkeys-lru") {
		t.Errorf("Open of an evicting server = %v, want ErrUnsafeServer naming the policy", err)
	}
	s, err = redisstore.Open(ctx, evicting.URL(), redisstore.WithoutSafetyChecks())
	if err != nil {
		t.Fatalf("WithoutSafetyChecks: %v", err)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "allkeys-lru") {
		t.Errorf("warnings with WithoutSafetyChecks: %q", w)
	}
	_ = s.Close()

	replica := startServer(t, "--appendonly", "yes", "--replicaof", "127.0.0.1", strconv.Itoa(durable.Port()))
	if _, err := redisstore.Open(ctx, replica.URL()); !errors.Is(err, redisstore.ErrUnsafeServer) ||
		!strings.Contains(err.Error(), "replica") {
		t.Errorf("Open of a replica = %v, want ErrUnsafeServer", err)
	}
}
