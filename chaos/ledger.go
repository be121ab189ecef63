package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// ledgerSQL turns the chaos tables made by tablesSQL into a ledger: the
// record of a run whose store is elsewhere (a PostgreSQL cluster that fails
// over, or a SQLite file). The ledger's chaos_writes are copies of writes
// the store accepted, so it fences nothing; a token may be granted twice
// after a failover, so chaos_holdings has no key; stored says that the
// grant's copy in the store's database committed, believed_until when its
// holder stopped believing it held the lease (its Done channel closed, or
// it began to release it); chaos_attempts is every
// fenced write attempt, with whether its holder still believed it held the
// lease (Done not closed).
const ledgerSQL = `
DROP TRIGGER chaos_fence ON %[1]s.chaos_writes;
ALTER TABLE %[1]s.chaos_holdings DROP CONSTRAINT chaos_holdings_pkey;
ALTER TABLE %[1]s.chaos_holdings ADD COLUMN stored boolean NOT NULL DEFAULT false;
ALTER TABLE %[1]s.chaos_holdings ADD COLUMN believed_until timestamptz;
CREATE INDEX ON %[1]s.chaos_holdings (lock, token);
CREATE TABLE %[1]s.chaos_attempts (
    resource text NOT NULL,
    token    bigint NOT NULL,
    ref      text NOT NULL,
    worker   text NOT NULL,
    at       timestamptz NOT NULL,
    believed boolean NOT NULL,
    outcome  text NOT NULL
);
CREATE INDEX ON %[1]s.chaos_attempts (resource, ref);
`

// SetupLedger creates a run's ledger in schema: the chaos tables of Setup
// without the fence (see ledgerSQL), and the resources, the family
// Family/* of one slot (members 0..members-1) and the lock Pool.
func SetupLedger(ctx context.Context, pool *pgxpool.Pool, schema string, members int) error {
	if members < 1 {
		return invalid(fmt.Sprintf("%d members: at least one is needed", members))
	}
	q := quote(schema)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+q); err != nil {
		return fmt.Errorf("chaos: creating the ledger: %w", err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(tablesSQL+ledgerSQL, q)); err != nil {
		return fmt.Errorf("chaos: creating the ledger: %w", err)
	}
	names, slots := resources(members)
	if _, err := pool.Exec(ctx, "INSERT INTO "+q+".chaos_resources (name, slots) SELECT * FROM unnest($1::text[], $2::int[])",
		names, slots); err != nil {
		return fmt.Errorf("chaos: creating resources: %w", err)
	}
	return nil
}

// resources are the names and slots of the run's locks.
func resources(members int) ([]string, []int32) {
	names := []string{Pool}
	slots := []int32{PoolSlots}
	for i := range members {
		names = append(names, Member(i))
		slots = append(slots, 1)
	}
	return names, slots
}

// sqliteTables are the guarded resources in a SQLite run's database file:
// a write to a one-slot resource with a token lower than the highest it
// accepted fails with sqliteStaleMsg.
const sqliteTables = `
CREATE TABLE chaos_resources (
    name      TEXT PRIMARY KEY,
    slots     INTEGER NOT NULL,
    max_token INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE chaos_writes (
    id       INTEGER PRIMARY KEY,
    resource TEXT NOT NULL,
    token    INTEGER NOT NULL,
    ref      TEXT NOT NULL,
    worker   TEXT NOT NULL
);
CREATE TRIGGER chaos_fence BEFORE INSERT ON chaos_writes
WHEN (SELECT r.slots = 1 AND NEW.token < r.max_token FROM chaos_resources r WHERE r.name = NEW.resource)
BEGIN
    SELECT RAISE(ABORT, 'chaos: stale token');
END;
CREATE TRIGGER chaos_fence_max AFTER INSERT ON chaos_writes
BEGIN
    UPDATE chaos_resources SET max_token = max(max_token, NEW.token) WHERE name = NEW.resource;
END;
`

// sqliteStaleMsg is the message of a write the SQLite resource refused.
const sqliteStaleMsg = "chaos: stale token"

// sqliteURI is the database/sql name of the SQLite file at path, with the
// busy timeout sqlitestore.Store.Guard asks for.
func sqliteURI(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=busy_timeout(5000)"
}

// defineLocks defines the run's locks on s, and closes it: the family
// Family/* of one slot and the lock Pool.
func defineLocks(ctx context.Context, s store.Store) error {
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	if err := locks.Define(ctx, Family+"/*", 1); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := locks.Define(ctx, Pool, PoolSlots); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// SetupSQLite creates a SQLite run's database file at path: sleeplock's
// tables (sqlitestore.Open), the guarded resources and the locks.
func SetupSQLite(ctx context.Context, path string, members int) error {
	s, err := sqlitestore.Open(ctx, path)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := defineLocks(ctx, s); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", sqliteURI(path))
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(ctx, sqliteTables); err != nil {
		return fmt.Errorf("chaos: creating the SQLite resources: %w", err)
	}
	names, slots := resources(members)
	for i := range names {
		if _, err := db.ExecContext(ctx, "INSERT INTO chaos_resources (name, slots) VALUES (?, ?)", names[i], slots[i]); err != nil {
			return fmt.Errorf("chaos: creating the SQLite resources: %w", err)
		}
	}
	return nil
}
