package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

// blocked waits until a fast-path statement of the store (acquire_fast or
// release_fast: the comment that starts it) on e's schema waits for a lock and
// returns its backend's pid.
func blocked(t *testing.T, e *env, fn string) int32 {
	t.Helper()
	start := "/* sleeplock " + fn + "%"
	var pid int32
	waitFor(t, "a blocked "+fn, func() bool {
		err := e.pool.QueryRow(context.Background(),
			"SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1 AND query LIKE $2 LIMIT 1",
			start, "%"+pgx.Identifier{e.schema}.Sanitize()+"%").Scan(&pid)
		return err == nil
	})
	return pid
}

// lateAcquire sends, in the background, a waiting acquire_one() of lock
// for ref "late" with acquisition op (TTL ttl µs), and returns its answer
// (r_ev, or the error's text).
func lateAcquire(ctx context.Context, e *env, lock string, op, ttl int64) <-chan string {
	got := make(chan string, 1)
	go func() {
		var ev string
		err := e.pool.QueryRow(ctx, "SELECT r_ev FROM "+pgx.Identifier{e.schema}.Sanitize()+".acquire_one($1::text, 'late', '', "+
			"$2::bigint, 0, false, true, $3::bigint, 10000000, ARRAY[$1::text], $2::bigint, 0, 78, 1, false)", lock, ttl, op).Scan(&ev)
		if err != nil {
			ev = err.Error()
		}
		got <- ev
	}()
	return got
}

// waitingIn waits until one statement of this database whose text
// contains fn waits for a lock of kind event ('Lock': a row or a
// transaction; 'advisory').
func waitingIn(t *testing.T, e *env, fn, event string) {
	t.Helper()
	waitFor(t, fn+" to wait ("+event+")", func() bool {
		var n int
		must(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity "+
			"WHERE (wait_event_type = $2 OR wait_event = $2) AND query LIKE '%' || $1 || '%' AND datname = current_database() "+
			"AND pid <> pg_backend_pid()", fn, event).Scan(&n))
		return n == 1
	})
}

func terminate(t *testing.T, e *env, pid int32) {
	t.Helper()
	var ok bool
	must(t, e.pool.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", pid).Scan(&ok))
	if !ok {
		t.Fatal("pg_terminate_backend failed")
	}
}

// blockSlot makes grants of name wait: another transaction takes the
// lock's row (free, as a release leaves it) and keeps it.
func blockSlot(t *testing.T, e *env, name string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	g, err := e.s.Acquire(ctx, req("before", time.Minute, name))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	return lockRow(t, e, name)
}

// lockRow takes the row of lock name in a transaction it keeps open.
func lockRow(t *testing.T, e *env, name string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var n int
	must(t, tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+pgx.Identifier{e.schema}.Sanitize()+".locks "+
		"WHERE name = $1 FOR UPDATE) x", name).Scan(&n))
	if n != 1 {
		t.Fatalf("lock %q has no row", name)
	}
	return tx
}

// TestTerminatedDuringAcquire: the connection of a grant is killed while
// the statement runs: the caller gets an error, and no slot is lost or
// doubled.
func TestTerminatedDuringAcquire(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	node := e.node(t)
	define(t, e.s, "k", 1)
	tx := blockSlot(t, e, "k")
	done := make(chan error, 1)
	go func() {
		_, err := node.Acquire(ctx, req("victim", time.Minute, "k"))
		done <- err
	}()
	terminate(t, e, blocked(t, e, "acquire"))
	if err := <-done; err == nil {
		t.Fatal("an acquisition whose connection was killed succeeded")
	}
	must(t, tx.Rollback(ctx))
	wantState(t, e.s, "k", 0, 0)
	g, err := e.s.Acquire(ctx, req("next", time.Minute, "k"))
	must(t, err)
	if _, err := e.s.Acquire(ctx, req("third", time.Minute, "k")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a second holder of a one-slot lock: %v", err)
	}
	must(t, e.s.Release(ctx, g.Handle(), nil))
	wantState(t, e.s, "k", 0, 0)
}

// TestTerminatedDuringRelease: the connection of a release is killed: the
// lease is still held (nothing half done) and a second release frees it.
func TestTerminatedDuringRelease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	node := e.node(t)
	define(t, e.s, "r", 1)
	g, err := node.Acquire(ctx, req("holder", time.Minute, "r"))
	must(t, err)
	// Another transaction locks the lock's row: the release waits.
	tx := lockRow(t, e, "r")
	done := make(chan error, 1)
	go func() { done <- node.Release(ctx, g.Handle(), nil) }()
	terminate(t, e, blocked(t, e, "release"))
	if err := <-done; err == nil {
		t.Fatal("a release whose connection was killed succeeded")
	}
	must(t, tx.Rollback(ctx))
	wantState(t, e.s, "r", 1, 0)
	st, err := node.Held(ctx, g.Handle())
	must(t, err)
	if !st.Held {
		t.Fatal("lease lost by a killed release")
	}
	must(t, node.Release(ctx, g.Handle(), nil))
	wantState(t, e.s, "r", 0, 0)
}

