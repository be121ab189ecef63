package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

// TestHoldDatedBackOnDatabaseClock: a hold shorter than the TTL expires
// after the hold; its renewal time is dated back by TTL-hold.
func TestHoldDatedBackOnDatabaseClock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "user/*", 1)
	r := req("click", 10*time.Minute, "user/1")
	r.Hold, r.Kind = 30*time.Second, "click"
	g, err := e.s.Acquire(ctx, r)
	must(t, err)
	st, err := e.s.Held(ctx, g.Handle())
	must(t, err)
	if d := st.Expires.Sub(st.Renewed); d != 10*time.Minute {
		t.Fatalf("expires - renewed = %v, want the TTL", d)
	}
	if d := g.Expires.Sub(g.Acquired); d != 30*time.Second {
		t.Fatalf("expires - acquired = %v, want the hold", d)
	}
	must(t, e.s.Advance(ctx, 29*time.Second))
	_, err = e.s.Acquire(ctx, req("turn", 10*time.Minute, "user/1"))
	var busy *store.BusyError
	if !errors.As(err, &busy) || busy.Kind != "click" {
		t.Fatalf("turn during a click: %v", err)
	}
	// Keeping the click dates it again.
	_, err = e.s.Keep(ctx, g.Handle(), 10*time.Minute, 30*time.Second)
	must(t, err)
	must(t, e.s.Advance(ctx, 29*time.Second))
	if _, err := e.s.Acquire(ctx, req("turn", 10*time.Minute, "user/1")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("turn during a kept click: %v", err)
	}
	must(t, e.s.Advance(ctx, 2*time.Second))
	_, err = e.s.Acquire(ctx, req("turn", 10*time.Minute, "user/1"))
	must(t, err)
}

// TestFamilyMembersLeaveNoRows: a family member has rows only while used,
// and a minute after: its lock's row stays free for the next grant
// until the sweep finds it free for a minute.
func TestFamilyMembersLeaveNoRows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "chat/*", 1)
	define(t, e.s, "chat/vip/*", 3)
	for _, name := range []string{"chat/1", "chat/vip/2", "chat/a/b"} {
		g, err := e.s.Acquire(ctx, req("r", time.Minute, name))
		must(t, err)
		must(t, e.s.Release(ctx, g.Handle(), nil))
	}
	q := pgx.Identifier{e.schema}.Sanitize()
	count := func(sql string) int {
		var n int
		must(t, e.pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	if n := count("SELECT count(*) FROM " + q + ".holders"); n != 0 {
		t.Fatalf("%d holder rows left by idle family members", n)
	}
	// (a row in slot mode, has ref '' and its slots in xref)
	if n := count("SELECT count(*) FROM " + q + ".locks WHERE NOT fast OR (ref IS NOT NULL AND xref IS NULL) " +
		"OR cardinality(array_remove(xref, NULL)) > 0"); n != 0 {
		t.Fatalf("%d lock rows in use left by idle family members", n)
	}
	sweep := func() int {
		var n int64
		must(t, e.pool.QueryRow(ctx, "SELECT "+q+".sweep(64)").Scan(&n))
		return int(n)
	}
	if n := sweep(); n != 0 {
		t.Fatalf("the sweep deleted %d rows freed just now", n)
	}
	must(t, e.s.Advance(ctx, 2*time.Minute))
	if n := sweep(); n != 3 {
		t.Fatalf("the sweep deleted %d rows free for two minutes, want 3", n)
	}
	if n := count("SELECT (SELECT count(*) FROM " + q + ".locks) + (SELECT count(*) FROM " + q + ".holders)"); n != 0 {
		t.Fatalf("%d rows left after the sweep", n)
	}
	st, err := e.s.State(ctx, "chat/vip/9", false)
	must(t, err)
	if st.Slots != 3 {
		t.Fatalf("most specific family: %+v", st)
	}
}

// TestCountedReentrancy: a counted re-entrant acquire keeps the token and
// takes one release more; the row's count is what State reports.
func TestCountedReentrancy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "re", 1)
	g, err := e.s.Acquire(ctx, req("r", time.Minute, "re"))
	must(t, err)
	r := req("r", time.Minute, "re")
	r.Counted = true
	g2, err := e.s.Acquire(ctx, r)
	must(t, err)
	if !g2.Reentered || g2.Token != g.Token {
		t.Fatalf("re-entrant grant %+v", g2)
	}
	st, err := e.s.State(ctx, "re", true)
	must(t, err)
	if len(st.Holders) != 1 || st.Holders[0].Count != 2 || st.Holders[0].Token != g.Token {
		t.Fatalf("holders %+v", st.Holders)
	}
	must(t, e.s.Release(ctx, g.Handle(), nil))
	wantState(t, e.s, "re", 1, 0)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	wantState(t, e.s, "re", 0, 0)
}

