// Package pgtest is what tests against PostgreSQL share: the test
// database's URL (SLEEPLOCK_TEST_DATABASE_URL), its creation when missing,
// a pool that skips the test when the database cannot be reached (or fails
// it when the environment variable CI is set), a schema of the test's
// own, dropped when the test ends, and a PostgreSQL cluster of a test's
// own on a free port (OwnCluster, CreateCluster) for the tests that stop,
// restart, pause or fail over their server.
//
// It lives in the pgstore module so that the tests of every module that
// uses pgstore (pgstore's own, the command's, the cross-store tests of
// internal/integration) share it at no cost to pgstore's users: it needs
// nothing that pgstore does not already require. Programs should not
// import it.
package pgtest

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the test database when SLEEPLOCK_TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL is the test database: SLEEPLOCK_TEST_DATABASE_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("SLEEPLOCK_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// EnsureDatabase creates the database of url (through the database
// "postgres" of the same server) when the server answers and the database
// does not exist.
func EnsureDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return c.Close(ctx)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "3D000" { // invalid_catalog_name
		return err
	}
	name := cfg.Database
	cfg.Database = "postgres"
	if c, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx) }()
	_, err = c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if errors.As(err, &pe) && pe.Code == "42P04" { // created meanwhile
		err = nil
	}
	return err
}

// Unreachable skips t because the test database cannot be used, or fails
// it when CI is set.
func Unreachable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("test database unreachable: %v", err)
	}
	t.Skipf("test database unreachable (set SLEEPLOCK_TEST_DATABASE_URL): %v", err)
}

// Pool connects to the test database with cfg's settings (nil: the
// defaults), or skips the test (fails it under CI) when it is unreachable.
// The pool is closed when the test ends.
func Pool(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		Unreachable(t, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Schema is a schema of the test's own on the test database, named prefix
// and a random suffix, dropped with everything in it when the test ends,
// and a pool to reach it (see Pool). The database is created when missing.
func Schema(t testing.TB, prefix string) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	if err := EnsureDatabase(ctx, URL()); err != nil {
		Unreachable(t, err)
	}
	pool := Pool(t, nil)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return pool, schema
}

//go:embed sql/testing.sql
var testingSQL string

// TestFunctions is the SQL that creates, in a pgstore schema (quoted as an
// identifier here), the functions only tests use: advance(), which dates
// every lease and waiter back as if time had passed on the database's
// clock. It expires every lease, so no production schema has it: Migrate
// never installs it, and a later Migrate drops it (a function no file of
// pgstore/sql defines). Tests execute it themselves.
func TestFunctions(schema string) string {
	return strings.ReplaceAll(testingSQL, "{{schema}}", pgx.Identifier{schema}.Sanitize())
}
