package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

// TestOneRoundTripPerOperation counts the statements each operation sends.
func TestOneRoundTripPerOperation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "slots", 3)
	define(t, e.s, "chat/*", 1)
	define(t, e.s, "user/*", 1)
	// f's statements, twice (the first run may also prepare them). With
	// learn, the store's hint about the lock is stale on the first run
	// (it saw the lock fast, and it has become slow): that run may take
	// one statement more, the next must not.
	counts := func(what string, learn bool, f func()) {
		t.Helper()
		for i := range 2 {
			e.trace.n.Store(0)
			f()
			want := int64(1)
			if learn && i == 0 {
				want = 2
			}
			if n := e.trace.n.Load(); n != want {
				t.Fatalf("%s, run %d: %d statements, want %d", what, i+1, n, want)
			}
		}
	}
	count := func(what string, f func()) {
		t.Helper()
		counts(what, false, f)
	}
	var g store.Grant
	count("TryAcquire of a 3-slot lock", func() {
		var err error
		g, err = e.s.Acquire(ctx, req("r", time.Minute, "slots"))
		must(t, err)
		must(t, e.s.Release(ctx, g.Handle(), nil))
		e.trace.n.Add(-1) // the release is counted below
	})
	// The second and third slots, while the ones below are held, and the
	// refusal when all are.
	g, err := e.s.Acquire(ctx, req("r", time.Minute, "slots"))
	must(t, err)
	last := g.Token
	for _, ref := range []string{"s2", "s3"} {
		// Every slot is granted by one UPDATE of the lock's row (its slot
		// arrays).
		counts("TryAcquire of another slot of a 3-slot lock", false, func() {
			o, err := e.s.Acquire(ctx, req(ref, time.Minute, "slots"))
			must(t, err)
			if o.Token <= last || o.Reentered {
				t.Fatalf("%s: token %d after %d, reentered %v", ref, o.Token, last, o.Reentered)
			}
			last = o.Token
			must(t, e.s.Release(ctx, o.Handle(), nil))
			e.trace.n.Add(-1)
		})
		_, err := e.s.Acquire(ctx, req(ref, time.Minute, "slots"))
		must(t, err)
	}
	// The store saw the lock fast, with a free slot, before s4.
	counts("refused TryAcquire of a full 3-slot lock", true, func() {
		if _, err := e.s.Acquire(ctx, req("s4", time.Minute, "slots")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
	})
	count("Keep", func() { _, err := e.s.Keep(ctx, g.Handle(), time.Minute, 0); must(t, err) })
	count("Held", func() { st, err := e.s.Held(ctx, g.Handle()); must(t, err); _ = st })
	count("State", func() { _, err := e.s.State(ctx, "slots", true); must(t, err) })
	count("Release", func() {
		must(t, e.s.Release(ctx, g.Handle(), nil))
		g, err = e.s.Acquire(ctx, req("r", time.Minute, "slots"))
		must(t, err)
		e.trace.n.Add(-1)
	})
	count("AcquireAll of 2 locks", func() {
		g, err := e.s.Acquire(ctx, req("turn", time.Minute, "chat/42", "user/7"))
		must(t, err)
		e.trace.n.Add(-1)
		must(t, e.s.Release(ctx, g.Handle(), nil))
	})
	other, err := e.s.Acquire(ctx, req("turn", time.Minute, "chat/42", "user/7"))
	must(t, err)
	count("refused AcquireAll of 2 locks", func() {
		_, err := e.s.Acquire(ctx, req("turn2", time.Minute, "chat/42", "user/7"))
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
	})
	// A turn's acquisition (re-entry only as a whole): granted, re-entered
	// and refused for a ref holding only one of the locks, one statement
	// each.
	whole := func(ref string, names ...string) store.AcquireRequest {
		r := req(ref, time.Minute, names...)
		r.ReenterAll = true
		return r
	}
	count("AcquireAll of 2 locks, re-entry as a whole", func() {
		g, err := e.s.Acquire(ctx, whole("turn3", "chat/43", "user/8"))
		must(t, err)
		e.trace.n.Add(-1)
		must(t, e.s.Release(ctx, g.Handle(), nil))
	})
	turn, err := e.s.Acquire(ctx, whole("turn3", "chat/43", "user/8"))
	must(t, err)
	count("re-entered AcquireAll of 2 locks", func() {
		g, err := e.s.Acquire(ctx, whole("turn3", "chat/43", "user/8"))
		if err != nil || !g.Reentered || g.Token != turn.Token {
			t.Fatalf("re-entry: %+v %v", g, err)
		}
	})
	count("AcquireAll of 2 locks by a ref holding one of them", func() {
		_, err := e.s.Acquire(ctx, whole("turn3", "chat/44", "user/8"))
		var busy *store.BusyError
		if !errors.As(err, &busy) || busy.Lock != "user/8" {
			t.Fatalf("a ref holding only user/8: %v", err)
		}
	})
	count("ReleaseStale", func() {
		ok, err := e.s.ReleaseStale(ctx, other.Handle(), time.Hour, nil)
		must(t, err)
		if ok {
			t.Fatal("a fresh lease released as stale")
		}
	})
}

