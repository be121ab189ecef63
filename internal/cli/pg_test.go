package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
)

// testDatabaseURL is SLEEPLOCK_TEST_DATABASE_URL or the local test database.
func testDatabaseURL() string {
	if u := os.Getenv("SLEEPLOCK_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// pgSkip is why the PostgreSQL tests skip, "" when they run.
var pgSkip string

// checkTestDatabase connects to the test database, creating it when the
// server answers but the database is missing, and otherwise prints one
// loud line: the PostgreSQL tests of this package will skip.
func checkTestDatabase() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ensureDatabase(ctx, testDatabaseURL()); err != nil {
		pgSkip = strings.Join(strings.Fields(err.Error()), " ") // one line
		fmt.Fprintf(os.Stderr, "\n*** SKIPPING every PostgreSQL test of internal/cli: %s (set SLEEPLOCK_TEST_DATABASE_URL) ***\n\n", pgSkip)
	}
}

// ensureDatabase creates the database of url (through the database
// "postgres" of the same server) when it does not exist.
func ensureDatabase(ctx context.Context, url string) error {
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

// pgEnv is a migrated schema of its own in the test database, with the
// flags that point a command at it and Locks on it for the test's own
// holders.
type pgEnv struct {
	dsn, schema string
	locks       *sleeplock.Locks
}

// newPG migrates a fresh schema (dropped when the test ends) through
// "sleeplock migrate"; it skips, or fails under CI, like testDSN.
func newPG(t *testing.T, opts ...sleeplock.Option) pgEnv {
	t.Helper()
	dsn := testDSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "cli_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	if out, errOut, code := run(t, "migrate", "--store", dsn, "--schema", schema); code != 0 {
		t.Fatalf("migrate: exit %d %s %s", code, out, errOut)
	}
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	locks := sleeplock.New(s, opts...)
	t.Cleanup(func() { _ = locks.Close() })
	return pgEnv{dsn, schema, locks}
}

// run runs a command against the env's store.
func (e pgEnv) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return run(t, append(args, "--store", e.dsn, "--schema", e.schema)...)
}
