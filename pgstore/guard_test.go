package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// TestGuardBlocksTakeover: while a transaction has guarded a lease, the
// lease cannot be taken over even when expired; after the commit it can,
// and a guard then fails with ErrLeaseLost.
func TestGuardBlocksTakeover(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other := e.node(t)
	define(t, e.s, "g", 1)
	g, err := e.s.Acquire(ctx, req("writer", time.Minute, "g"))
	must(t, err)

	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	must(t, e.s.Guard(ctx, tx, g.Handle()))
	must(t, e.s.Advance(ctx, 2*time.Minute)) // the lease has expired…
	if _, err := other.Acquire(ctx, req("thief", time.Minute, "g")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("takeover of a guarded lease: %v", err) // …but is guarded
	}
	// Renewal still works while guarded.
	_, err = other.Keep(ctx, g.Handle(), time.Minute, 0)
	must(t, err)
	must(t, tx.Commit(ctx))
	must(t, e.s.Advance(ctx, 2*time.Minute))

	th, err := other.Acquire(ctx, req("thief", time.Minute, "g"))
	must(t, err)
	tx2, err := e.pool.Begin(ctx)
	must(t, err)
	defer tx2.Rollback(ctx)
	if err := e.s.Guard(ctx, tx2, g.Handle()); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("guard of a lease taken over: %v", err)
	}
	// A handle of the same ref with another token is not the holder either.
	must(t, other.Release(ctx, th.Handle(), nil))
	if err := e.s.Guard(ctx, "not a tx", g.Handle()); !errors.Is(err, store.ErrUnsupported) {
		t.Fatalf("guard with a string: %v", err)
	}
}

// TestGuardTokenMismatch: the same ref acquiring again gets a new token;
// a guard with the old token fails.
func TestGuardTokenMismatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "gt", 1)
	old, err := e.s.Acquire(ctx, req("same", time.Minute, "gt"))
	must(t, err)
	must(t, e.s.Release(ctx, old.Handle(), nil))
	cur, err := e.s.Acquire(ctx, req("same", time.Minute, "gt"))
	must(t, err)
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	if err := e.s.Guard(ctx, tx, old.Handle()); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("guard with an old token: %v", err)
	}
	must(t, tx.Rollback(ctx))
	tx, err = e.pool.Begin(ctx)
	must(t, err)
	must(t, e.s.Guard(ctx, tx, cur.Handle()))
	must(t, tx.Commit(ctx))
}

// TestDatabaseSQL runs the store through database/sql (the pgx stdlib
// driver): migrations, operations and Guard with a *sql.Tx.
func TestDatabaseSQL(t *testing.T) {
	pool := newPool(t, nil) // skips when the database is unreachable
	schema := newSchema(t, pool)
	db, err := sql.Open("pgx", dbURL())
	must(t, err)
	defer db.Close()
	ctx := context.Background()
	must(t, pgstore.MigrateSQL(ctx, db, pgstore.WithSchema(schema)))
	must(t, pgstore.MigrateSQL(ctx, db, pgstore.WithSchema(schema))) // idempotent
	s, err := pgstore.NewSQL(ctx, db, pgstore.WithSchema(schema), pgstore.WithPollInterval(5*time.Millisecond))
	must(t, err)
	defer s.Close()
	define(t, s, "chat/*", 1)
	define(t, s, "user/*", 1)
	g, err := s.Acquire(ctx, req("turn", time.Minute, "chat/1", "user/1"))
	must(t, err)
	if _, err := s.Acquire(ctx, req("x", time.Minute, "user/1")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatal(err)
	}
	_, err = s.Keep(ctx, g.Handle(), time.Minute, 0)
	must(t, err)
	st, err := s.Held(ctx, g.Handle())
	must(t, err)
	if !st.Held {
		t.Fatal("not held")
	}
	tx, err := db.BeginTx(ctx, nil)
	must(t, err)
	must(t, s.Guard(ctx, tx, g.Handle()))
	must(t, tx.Commit())
	list, err := s.List(ctx, true)
	must(t, err)
	if len(list) != 4 || list[0].Name != "chat/*" || list[1].Name != "chat/1" || len(list[1].Holders) != 1 {
		t.Fatalf("list %+v", list)
	}
	// A waiter through database/sql.
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "user/1")
		r.Wait = true
		w, err := s.Acquire(ctx, r)
		if err == nil {
			err = s.Release(ctx, w.Handle(), nil)
		}
		done <- err
	}()
	waiting(t, s, "user/1", 1)
	must(t, s.Release(ctx, g.Handle(), nil))
	must(t, <-done)
	wantState(t, s, "user/1", 0, 0)

	// The bare statements, which return their instants as timestamps
	// (usTime): a lock of one slot, then of two (slot mode), with a TTL
	// and without (expires NULL); the first pair of each makes the row.
	define(t, s, "solo", 1)
	define(t, s, "duo", 2)
	for _, name := range []string{"solo", "duo"} {
		for i := range 3 {
			ttl := time.Duration(i) * time.Minute
			before := time.Now()
			g, err := s.Acquire(ctx, req("bare", ttl, name))
			must(t, err)
			if d := g.Acquired.Sub(before); d < -time.Minute || d > time.Minute || g.Expires.IsZero() != (ttl == 0) ||
				(ttl > 0 && g.Expires.Sub(g.Acquired) != ttl) {
				t.Fatalf("%s, TTL %v: acquired %v (%v from this clock), expires %v", name, ttl, g.Acquired, d, g.Expires)
			}
			rec := newRecorder()
			must(t, s.Release(ctx, g.Handle(), rec))
			if evs := rec.drain(); len(evs) != 1 || evs[0].Held < 0 || evs[0].Time.Before(g.Acquired) {
				t.Fatalf("%s, TTL %v: release events %+v after a grant at %v", name, ttl, evs, g.Acquired)
			}
		}
	}
}