// TestCancelledDuringGrantUndoes: a try whose context ends while its
// statement waits for a slot: the caller gets the context's error, and the
// slot stays free once the other transaction is gone.
func TestCancelledDuringGrantUndoes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "u", 2)
	tx := blockSlot(t, e, "u")
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.s.Acquire(cctx, req("gone", time.Minute, "u"))
		done <- err
	}()
	blocked(t, e, "acquire")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled try: %v", err)
	}
	must(t, tx.Rollback(ctx))
	waitFor(t, "no acquire running", func() bool {
		var n int
		_ = e.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE (query LIKE '/* sleeplock acquire%' OR query LIKE '%.acquire(%') "+
			"AND query LIKE $1 AND state = 'active' AND pid <> pg_backend_pid()", "%"+pgx.Identifier{e.schema}.Sanitize()+"%").Scan(&n)
		return n == 0
	})
	wantState(t, e.s, "u", 0, 0)
}

// TestLateAcquisitionAfterUndoGrantsNothing: an acquisition's statement
// that reaches the server only after the undo that abandoned it (its
// caller gone) neither grants nor queues: the lock stays free.
func TestLateAcquisitionAfterUndoGrantsNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "late", 1)
	q := pgx.Identifier{e.schema}.Sanitize()
	for i, wait := range []bool{false, true} {
		op := int64(4242 + i)
		_, err := e.pool.Exec(ctx, "SELECT * FROM "+q+".undo('{late}', 'gone', $1)", op)
		must(t, err)
		var ev string
		must(t, e.pool.QueryRow(ctx, "SELECT r_ev FROM "+q+".acquire_one('late', 'gone', '', 60000000, 0, false, $1, $2, "+
			"10000000, '{late}', 60000000, 0, 0, 1, false)", wait, op).Scan(&ev))
		if ev != "cancelled" {
			t.Fatalf("late acquisition (wait %v) after its undo: %s", wait, ev)
		}
		wantState(t, e.s, "late", 0, 0)
	}
	_, err := e.s.Acquire(ctx, req("next", time.Minute, "late"))
	must(t, err)
}

// TestQueueingAfterUndoUnderRowQueuesNothing: an acquisition that waits for
// its lock's row while undo() abandons it queues nothing once it has the
// row (acquire_one()'s queueing behind others checks for the tombstone
// under the row).
func TestQueueingAfterUndoUnderRowQueuesNothing(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	define(t, e.s, "lateq", 1)
	q := pgx.Identifier{e.schema}.Sanitize()
	_, err := e.s.Acquire(ctx, req("holder", time.Minute, "lateq"))
	must(t, err)
	ticket := nodeWaiter(t, e, "lateq", "first", 77, 7700, "10 seconds")
	// its queue row its own, as a store queues it
	_, err = e.pool.Exec(ctx, "UPDATE "+q+".queue SET own = true WHERE ticket = $1", ticket)
	must(t, err)
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+q+".locks WHERE name = 'lateq' FOR UPDATE")
	must(t, err)
	const op = 5151
	got := lateAcquire(ctx, e, "lateq", op, 60000000)
	waitingIn(t, e, "acquire_one", "Lock")
	_, err = tx.Exec(ctx, "INSERT INTO "+q+".cancelled (op, at) VALUES ($1, now())", op)
	must(t, err)
	must(t, tx.Commit(ctx))
	if ev := <-got; ev != "cancelled" {
		t.Fatalf("acquisition abandoned while it waited for the row: %s", ev)
	}
	var n int
	must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM "+q+".queue WHERE lock = 'lateq'").Scan(&n))
	if n != 1 {
		t.Fatalf("%d queued, want the first waiter alone", n)
	}
}

// TestWaitingAcquisitionBehindUndoOfIdleRow: a waiting acquisition whose
// statement reaches the server while undo() abandons it, and waits for the
// lock's row that undo() holds, finds the row deleted (undo() forgets an
// idle row) once it has it: it is answered 'cancelled', and nothing is
// granted (a grant with no TTL would never end).
func TestWaitingAcquisitionBehindUndoOfIdleRow(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	define(t, e.s, "idle", 1)
	q := pgx.Identifier{e.schema}.Sanitize()
	g, err := e.s.Acquire(ctx, req("before", time.Minute, "idle"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	const op = 4343
	_, err = tx.Exec(ctx, "SELECT * FROM "+q+".undo('{idle}', 'late', $1)", op)
	must(t, err)
	got := lateAcquire(ctx, e, "idle", op, 0)
	waitingIn(t, e, "acquire_one", "Lock")
	must(t, tx.Commit(ctx))
	if ev := <-got; ev != "cancelled" {
		t.Fatalf("acquisition abandoned while it waited for the row: %s", ev)
	}
	wantState(t, e.s, "idle", 0, 0)
}

// TestResizeRacingFirstGrantOfSlots: a lock's first grant that would turn
// its row to slot mode while a resize of the lock is not
// yet committed waits for it, and its slot arrays have the new slots: the
// lock never has more holders than them.
func TestResizeRacingFirstGrantOfSlots(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	define(t, e.s, "rz", 3)
	q := pgx.Identifier{e.schema}.Sanitize()
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, "SELECT * FROM "+q+".resize('rz', 2)")
	must(t, err)
	node := e.node(t)
	done := make(chan error, 1)
	go func() {
		_, err := node.Acquire(ctx, req("a", time.Minute, "rz"))
		done <- err
	}()
	waitingIn(t, e, "acquire_one", "advisory")
	must(t, tx.Commit(ctx))
	must(t, <-done)
	_, err = node.Acquire(ctx, req("b", time.Minute, "rz"))
	must(t, err)
	if _, err := node.Acquire(ctx, req("c", time.Minute, "rz")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a third holder of a lock resized to 2 slots: %v", err)
	}
	wantState(t, e.s, "rz", 2, 0)
}
