package turns_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// The SQLite entry of factories: every node a store of its own on one
// database file, as processes of one host share it.
func init() {
	factories = append(factories, factory{name: "sqlite", newNodes: sqliteNodes})
}

func sqliteNodes(t *testing.T, n int) ([]*sleeplock.Locks, func(time.Duration), bool) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locks.db")
	clock, err := sqlitestore.Open(ctx, path)
	must(t, err)
	t.Cleanup(func() { _ = clock.Close() })
	var locks []*sleeplock.Locks
	for range n {
		s, err := sqlitestore.Open(ctx, path)
		must(t, err)
		locks = append(locks, sleeplock.New(s))
	}
	advance := func(d time.Duration) {
		if err := clock.Advance(ctx, d); err != nil {
			t.Fatalf("advancing the store's clock: %v", err)
		}
	}
	return locks, advance, true
}
