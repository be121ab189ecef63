package chaos

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
)

// The locks every worker contends for: a family of one-slot locks
// (Family + "/0" … "/N-1") and one lock of PoolSlots slots.
const (
	Family    = "res"
	Pool      = "pool"
	PoolSlots = 3
)

// Member returns the name of the i-th member of the one-slot family.
func Member(i int) string { return fmt.Sprintf("%s/%d", Family, i) }

// tablesSQL creates the run's own tables next to sleeplock's, in the same
// schema (dropped as a whole at the end of the run). %[1]s is the quoted
// schema.
//
//   - chaos_resources: the guarded resources, one per lock, with the highest
//     fencing token accepted so far. The trigger on chaos_writes rejects, on a
//     one-slot resource, a token lower than that (SQLSTATE CH001): the
//     resource fences by itself, as the fencing-token pattern asks.
//   - chaos_writes: every accepted write, with the database's clock when the
//     statement started and when the trigger accepted it; held says whether
//     the lease was still held in the write's transaction (true with Guard;
//     without, a probe after the write; null when the probe failed).
//   - chaos_holdings: every grant a worker saw, with the grant's time (the
//     store's clock), how long the caller waited, the database's clock right
//     after Acquire returned (observed: later than the grant's commit) and
//     when the worker started to release it (its clock corrected to the
//     database's).
//   - chaos_faults: what the driver did, when (database clock).
//   - chaos_stats: the workers' counters, flushed every few hundred ms.
const tablesSQL = `
CREATE TABLE %[1]s.chaos_resources (
    name      text PRIMARY KEY,
    slots     int NOT NULL,
    max_token bigint NOT NULL DEFAULT 0,
    accepted  bigint NOT NULL DEFAULT 0
);
CREATE TABLE %[1]s.chaos_writes (
    id       bigserial PRIMARY KEY,
    resource text NOT NULL,
    token    bigint NOT NULL,
    ref      text NOT NULL,
    worker   text NOT NULL,
    guarded  boolean NOT NULL,
    held     boolean,
    t_start  timestamptz NOT NULL DEFAULT clock_timestamp(),
    t_end    timestamptz
);
CREATE INDEX ON %[1]s.chaos_writes (resource, token);
CREATE TABLE %[1]s.chaos_holdings (
    lock     text NOT NULL,
    token    bigint NOT NULL,
    ref      text NOT NULL,
    worker   text NOT NULL,
    op       text NOT NULL,
    acquired timestamptz NOT NULL,
    waited   interval NOT NULL,
    observed timestamptz NOT NULL DEFAULT clock_timestamp(),
    released timestamptz,
    PRIMARY KEY (lock, token)
);
CREATE TABLE %[1]s.chaos_faults (
    id     bigserial PRIMARY KEY,
    kind   text NOT NULL,
    worker text NOT NULL DEFAULT '',
    at     timestamptz NOT NULL,
    until  timestamptz,
    note   text NOT NULL DEFAULT ''
);
CREATE TABLE %[1]s.chaos_stats (
    worker text NOT NULL,
    name   text NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (worker, name)
);
CREATE FUNCTION %[1]s.chaos_fence() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    v_slots int;
    v_max   bigint;
BEGIN
    SELECT r.slots, r.max_token INTO v_slots, v_max
      FROM %[1]s.chaos_resources r WHERE r.name = NEW.resource FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'chaos: unknown resource %%', NEW.resource USING ERRCODE = 'CH002';
    END IF;
    -- the resource's own fence: a one-slot resource never goes back to an
    -- older holder's token
    IF v_slots = 1 AND NEW.token < v_max THEN
        RAISE EXCEPTION 'chaos: stale token %% < %% on %%', NEW.token, v_max, NEW.resource
              USING ERRCODE = 'CH001';
    END IF;
    UPDATE %[1]s.chaos_resources
       SET max_token = greatest(max_token, NEW.token), accepted = accepted + 1
     WHERE name = NEW.resource;
    NEW.t_end := clock_timestamp();
    RETURN NEW;
END
$fn$;
CREATE TRIGGER chaos_fence BEFORE INSERT ON %[1]s.chaos_writes
    FOR EACH ROW EXECUTE FUNCTION %[1]s.chaos_fence();
`

// errStale is the SQLSTATE of a write the resource rejected for its token.
const errStale = "CH001"

// Setup creates a run's schema: sleeplock's tables (pgstore.Migrate),
// the chaos tables, the family Family/* of one slot with its members
// 0..members-1 as resources, and the lock Pool of PoolSlots slots.
func Setup(ctx context.Context, pool *pgxpool.Pool, schema string, members int) error {
	if members < 1 {
		return invalid(fmt.Sprintf("%d members: at least one is needed", members))
	}
	if err := pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)); err != nil {
		return fmt.Errorf("chaos: migrate: %w", err)
	}
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, fmt.Sprintf(tablesSQL, q)); err != nil {
		return fmt.Errorf("chaos: creating tables: %w", err)
	}
	names := []string{Pool}
	slots := []int32{PoolSlots}
	for i := range members {
		names = append(names, Member(i))
		slots = append(slots, 1)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+q+".chaos_resources (name, slots) SELECT * FROM unnest($1::text[], $2::int[])",
		names, slots); err != nil {
		return fmt.Errorf("chaos: creating resources: %w", err)
	}
	s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	defer func() { _ = s.Close() }()
	locks := sleeplock.New(s)
	if err := locks.Define(ctx, Family+"/*", 1); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := locks.Define(ctx, Pool, PoolSlots); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// DropSchema removes a run's schema and everything in it.
func DropSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// withParams returns dsn with the given connection parameters added, for a
// postgres:// URL or a key=value string.
func withParams(dsn string, kv ...string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		for i := 0; i+1 < len(kv); i += 2 {
			dsn += sep + url.QueryEscape(kv[i]) + "=" + url.QueryEscape(kv[i+1])
			sep = "&"
		}
		return dsn
	}
	for i := 0; i+1 < len(kv); i += 2 {
		dsn += " " + kv[i] + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(kv[i+1]) + "'"
	}
	return dsn
}

func quote(schema string) string { return pgx.Identifier{schema}.Sanitize() }

// invalid is the error of a configuration that cannot be used: it matches
// sleeplock.ErrInvalidConfig and says what is wrong.
func invalid(msg string) error { return fmt.Errorf("chaos: %w: %s", sleeplock.ErrInvalidConfig, msg) }
