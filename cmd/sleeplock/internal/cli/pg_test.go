package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
)

// testDatabaseURL is SLEEPLOCK_TEST_DATABASE_URL or the local test database.
func testDatabaseURL() string { return pgtest.URL() }

// pgSkip is why the PostgreSQL tests skip, "" when they run.
var pgSkip string

// checkTestDatabase connects to the test database, creating it when the
// server answers but the database is missing, and otherwise prints one
// loud line: the PostgreSQL tests of this package will skip.
func checkTestDatabase() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pgtest.EnsureDatabase(ctx, testDatabaseURL()); err != nil {
		pgSkip = strings.Join(strings.Fields(err.Error()), " ") // one line
		fmt.Fprintf(os.Stderr, "\n*** SKIPPING every PostgreSQL test of internal/cli: %s (set SLEEPLOCK_TEST_DATABASE_URL) ***\n\n", pgSkip)
	}
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

// TestNotMigratedNamesSchema: the error of a --schema that was never
// migrated tells the migrate command with that --schema, which the one
// without it would not migrate.
func TestNotMigratedNamesSchema(t *testing.T) {
	dsn := testDSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "cli_test_none_" + hex.EncodeToString(b[:])
	_, errOut, code := run(t, "state", "--store", dsn, "--schema", schema)
	if want := "run `sleeplock migrate --schema " + schema + "`"; code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("state of a schema never migrated: exit %d %q; want 1 and %q", code, errOut, want)
	}
}