// TestRefusedTryWritesNothing checks that a refused try takes no
// transaction id and writes no WAL, so it never waits for an fsync nor for
// the holder's row lock: of weight 1, and weighted (on a lock whose row is
// in slot mode, which a refusal leaves as it is, and on one with a weighted
// holder in its holder rows).
func TestRefusedTryWritesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "hot", 1)
	define(t, e.s, "chat/*", 1)
	g, err := e.s.Acquire(ctx, req("holder", time.Minute, "hot"))
	must(t, err)
	_, err = e.s.Acquire(ctx, req("holder", time.Minute, "chat/1"))
	must(t, err)
	// and a lock of two slots, both held in its row's slots
	define(t, e.s, "hot2", 2)
	for _, ref := range []string{"x", "y"} {
		_, err = e.s.Acquire(ctx, req(ref, time.Minute, "hot2"))
		must(t, err)
	}
	// a lock of four slots, three held in its row's slots (one free), and
	// one of four with a holder of weight 3 (in a holder row)
	define(t, e.s, "hot4", 4)
	for _, ref := range []string{"x", "y", "z"} {
		_, err = e.s.Acquire(ctx, req(ref, time.Minute, "hot4"))
		must(t, err)
	}
	define(t, e.s, "heavy", 4)
	h3 := req("h", time.Minute, "heavy")
	h3.Weight = 3
	_, err = e.s.Acquire(ctx, h3)
	must(t, err)

	// No transaction id: run the statement in a transaction and ask.
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	// A row lock held on the holder's row by another transaction: a refusal
	// must not wait for it.
	lockTx, err := e.pool.Begin(ctx)
	must(t, err)
	defer lockTx.Rollback(ctx)
	q := pgx.Identifier{e.schema}.Sanitize()
	_, err = lockTx.Exec(ctx, "SELECT 1 FROM "+q+".holders WHERE lock = 'hot' FOR UPDATE")
	must(t, err)
	// and on the lock's row, which the hot statement tries to insert
	_, err = lockTx.Exec(ctx, "SELECT 1 FROM "+q+".locks WHERE name IN ('hot', 'hot2', 'hot4', 'heavy') FOR UPDATE")
	must(t, err)
	_, err = lockTx.Exec(ctx, "SELECT 1 FROM "+q+".holders WHERE lock = 'heavy' FOR UPDATE")
	must(t, err)
	for _, call := range []string{
		"acquire('{hot}', 'other', '', 60000000, 0, false, false, 1, 0, 10000000, 0, 0, false, '{1}', false)",
		"acquire_one('hot', 'other', '', 60000000, 0, false, false, 1, 10000000, '{hot}', 60000000, 0, 0, 1, false)",
		"acquire_one('hot2', 'other', '', 60000000, 0, false, false, 1, 10000000, '{hot2}', 60000000, 0, 0, 1, false)",
		"acquire_one('hot2', 'other', '', 60000000, 0, false, false, 1, 10000000, '{hot2}', 60000000, 0, 0, 2, false)",
		"acquire_one('hot4', 'other', '', 60000000, 0, false, false, 1, 10000000, '{hot4}', 60000000, 0, 0, 2, false)",
		"acquire_one('heavy', 'other', '', 60000000, 0, false, false, 1, 10000000, '{heavy}', 60000000, 0, 0, 2, false)",
		"acquire('{heavy}', 'other', '', 60000000, 0, false, false, 1, 0, 10000000, 0, 0, false, '{-1}', false)",
	} {
		var ev string
		must(t, tx.QueryRow(ctx, "SELECT r_ev FROM "+q+"."+call).Scan(&ev))
		var xid *int64
		must(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id_if_assigned()::text::bigint").Scan(&xid))
		if ev != "refused" || xid != nil {
			t.Fatalf("refused try (%s): %s, transaction id assigned: %v (want none)", call, ev, xid != nil)
		}
	}
	must(t, tx.Rollback(ctx))
	must(t, lockTx.Rollback(ctx))

	// No WAL: the insert position does not move over a refused try and a
	// refused AcquireAll. Other sessions of the server (other test packages
	// run at the same time) may write meanwhile; that only adds, so take the
	// least of many short measurements: a refusal that wrote would write
	// every time.
	least := int64(-1)
	for range 500 {
		var diff int64
		var lsn string
		must(t, e.pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn))
		if _, err := e.s.Acquire(ctx, req("other", time.Minute, "hot")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
		if _, err := e.s.Acquire(ctx, req("other", time.Minute, "chat/1", "hot")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
		if _, err := e.s.Acquire(ctx, req("other", time.Minute, "hot2")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
		for _, r := range []store.AcquireRequest{weighted(req("other", time.Minute, "hot4"), 2),
			weighted(req("other", time.Minute, "heavy"), 2), weighted(req("other", time.Minute, "heavy", "hot4"), 2)} {
			if _, err := e.s.Acquire(ctx, r); !errors.Is(err, store.ErrUnavailable) {
				t.Fatal(err)
			}
		}
		must(t, e.pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint", lsn).Scan(&diff))
		if least < 0 || diff < least {
			least = diff
		}
		if least == 0 {
			break
		}
	}
	if least != 0 {
		t.Fatalf("refused tries wrote %d bytes of WAL", least)
	}
	must(t, e.s.Release(ctx, g.Handle(), nil))
}

// TestTryRefusedOnTheRow: a try of a lock whose fast row holds another
// ref's unexpired hold is refused by the statement around acquire_one()
// on the row and the definition alone, with the holder and the free
// slots, and changes nothing; every try that row cannot refuse goes on to
// acquire_one() in the same statement: one that fits beside the holder (a
// lock of 4 slots, a holder of weight 3), one too heavy for the lock, the
// holder's own re-entry, and a try after the holder expired. Each starts
// from a row in scalar mode (a re-entry or a grant beside the holder
// spills it).
func TestTryRefusedOnTheRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	s, tr := tracedStore(t, e)
	held := func(name string) store.Grant {
		define(t, e.s, name, 4)
		h, err := e.s.Acquire(ctx, weighted(req("h", time.Minute, name), 3))
		must(t, err)
		if mode, rows := rowMode(t, e, name); mode != "scalar" || rows != 0 {
			t.Fatalf("%s: row %s with %d holder rows; want scalar, none", name, mode, rows)
		}
		return h
	}

	h := held("refused")
	tr.sent()
	_, err := s.Acquire(ctx, weighted(req("x", time.Minute, "refused"), 2))
	var busy *store.BusyError
	if !errors.As(err, &busy) || busy.Ref != "h" || busy.Weight != 2 || busy.Free != 1 || busy.Slots != 4 ||
		!busy.Expires.Equal(h.Expires) {
		t.Fatalf("a try of 2 beside a holder of 3 of 4: %v (%+v), want busy: h holds, 1 free of 4", err, busy)
	}
	wantSent(t, tr, "a refused try", "acquire_one")
	if mode, rows := rowMode(t, e, "refused"); mode != "scalar" || rows != 0 {
		t.Fatalf("after a refusal: row %s with %d holder rows; want it unchanged", mode, rows)
	}
	one, err := s.Acquire(ctx, req("y", time.Minute, "refused"))
	must(t, err)
	wantState(t, e.s, "refused", 4, 0)
	must(t, s.Release(ctx, one.Handle(), nil))

	held("heavy")
	_, err = s.Acquire(ctx, weighted(req("x", time.Minute, "heavy"), 5))
	var tooHeavy *store.WeightError
	if !errors.As(err, &tooHeavy) {
		t.Fatalf("a try of 5 of 4 slots: %v, want a *WeightError", err)
	}

	h = held("again")
	re, err := s.Acquire(ctx, weighted(req("h", time.Minute, "again"), 3))
	must(t, err)
	if !re.Reentered || re.Token != h.Token {
		t.Fatalf("the holder's own try: %+v, want its hold re-entered", re)
	}

	h = held("expired")
	_, err = e.pool.Exec(ctx, "UPDATE "+q+".locks SET expires = clock_timestamp() - interval '1 second' "+
		"WHERE name = 'expired'")
	must(t, err)
	g, err := s.Acquire(ctx, weighted(req("x", time.Minute, "expired"), 4))
	must(t, err)
	if g.Token <= h.Token {
		t.Fatalf("a try after the holder expired: token %d, want one above %d", g.Token, h.Token)
	}
}
