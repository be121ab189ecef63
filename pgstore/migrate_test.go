package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// TestMigrateRefusesEditedMigration: Migrate records each migration's
// checksum and refuses a schema whose recorded checksum is not this
// build's (a released migration was edited).
func TestMigrateRefusesEditedMigration(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	_, err := pool.Exec(ctx, "UPDATE "+pgx.Identifier{schema}.Sanitize()+".migrations SET checksum = 'edited' WHERE version = 1")
	must(t, err)
	err = pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema))
	var ce *pgstore.ChecksumError
	if !errors.Is(err, pgstore.ErrMigrationChanged) || !errors.Is(err, store.ErrInvalidConfig) || !errors.As(err, &ce) ||
		ce.Version != 1 || ce.Have != "edited" {
		t.Fatalf("Migrate over an edited migration: %v", err)
	}
}

// TestNewRefusesOtherFunctions: the schema records a fingerprint of its
// functions; New refuses another build's, saying to run `sleeplock
// migrate`, which applies this build's.
func TestNewRefusesOtherFunctions(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	_, err := pool.Exec(ctx, "UPDATE "+pgx.Identifier{schema}.Sanitize()+".functions SET fingerprint = 'another build'")
	must(t, err)
	_, err = pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	var se *pgstore.SchemaError
	if !errors.Is(err, pgstore.ErrSchemaMissing) || !errors.As(err, &se) || !se.Functions ||
		!strings.Contains(err.Error(), "sleeplock migrate") {
		t.Fatalf("New on another build's functions: %v", err)
	}
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	must(t, err)
	must(t, s.Close())
}

// TestMigrateDropsOtherFunctions: Migrate re-applies every function, keeps
// their number, and drops a function of the schema that this build does
// not define (a renamed one's old name, an overload).
func TestMigrateDropsOtherFunctions(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	q := pgx.Identifier{schema}.Sanitize()
	count := func() (n int) {
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace", q).Scan(&n))
		return n
	}
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	want := count()
	_, err := pool.Exec(ctx, "CREATE FUNCTION "+q+".gone() RETURNS int LANGUAGE sql AS 'SELECT 1'; "+
		"CREATE FUNCTION "+q+".micros(integer) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'")
	must(t, err)
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	if n := count(); n != want {
		t.Fatalf("%d functions after Migrate, want %d", n, want)
	}
	var left int
	must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace "+
		"AND (proname = 'gone' OR (proname = 'micros' AND pronargs = 1 AND proargtypes[0] = 'integer'::regtype))", q).Scan(&left))
	if left != 0 {
		t.Fatalf("%d functions this build does not define were left", left)
	}
}

// TestMigrateDSN: a program that uses Open migrates with the same DSN,
// without a pool of its own; a DSN that does not parse is a typed error.
func TestMigrateDSN(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	must(t, pgstore.MigrateDSN(ctx, dbURL(), pgstore.WithSchema(schema)))
	s, err := pgstore.Open(ctx, dbURL(), pgstore.WithSchema(schema))
	must(t, err)
	must(t, s.Close())
	if err := pgstore.MigrateDSN(ctx, "postgres://%zz", pgstore.WithSchema(schema)); !errors.Is(err, store.ErrInvalidConfig) {
		t.Fatalf("MigrateDSN of a bad DSN: %v", err)
	}
}

// TestOlderMigrateRefused: the Migrate of a build that lacks a migration
// the schema has (an older release's, run by mistake on a newer schema) is
// refused with a *SchemaError and changes nothing: the functions stay
// those the schema had.
func TestOlderMigrateRefused(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	q := pgx.Identifier{schema}.Sanitize()
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	// The newer release: one migration more, and a function of its own.
	_, err := pool.Exec(ctx, "INSERT INTO "+q+".migrations (version, name, checksum) VALUES ($1::integer + 1, 'newer', 'x')",
		pgstore.SchemaVersion)
	must(t, err)
	_, err = pool.Exec(ctx, "CREATE FUNCTION "+q+".newer() RETURNS int LANGUAGE sql AS 'SELECT 1'")
	must(t, err)
	err = pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema))
	var se *pgstore.SchemaError
	if !errors.Is(err, pgstore.ErrSchemaMissing) || !errors.As(err, &se) || se.Have != pgstore.SchemaVersion+1 {
		t.Fatalf("an older Migrate on a newer schema: %v", err)
	}
	var n int
	must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace AND proname = 'newer'", q).Scan(&n))
	if n != 1 {
		t.Fatal("the refused Migrate dropped the newer release's function")
	}
}