// TestGuardRepeatableRead: Guard moves a lease held in its lock's row to a
// holder row in a transaction of its own. A REPEATABLE
// READ transaction that calls Guard first sees that row; one whose
// snapshot is older is told so, not that the lease was lost (unless it
// was).
func TestGuardRepeatableRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "rr", 1)
	// begin starts a REPEATABLE READ transaction, rolled back at the end
	// of the test if it is still open; with a statement run in it first
	// when snapshot (the snapshot is taken then).
	begin := func(snapshot bool) pgx.Tx {
		t.Helper()
		tx, err := e.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		must(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if snapshot {
			_, err = tx.Exec(ctx, "SELECT 1")
			must(t, err)
		}
		return tx
	}

	g, err := e.s.Acquire(ctx, req("writer", time.Minute, "rr"))
	must(t, err)
	tx := begin(true)
	if err := e.s.Guard(ctx, tx, g.Handle()); !errors.Is(err, store.ErrUnsupported) || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("guard in a transaction with an older snapshot: %v", err)
	}
	must(t, tx.Rollback(ctx))
	must(t, e.s.Release(ctx, g.Handle(), nil))

	// The same when another caller moved the holder out of the lock's row
	// after the snapshot (its grant of a second slot spills the row), so
	// that Guard itself moves nothing: still not lost.
	define(t, e.s, "rr2", 2)
	g2, err := e.s.Acquire(ctx, req("writer", time.Minute, "rr2"))
	must(t, err)
	tx = begin(true)
	second, err := e.node(t).Acquire(ctx, req("second", time.Minute, "rr2"))
	must(t, err)
	if second.Token <= g2.Token {
		t.Fatalf("second slot's token %d, first's %d", second.Token, g2.Token)
	}
	if err := e.s.Guard(ctx, tx, g2.Handle()); !errors.Is(err, store.ErrUnsupported) || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("guard in a transaction with an older snapshot, the row spilled by another caller: %v", err)
	}
	must(t, tx.Rollback(ctx))
	must(t, e.s.Release(ctx, g2.Handle(), nil))

	// The same, for a lease past its expiry that nobody took over: it is
	// still its holder's (Guard accepts it in a fresh transaction), so the
	// older snapshot is what Guard reports, not a loss.
	g, err = e.s.Acquire(ctx, req("writer", time.Minute, "rr"))
	must(t, err)
	tx = begin(true)
	must(t, e.s.Advance(ctx, 2*time.Minute))
	if err := e.s.Guard(ctx, tx, g.Handle()); !errors.Is(err, store.ErrUnsupported) || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("guard of an expired lease in a transaction with an older snapshot: %v", err)
	}
	must(t, tx.Rollback(ctx))
	_ = e.s.Release(ctx, g.Handle(), nil)

	g, err = e.s.Acquire(ctx, req("writer", time.Minute, "rr"))
	must(t, err)
	tx = begin(false)
	must(t, e.s.Guard(ctx, tx, g.Handle()))
	must(t, tx.Commit(ctx))
	must(t, e.s.Release(ctx, g.Handle(), nil))
}

// TestGuardOfHoldInSlot: Guard of a lease held in a slot of its lock's row
// moves the lock's holders to holder rows first, then
// guards the lease there; a lease of another ref in the same lock is not
// guarded by it, and the guarded one still cannot be taken over.
func TestGuardOfHoldInSlot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "gs", 2)
	a, err := e.s.Acquire(ctx, req("a", time.Minute, "gs"))
	must(t, err)
	b, err := e.s.Acquire(ctx, req("b", time.Minute, "gs"))
	must(t, err)
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	must(t, e.s.Guard(ctx, tx, b.Handle()))
	var holders string
	must(t, e.pool.QueryRow(ctx, "SELECT string_agg(ref || slot, ',' ORDER BY slot) FROM "+q+".holders WHERE lock = 'gs'").
		Scan(&holders))
	if holders != "a1,b2" {
		t.Fatalf("holder rows after Guard: %q", holders)
	}
	// a is not guarded: released while b's guard stands.
	must(t, e.s.Release(ctx, a.Handle(), nil))
	must(t, e.s.Advance(ctx, 2*time.Minute))
	other := e.node(t)
	// the free slot is granted, the guarded expired one is not taken over
	c, err := other.Acquire(ctx, req("c", time.Minute, "gs"))
	must(t, err)
	if _, err := other.Acquire(ctx, req("thief", time.Minute, "gs")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("takeover of a guarded lease held in a slot: %v", err)
	}
	must(t, tx.Commit(ctx))
	must(t, other.Release(ctx, c.Handle(), nil))
}
