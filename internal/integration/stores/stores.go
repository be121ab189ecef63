// Package stores lists the stores that the cross-store tests of
// internal/integration run on: the memory store, SQLite on a file of the
// test's own and PostgreSQL on a schema of the test's own (the database of
// SLEEPLOCK_TEST_DATABASE_URL; skipped when it cannot be reached, failed
// when CI is set).
package stores

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// Store opens Locks on one kind of store for a test; what it opens is
// closed when the test ends.
type Store struct {
	Name string
	Open func(t *testing.T, opts ...sleeplock.Option) *sleeplock.Locks
}

// All are the stores every cross-store test runs on.
var All = []Store{
	{"memory", func(t *testing.T, opts ...sleeplock.Option) *sleeplock.Locks {
		return closing(t, sleeplock.New(nil, opts...))
	}},
	{"sqlite", func(t *testing.T, opts ...sleeplock.Option) *sleeplock.Locks {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "locks.db"))
		if err != nil {
			t.Fatal(err)
		}
		return closing(t, sleeplock.New(s, opts...))
	}},
	{"postgres", func(t *testing.T, opts ...sleeplock.Option) *sleeplock.Locks {
		ctx := context.Background()
		pool, schema := pgtest.Schema(t, "integration_test_")
		if err := pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)); err != nil {
			t.Fatal(err)
		}
		s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		return closing(t, sleeplock.New(s, opts...))
	}},
}

// closing closes l when the test ends (a second Close is a no-op).
func closing(t *testing.T, l *sleeplock.Locks) *sleeplock.Locks {
	t.Cleanup(func() { _ = l.Close() })
	return l
}
