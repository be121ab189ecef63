package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

// Weights on PostgreSQL's own paths: a weighted hold lives in a holder row,
// so a weighted request meets a lock whose row is fast (its holders in the
// row, scalar or slot mode) by spilling it, and the weight-1 holders it
// moved keep working from their holder rows.

// weighted is r asking w slots.
func weighted(r store.AcquireRequest, w int) store.AcquireRequest {
	r.Weight = w
	return r
}

// rowMode is the mode of lock name's row: "slot", "scalar", "slow" or
// "none", and the holder rows of the lock.
func rowMode(t *testing.T, e *env, name string) (mode string, rows int) {
	t.Helper()
	q := pgx.Identifier{e.schema}.Sanitize()
	err := e.pool.QueryRow(context.Background(), "SELECT coalesce((SELECT CASE WHEN NOT l.fast THEN 'slow' "+
		"WHEN l.xref IS NOT NULL THEN 'slot' ELSE 'scalar' END FROM "+q+".locks l WHERE l.name = $1), 'none'), "+
		"(SELECT count(*)::int FROM "+q+".holders h WHERE h.lock = $1)", name).Scan(&mode, &rows)
	must(t, err)
	return mode, rows
}

// TestWeightedOnSlotRow: a weighted try of a lock whose row is in slot
// mode takes the row out of it (its holders to holder rows) and holds its
// weight in its own holder row; the weight-1 holders are released from
// theirs. A weighted hold released last leaves the row slow, for the next
// weighted grant; the release of a weight-1 hold makes it fast again.
func TestWeightedOnSlotRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "gpu", 4)
	var ones []store.Grant
	for _, ref := range []string{"a", "b"} {
		g, err := e.s.Acquire(ctx, req(ref, time.Minute, "gpu"))
		must(t, err)
		ones = append(ones, g)
	}
	if mode, _ := rowMode(t, e, "gpu"); mode != "slot" {
		t.Fatalf("row in %s mode, want slot", mode)
	}
	// Three slots asked, two free: refused, and the row stays as it is.
	if _, err := e.s.Acquire(ctx, weighted(req("w", time.Minute, "gpu"), 3)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("weight 3 of 2 free slots: %v, want ErrUnavailable", err)
	}
	if mode, _ := rowMode(t, e, "gpu"); mode != "slot" {
		t.Fatalf("after a refused weighted try: row in %s mode, want slot", mode)
	}
	g, err := e.s.Acquire(ctx, weighted(req("w", time.Minute, "gpu"), 2))
	must(t, err)
	if g.Weight != 2 || g.Token <= ones[1].Token {
		t.Fatalf("grant %+v: want weight 2, a token after %d", g, ones[1].Token)
	}
	if mode, rows := rowMode(t, e, "gpu"); mode != "slow" || rows != 3 {
		t.Fatalf("after a weighted grant: row %s with %d holder rows, want slow with 3", mode, rows)
	}
	st, err := e.s.State(ctx, "gpu", true)
	must(t, err)
	if st.Running != 4 || st.Leases != 3 || len(st.Holders) != 3 || st.Holders[2].Weight != 2 || st.Holders[0].Weight != 1 {
		t.Fatalf("state %+v: want 4 slots in use by 3 holders, the last of weight 2", st)
	}
	if _, err := e.s.Acquire(ctx, req("c", time.Minute, "gpu")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a fifth slot: %v, want ErrUnavailable", err)
	}
	for _, o := range ones {
		must(t, e.s.Release(ctx, o.Handle(), nil))
	}
	must(t, e.s.Release(ctx, g.Handle(), nil))
	if mode, rows := rowMode(t, e, "gpu"); mode != "slow" || rows != 0 {
		t.Fatalf("the lock free after a weighted hold: row %s with %d holder rows, want slow with none", mode, rows)
	}
	g, err = e.s.Acquire(ctx, req("d", time.Minute, "gpu"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	if mode, rows := rowMode(t, e, "gpu"); mode == "slow" || rows != 0 {
		t.Fatalf("the lock free after a weight-1 hold: row %s with %d holder rows, want fast with none", mode, rows)
	}
	// Weight 1 is granted in the row again.
	g, err = e.s.Acquire(ctx, req("d", time.Minute, "gpu"))
	must(t, err)
	if mode, rows := rowMode(t, e, "gpu"); mode != "slot" || rows != 0 {
		t.Fatalf("weight 1 again: row %s with %d holder rows, want slot with none", mode, rows)
	}
	must(t, e.s.Release(ctx, g.Handle(), nil))
}

// TestWeightedOnScalarRow: the same for a row in scalar mode holding its
// one holder (a lock of several slots granted by the bare UPDATE of
// acquire_fast.sql before the store learnt its slots), and an exclusive
// hold of a lock of one slot, which is a hold of weight 1 in the row.
func TestWeightedOnScalarRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "one", 1)
	x, err := e.s.Acquire(ctx, weighted(req("x", time.Minute, "one"), store.WeightAll))
	must(t, err)
	if mode, rows := rowMode(t, e, "one"); x.Weight != 1 || mode != "scalar" || rows != 0 {
		t.Fatalf("exclusive of one slot: weight %d, row %s with %d holder rows; want 1, scalar, none", x.Weight, mode, rows)
	}
	must(t, e.s.Release(ctx, x.Handle(), nil))

	define(t, e.s, "pair", 2)
	q := pgx.Identifier{e.schema}.Sanitize()
	_, err = e.pool.Exec(ctx, "INSERT INTO "+q+".locks (name, fast, ref, kind, token, acquired, renewed, ttl, hold, op) "+
		"VALUES ('pair', true, 'a', '', nextval('"+q+".tokens'), clock_timestamp(), clock_timestamp(), 0, 0, 1)")
	must(t, err)
	if mode, _ := rowMode(t, e, "pair"); mode != "scalar" {
		t.Fatalf("row in %s mode, want scalar", mode)
	}
	// Two slots asked, one free: refused without a write.
	if _, err := e.s.Acquire(ctx, weighted(req("w", time.Minute, "pair"), 2)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("weight 2 of 1 free slot: %v, want ErrUnavailable", err)
	}
	must(t, e.s.Release(ctx, store.Handle{Lock: store.Lock{Name: "pair"}, Ref: store.RefOf("a")}, nil))
	g, err := e.s.Acquire(ctx, weighted(req("w", time.Minute, "pair"), store.WeightAll))
	must(t, err)
	if mode, rows := rowMode(t, e, "pair"); g.Weight != 2 || mode != "slow" || rows != 1 {
		t.Fatalf("exclusive of two slots: weight %d, row %s with %d holder rows; want 2, slow, 1", g.Weight, mode, rows)
	}
	// A waiter of weight 1 behind it is handed the lock by its release.
	done := make(chan error, 1)
	go func() {
		r := req("o", time.Minute, "pair")
		r.Wait = true
		o, err := e.s.Acquire(ctx, r)
		if err == nil {
			err = e.s.Release(ctx, o.Handle(), nil)
		}
		done <- err
	}()
	waiting(t, e.s, "pair", 1)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	must(t, <-done)
}

// TestWeightedOneRoundTrip: a weighted TryAcquire, its refusal and its
// Release are one statement each, as a weight-1 one.
func TestWeightedOneRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "gpu", 4)
	for i := range 3 {
		e.trace.n.Store(0)
		g, err := e.s.Acquire(ctx, weighted(req("w", time.Minute, "gpu"), 3))
		must(t, err)
		if n := e.trace.n.Load(); n != 1 {
			t.Fatalf("run %d: a weighted grant took %d statements, want 1", i+1, n)
		}
		e.trace.n.Store(0)
		if _, err := e.s.Acquire(ctx, weighted(req("v", time.Minute, "gpu"), 2)); !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
		if n := e.trace.n.Load(); n != 1 {
			t.Fatalf("run %d: a weighted refusal took %d statements, want 1", i+1, n)
		}
		e.trace.n.Store(0)
		must(t, e.s.Release(ctx, g.Handle(), nil))
		if n := e.trace.n.Load(); n != 1 {
			t.Fatalf("run %d: a weighted release took %d statements, want 1", i+1, n)
		}
	}
}
