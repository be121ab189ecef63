package otelevents_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/pgtest"
	"github.com/sleeplock/sleeplock/pgstore"
)

// The counts are also checked on PostgreSQL: a schema of the test's own
// on the test database (SLEEPLOCK_TEST_DATABASE_URL).
func init() {
	stores = append(stores, struct {
		name string
		open func(t *testing.T) *sleeplock.Locks
	}{"postgres", func(t *testing.T) *sleeplock.Locks {
		ctx := context.Background()
		if err := pgtest.EnsureDatabase(ctx, pgtest.URL()); err != nil {
			pgtest.Unreachable(t, err)
		}
		pool := pgtest.Pool(t, nil)
		var b [6]byte
		_, _ = rand.Read(b[:])
		schema := "otelevents_test_" + hex.EncodeToString(b[:])
		t.Cleanup(func() {
			if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("dropping schema %s: %v", schema, err)
			}
		})
		if err := pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)); err != nil {
			t.Fatal(err)
		}
		s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		return sleeplock.New(s)
	}})
}
