package promevents_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/pgtest"
	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// The counts are also checked on SQLite (one process's Locks on a file)
// and on PostgreSQL (a schema of the test's own).
func init() {
	stores = append(stores, store{"sqlite", func(t *testing.T) *sleeplock.Locks {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "locks.db"))
		if err != nil {
			t.Fatal(err)
		}
		return sleeplock.New(s)
	}}, store{"postgres", func(t *testing.T) *sleeplock.Locks {
		pool, schema := pgtest.Schema(t, "promevents_test_")
		if err := pgstore.Migrate(context.Background(), pool, pgstore.WithSchema(schema)); err != nil {
			t.Fatal(err)
		}
		s, err := pgstore.New(context.Background(), pool, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		return sleeplock.New(s)
	}})
}