// TestQueueDetail: State reports a multi-lock waiter with all its locks.
func TestQueueDetail(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "a", 1)
	define(t, e.s, "b", 1)
	h, err := e.s.Acquire(ctx, req("h", time.Minute, "a"))
	must(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "b", "a")
		r.Wait, r.Kind = true, "turn"
		g, err := e.s.Acquire(wctx, r)
		if err == nil {
			err = e.s.Release(ctx, g.Handle(), nil)
		}
		done <- err
	}()
	waiting(t, e.s, "a", 1)
	st, err := e.s.State(ctx, "b", true)
	must(t, err)
	if st.Waiting != 1 || len(st.Queue) != 1 || st.Queue[0].Ref != "w" || st.Queue[0].Kind != "turn" ||
		len(st.Queue[0].Locks) != 2 || st.Queue[0].Locks[0] != "b" || st.Queue[0].Since.IsZero() {
		t.Fatalf("state of b: %+v", st)
	}
	must(t, e.s.Release(ctx, h.Handle(), nil))
	must(t, <-done)
}

// TestFirstHolderInLockRow: the first holder of a free lock is kept in the
// lock's row: no holder row is written, State and Held see
// it, a try is refused on it, and its release leaves the row free for the
// next grant. The holders of a lock of several slots are kept in the
// slots of its row, until something else (a queue) moves
// them to holder rows; the lock is fast again once nothing holds it.
func TestFirstHolderInLockRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "one", 1)
	define(t, e.s, "two", 2)
	row := func(name string) (fast bool, ref string, holders int) {
		t.Helper()
		var r *string
		must(t, e.pool.QueryRow(ctx, "SELECT l.fast, l.ref, (SELECT count(*) FROM "+q+".holders h WHERE h.lock = l.name) "+
			"FROM "+q+".locks l WHERE l.name = $1", name).Scan(&fast, &r, &holders))
		if r != nil {
			ref = *r
		}
		return fast, ref, holders
	}
	want := func(name string, fast bool, ref string, holders int) {
		t.Helper()
		if f, r, h := row(name); f != fast || r != ref || h != holders {
			t.Fatalf("%s: fast %v, ref %q, %d holder rows; want %v, %q, %d", name, f, r, h, fast, ref, holders)
		}
	}
	for i := range 3 {
		g, err := e.s.Acquire(ctx, req("a", time.Minute, "one"))
		must(t, err)
		want("one", true, "a", 0)
		wantState(t, e.s, "one", 1, 0)
		st, err := e.s.Held(ctx, g.Handle())
		must(t, err)
		if !st.Held {
			t.Fatalf("round %d: Held of a holder in its lock's row: %+v", i, st)
		}
		_, err = e.s.Keep(ctx, g.Handle(), 2*time.Minute, 0)
		must(t, err)
		if _, err := e.s.Acquire(ctx, req("b", time.Minute, "one")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("round %d: a second holder of a one-slot lock: %v", i, err)
		}
		must(t, e.s.Release(ctx, g.Handle(), nil))
		want("one", true, "", 0)
		wantState(t, e.s, "one", 0, 0)
	}

	// A lock of two slots: its row in slot mode, one
	// element per slot, no holder row.
	slots := func(name string) string {
		t.Helper()
		var x string
		must(t, e.pool.QueryRow(ctx, "SELECT coalesce(array_to_string(l.xref, ',', '-'), 'none') FROM "+q+".locks l "+
			"WHERE l.name = $1", name).Scan(&x))
		return x
	}
	wantSlots := func(name, want string, holders int) {
		t.Helper()
		want2 := func(f bool, r string, h int) bool { return f && r == "" && h == holders }
		if f, r, h := row(name); !want2(f, r, h) || slots(name) != want {
			t.Fatalf("%s: fast %v, ref %q, %d holder rows, slots %s; want fast, '', %d, %s", name, f, r, h, slots(name),
				holders, want)
		}
	}
	a, err := e.s.Acquire(ctx, req("a", time.Minute, "two"))
	must(t, err)
	wantSlots("two", "a,-", 0)
	b, err := e.s.Acquire(ctx, req("b", time.Minute, "two"))
	must(t, err)
	wantSlots("two", "a,b", 0)
	wantState(t, e.s, "two", 2, 0)
	// The row's ref ('' in slot mode) is no holder: not a handle's with no ref.
	if st, err := e.s.Held(ctx, store.Handle{Lock: store.Lock{Name: "two"}}); err != nil || st.Held {
		t.Fatalf("Held of a handle with no ref: %+v %v", st, err)
	}
	if b.Token <= a.Token {
		t.Fatalf("tokens %d then %d", a.Token, b.Token)
	}
	if _, err := e.s.Acquire(ctx, req("x", time.Minute, "two")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a third holder of a two-slot lock: %v", err)
	}
	st, err := e.s.Held(ctx, a.Handle())
	must(t, err)
	if !st.Held {
		t.Fatal("Held of a holder in a slot of its lock's row")
	}
	_, err = e.s.Keep(ctx, a.Handle(), 2*time.Minute, 0)
	must(t, err)
	must(t, e.s.Release(ctx, a.Handle(), nil))
	wantSlots("two", "-,b", 0)
	c, err := e.s.Acquire(ctx, req("c", time.Minute, "two"))
	must(t, err)
	wantSlots("two", "c,b", 0)
	if c.Token <= b.Token {
		t.Fatalf("tokens %d then %d", b.Token, c.Token)
	}
	must(t, e.s.Release(ctx, b.Handle(), nil))
	must(t, e.s.Release(ctx, c.Handle(), nil))
	wantSlots("two", "-,-", 0)
	wantState(t, e.s, "two", 0, 0)
	// Anything else moves the slots to holder rows, slot i to slot i: a
	// caller queueing, here.
	a, err = e.s.Acquire(ctx, req("a", time.Minute, "two"))
	must(t, err)
	b, err = e.s.Acquire(ctx, req("b", time.Minute, "two"))
	must(t, err)
	must(t, e.s.Release(ctx, a.Handle(), nil))
	a, err = e.s.Acquire(ctx, req("a", time.Minute, "two"))
	must(t, err)
	done := make(chan error, 1)
	node := e.node(t)
	go func() {
		r := req("w", time.Minute, "two")
		r.Wait = true
		g, err := node.Acquire(ctx, r)
		if err == nil {
			err = e.s.Release(ctx, g.Handle(), nil)
		}
		done <- err
	}()
	waiting(t, e.s, "two", 1)
	if f, _, h := row("two"); f || h != 2 || slots("two") != "none" {
		t.Fatalf("two with a waiter: fast %v, %d holder rows, slots %s", f, h, slots("two"))
	}
	var order string
	must(t, e.pool.QueryRow(ctx, "SELECT string_agg(ref || slot, ',' ORDER BY slot) FROM "+q+".holders WHERE lock = 'two'").Scan(&order))
	if order != "a1,b2" {
		t.Fatalf("holder rows %s, want a1,b2", order)
	}
	st, err = e.s.Held(ctx, b.Handle())
	must(t, err)
	if !st.Held {
		t.Fatal("the holder of slot 2 lost its hold when it moved to a holder row")
	}
	must(t, e.s.Release(ctx, a.Handle(), nil))
	must(t, <-done)
	must(t, e.s.Release(ctx, b.Handle(), nil))
	want("two", true, "", 0)
}
