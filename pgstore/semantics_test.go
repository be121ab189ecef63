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

// TestFamilyMembersLeaveNoRows: a family member has rows only while used.
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
	var n int
	must(t, e.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+pgx.Identifier{e.schema}.Sanitize()+".locks) + (SELECT count(*) FROM "+
		pgx.Identifier{e.schema}.Sanitize()+".holders)").Scan(&n))
	if n != 0 {
		t.Fatalf("%d rows left by idle family members", n)
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
