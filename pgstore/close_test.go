package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
)

// TestCloseTakesItsWaitersOut (issue 29, A4): node 2 waits for a lock
// node 1 holds, and closes; its waiter gets ErrClosed, and once Close has
// returned its waiter is out of the queue: node 1's release frees the lock
// and its TryAcquire right after gets it. The race is repeated 100 times: before
// Close waited for acquisitions still sending their first statement, a
// waiter that queued as Close ran had its undo refused by the closed pool,
// and node 1's release handed it the slot (about 1 run in 100 failed).
func TestCloseTakesItsWaitersOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	one := sleeplock.New(e.s)
	for i := range 100 {
		name := fmt.Sprintf("cw%d", i)
		must(t, one.Define(ctx, name, 1))
		h, err := one.TryAcquire(ctx, name)
		must(t, err)
		// A store of its own pool, as Open makes: Close closes the pool.
		s2, err := pgstore.Open(ctx, dbURL(), pgstore.WithSchema(e.schema))
		must(t, err)
		two := sleeplock.New(s2)
		done := make(chan error, 1)
		go func() {
			_, err := two.Acquire(ctx, name)
			done <- err
		}()
		waiting(t, e.s, name, 1)
		must(t, two.Close())
		if err := <-done; !errors.Is(err, sleeplock.ErrClosed) {
			t.Fatalf("run %d: the closed node's waiter returned %v, want ErrClosed", i, err)
		}
		must(t, h.Release(ctx))
		g, err := one.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("run %d: TryAcquire after the closed node's waiter left: %v", i, err)
		}
		must(t, g.Release(ctx))
	}
}

// cancelAfter is a query tracer that calls cancel once a statement whose
// text contains match has ended: the caller's context ends after the
// server answered, before the store reads the answer's meaning.
type cancelAfter struct {
	match  string
	cancel context.CancelFunc
}

type matchedKey struct{}

func (c *cancelAfter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, c.match) {
		return context.WithValue(ctx, matchedKey{}, true)
	}
	return ctx
}

func (c *cancelAfter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(matchedKey{}) != nil {
		c.cancel()
	}
}

// TestCloseRemovesNodeRowOfWaiterThatNeverJoined: a waiting Acquire whose
// first statement queued it (making the store's node row) and whose
// context ended as the answer came gives its place back without ever
// joining the store's waiters, so no heartbeat starts. Close deletes the
// node's row all the same: before, the row stayed until its lease ran out
// (TestSweepRemovesDeadNodes failed so, now and then, under load).
func TestCloseRemovesNodeRowOfWaiterThatNeverJoined(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	nodes := func() int {
		var n int
		must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM "+q+".nodes").Scan(&n))
		return n
	}
	define(t, e.s, "nj", 1)
	g, err := e.s.Acquire(ctx, req("holder", time.Minute, "nj"))
	must(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr := &cancelAfter{match: q + ".acquire_one(", cancel: cancel}
	s2, err := pgstore.New(ctx, newPool(t, tr), pgstore.WithSchema(e.schema))
	must(t, err)
	r := req("w", time.Minute, "nj")
	r.Wait = true
	if _, err := s2.Acquire(wctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter whose context ended with its first answer: %v, want context.Canceled", err)
	}
	if n := nodes(); n != 1 {
		t.Fatalf("%d node rows after the waiter queued, want its store's", n)
	}
	wantState(t, e.s, "nj", 1, 0)
	must(t, s2.Close())
	if n := nodes(); n != 0 {
		t.Fatalf("%d node rows after Close, want none", n)
	}
	must(t, e.s.Release(ctx, g.Handle(), nil))
}
