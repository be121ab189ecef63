package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// TestMissingSchema: New on a schema that was never migrated says to run
// `sleeplock migrate`, and creates nothing.
func TestMissingSchema(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	_, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	var se *pgstore.SchemaError
	if !errors.Is(err, pgstore.ErrSchemaMissing) || !errors.Is(err, store.ErrInvalidConfig) || !errors.As(err, &se) ||
		!strings.Contains(err.Error(), "sleeplock migrate") {
		t.Fatalf("New on a missing schema: %v", err)
	}
	var n int
	must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n))
	if n != 0 {
		t.Fatal("New created the schema")
	}
	// A schema that exists without our tables: the same.
	_, err = pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	must(t, err)
	if _, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema)); !errors.Is(err, pgstore.ErrSchemaMissing) {
		t.Fatalf("New on an empty schema: %v", err)
	}
	// A schema from a newer build.
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	_, err = pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+".migrations (version, name, checksum) VALUES (999, 'future', '')")
	must(t, err)
	if _, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema)); !errors.Is(err, pgstore.ErrSchemaMissing) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("New on a newer schema: %v", err)
	}
	if err := pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)); !errors.Is(err, pgstore.ErrSchemaMissing) {
		t.Fatalf("Migrate on a newer schema: %v", err)
	}
}

// TestWeirdSchemaNames: names with quotes, spaces, dots and non-ASCII
// letters are quoted safely everywhere.
func TestWeirdSchemaNames(t *testing.T) {
	pool := newPool(t, nil)
	ctx := context.Background()
	for _, name := range []string{`it's "quoted"`, `with space.and.dots`, `Ünïcödé; DROP TABLE x; --`, `$$ dollar $fn$`} {
		schema := newSchema(t, pool) + name
		if len(schema) > 63 {
			schema = schema[:63]
		}
		t.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
		must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
		s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
		must(t, err)
		define(t, s, "x", 1)
		g, err := s.Acquire(ctx, req("r", time.Minute, "x"))
		must(t, err)
		if g.Token == 0 {
			t.Fatal("no token")
		}
		r := req("w", time.Minute, "x")
		r.Wait = true
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			for {
				st, err := s.State(ctx, "x", false)
				if err != nil || st.Waiting == 1 {
					cancel()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		if _, err := s.Acquire(wctx, r); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		must(t, s.Release(ctx, g.Handle(), nil))
		must(t, s.Close())
	}
	for _, bad := range []string{"", strings.Repeat("x", 64), "nul\x00", "a$sleeplock$b"} {
		if err := pgstore.Migrate(ctx, pool, pgstore.WithSchema(bad)); !errors.Is(err, store.ErrInvalidConfig) {
			t.Errorf("Migrate with schema %q: %v", bad, err)
		}
		if _, err := pgstore.New(ctx, pool, pgstore.WithSchema(bad)); !errors.Is(err, store.ErrInvalidConfig) {
			t.Errorf("New with schema %q: %v", bad, err)
		}
	}
}

// TestOpenDSN: Open parses the DSN (a bad one is a typed error, never a
// panic) and owns its pool.
func TestOpenDSN(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{"postgres://user:secret@host:notaport/db", "host=x port=99999999", "://", "postgres://%zz"} {
		_, err := pgstore.Open(ctx, dsn)
		var inv *store.InvalidError
		if !errors.Is(err, store.ErrInvalidConfig) || !errors.As(err, &inv) {
			t.Errorf("Open(%q) = %v, want an invalid-config error", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if _, err := pgstore.Open(ctx, dbURL(), pgstore.WithPollInterval(-1)); !errors.Is(err, store.ErrInvalidConfig) {
		t.Errorf("negative poll interval: %v", err)
	}
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	must(t, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	s, err := pgstore.Open(ctx, dbURL(), pgstore.WithSchema(schema))
	must(t, err)
	define(t, s, "o", 1)
	must(t, s.Close())
	if _, err := s.State(ctx, "o", false); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("State after Close: %v", err)
	}
	if _, err := pgstore.Open(ctx, dbURL(), pgstore.WithSchema(schema+"_none")); !errors.Is(err, pgstore.ErrSchemaMissing) {
		t.Fatalf("Open on a missing schema: %v", err)
	}
}

// TestMigrateConcurrently: several nodes migrating at once all succeed and
// leave one schema at the current version; WithUnlogged makes the lease tables
// UNLOGGED.
func TestMigrateConcurrently(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	pools := []*pgxpool.Pool{pool, newPool(t, nil), newPool(t, nil)}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pgstore.Migrate(ctx, pools[i%3], pgstore.WithSchema(schema), pgstore.WithUnlogged()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var n, v int
	must(t, pool.QueryRow(ctx, "SELECT count(*), max(version) FROM "+pgx.Identifier{schema}.Sanitize()+".migrations").Scan(&n, &v))
	if n != pgstore.SchemaVersion || v != pgstore.SchemaVersion {
		t.Fatalf("%d versions recorded, latest %d", n, v)
	}
	var p string
	for _, table := range []string{"holders", "nodes"} {
		must(t, pool.QueryRow(ctx, "SELECT relpersistence::text FROM pg_class WHERE oid = $1::regclass",
			pgx.Identifier{schema, table}.Sanitize()).Scan(&p))
		if p != "u" {
			t.Fatalf("%s persistence %q, want u (unlogged)", table, p)
		}
	}
	must(t, pool.QueryRow(ctx, "SELECT relpersistence::text FROM pg_class WHERE oid = $1::regclass",
		pgx.Identifier{schema, "defs"}.Sanitize()).Scan(&p))
	if p != "p" {
		t.Fatalf("defs persistence %q, want p", p)
	}
	_, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	must(t, err)
}
