package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// waitFor polls cond until it holds (a state reached, never time passed);
// it fails after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for d := 100 * time.Microsecond; ; d = min(d*2, 10*time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(d)
	}
}

func wantState(t *testing.T, s store.Store, name string, running, waiting int) {
	t.Helper()
	st, err := s.State(context.Background(), name, false)
	must(t, err)
	if st.Running != running || st.Waiting != waiting {
		t.Fatalf("%s: running %d waiting %d, want %d %d", name, st.Running, st.Waiting, running, waiting)
	}
}

func waiting(t *testing.T, s store.Store, name string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d waiting on %s", n, name), func() bool {
		st, err := s.State(context.Background(), name, false)
		return err == nil && st.Waiting == n
	})
}

// TestNodesConcurrentTurnsOneWins: turns of the same chat started at once on
// two nodes: exactly one gets the chat and its user.
func TestNodesConcurrentTurnsOneWins(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := []*pgstore.Store{e.s, e.node(t)}
	define(t, e.s, "chat/*", 1)
	define(t, e.s, "user/*", 1)
	for round := range 10 {
		chat := fmt.Sprintf("chat/%d", round)
		var wins atomic.Int32
		var mu sync.Mutex
		var winner store.Grant
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := req(fmt.Sprintf("turn-%d-%d", round, i), time.Minute, chat, "user/7")
				r.Kind = "turn"
				g, err := nodes[i%2].Acquire(ctx, r)
				var busy *store.BusyError
				switch {
				case err == nil:
					wins.Add(1)
					mu.Lock()
					winner = g
					mu.Unlock()
				case errors.As(err, &busy):
					if busy.Kind != "turn" && !busy.Queued {
						errs <- fmt.Errorf("refusal names kind %q", busy.Kind)
					}
				default:
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d turns won, want 1", round, wins.Load())
		}
		wantState(t, e.s, chat, 1, 0)
		wantState(t, e.s, "user/7", 1, 0)
		must(t, nodes[round%2].Release(ctx, winner.Handle(), nil))
	}
}

// TestNodesDeadNodeTakenOverAfterTTL: a node dies mid-turn; its lease is
// taken over only once its TTL has passed on the database clock, and its
// late release frees nothing.
func TestNodesDeadNodeTakenOverAfterTTL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "chat/*", 1)
	dead := e.node(t)
	r := req("turn-dead", 10*time.Minute, "chat/1")
	r.Kind = "turn"
	old, err := dead.Acquire(ctx, r)
	must(t, err)
	must(t, dead.Close()) // the node is gone; its lease stays

	_, err = e.s.Acquire(ctx, req("turn-new", 10*time.Minute, "chat/1"))
	var busy *store.BusyError
	if !errors.As(err, &busy) || busy.Kind != "turn" || busy.Ref != "turn-dead" {
		t.Fatalf("before the TTL: %v", err)
	}
	must(t, e.s.Advance(ctx, 9*time.Minute+59*time.Second))
	if _, err := e.s.Acquire(ctx, req("turn-new", 10*time.Minute, "chat/1")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("taken over before the TTL: %v", err)
	}
	must(t, e.s.Advance(ctx, 2*time.Second))
	rec := newRecorder()
	nr := req("turn-new", 10*time.Minute, "chat/1")
	nr.Events = rec
	g, err := e.s.Acquire(ctx, nr)
	must(t, err)
	if g.Token <= old.Token {
		t.Fatalf("token %d after %d", g.Token, old.Token)
	}
	evs := rec.drain()
	if len(evs) != 2 || evs[0].Type != store.EventExpired || evs[0].Ref != "turn-dead" || evs[0].Token != old.Token ||
		evs[0].Held < 10*time.Minute || evs[1].Type != store.EventAcquired || evs[1].Running != 1 {
		t.Fatalf("events %+v", evs)
	}
	// The dead node comes back and releases late: nothing is freed.
	late := e.node(t)
	if err := late.Release(ctx, old.Handle(), nil); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("late release: %v", err)
	}
	if _, err := late.Keep(ctx, old.Handle(), time.Minute, 0); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("late keep: %v", err)
	}
	// Even naming the same ref without a token: the new holder has another ref.
	if err := late.Release(ctx, store.Handle{Lock: store.Lock{Name: "chat/1"}, Ref: store.RefOf("turn-dead")}, nil); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("late release by ref: %v", err)
	}
	st, err := e.s.Held(ctx, g.Handle())
	must(t, err)
	if !st.Held {
		t.Fatal("the new holder lost its lease to a late release")
	}
}

// TestNodesReleaseStaleRace: callers on two nodes race to clean up a stale
// turn; exactly one gets true, and only once it is stale.
func TestNodesReleaseStaleRace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "chat/*", 1)
	define(t, e.s, "user/*", 1)
	other := e.node(t)
	g, err := e.s.Acquire(ctx, req("turn", 10*time.Minute, "chat/9", "user/9"))
	must(t, err)
	h := g.Handle()
	if ok, err := other.ReleaseStale(ctx, h, 10*time.Minute, nil); err != nil || ok {
		t.Fatalf("fresh turn released as stale: %v %v", ok, err)
	}
	must(t, e.s.Advance(ctx, 11*time.Minute))
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := []*pgstore.Store{e.s, other}[i%2]
			ok, err := s.ReleaseStale(ctx, h, 10*time.Minute, nil)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d callers released the stale turn, want 1", wins.Load())
	}
	wantState(t, e.s, "chat/9", 0, 0)
	wantState(t, e.s, "user/9", 0, 0)
}

// TestNodesFIFOAcrossNodes: waiters on two nodes are granted in the order
// they queued, and a try never jumps the queue.
func TestNodesFIFOAcrossNodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.node(t)
	define(t, e.s, "q", 1)
	h, err := e.s.Acquire(ctx, req("h", time.Minute, "q"))
	must(t, err)
	type res struct {
		id  string
		g   store.Grant
		err error
	}
	ch := make(chan res, 2)
	start := func(s store.Store, id string) {
		r := req(id, time.Minute, "q")
		r.Wait = true
		go func() {
			g, err := s.Acquire(ctx, r)
			ch <- res{id, g, err}
		}()
	}
	start(b, "w1")
	waiting(t, e.s, "q", 1)
	start(e.s, "w2")
	waiting(t, e.s, "q", 2)
	must(t, e.s.Release(ctx, h.Handle(), nil))
	// The slot is free, but two wait: a try is refused.
	if _, err := e.s.Acquire(ctx, req("try", time.Minute, "q")); err != nil && !errors.Is(err, store.ErrUnavailable) {
		t.Fatal(err)
	} else if err == nil {
		t.Fatal("a try jumped the queue")
	}
	first := <-ch
	must(t, first.err)
	if first.id != "w1" {
		t.Fatalf("%s granted first, want w1", first.id)
	}
	wantState(t, e.s, "q", 1, 1)
	must(t, b.Release(ctx, first.g.Handle(), nil))
	second := <-ch
	must(t, second.err)
	if second.id != "w2" {
		t.Fatalf("%s granted second", second.id)
	}
	must(t, e.s.Release(ctx, second.g.Handle(), nil))
	wantState(t, e.s, "q", 0, 0)
}

// TestWaiterCancelLeavesQueue: a waiter whose context ends leaves the queue
// at once and returns the context's error.
func TestWaiterCancelLeavesQueue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "c", 1)
	h, err := e.s.Acquire(ctx, req("h", time.Minute, "c"))
	must(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "c")
		r.Wait = true
		_, err := e.s.Acquire(wctx, r)
		done <- err
	}()
	waiting(t, e.s, "c", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	wantState(t, e.s, "c", 1, 0)
	must(t, e.s.Release(ctx, h.Handle(), nil))
	g, err := e.s.Acquire(ctx, req("next", time.Minute, "c"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
}

// TestNodesDeadWaiterLeavesQueue: the waiters of a node that died stop
// counting once their own lease has passed.
func TestNodesDeadWaiterLeavesQueue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "dw", 1)
	h, err := e.s.Acquire(ctx, req("h", time.Minute, "dw"))
	must(t, err)
	// A node without a LISTEN connection: closing its pool takes every
	// connection it has, its heartbeat's included.
	deadPool := newPool(t, nil)
	dead, err := pgstore.New(ctx, deadPool, pgstore.WithSchema(e.schema), pgstore.WithoutListen(),
		pgstore.WithPollInterval(5*time.Millisecond))
	must(t, err)
	t.Cleanup(func() { _ = dead.Close() })
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "dw")
		r.Wait = true
		_, err := dead.Acquire(wctx, r)
		done <- err
	}()
	waiting(t, e.s, "dw", 1)
	// The node dies: its waiter stops polling and cannot clean up.
	deadPool.Close()
	if err := <-done; err == nil {
		t.Fatal("a waiter on a closed store was granted")
	}
	wantState(t, e.s, "dw", 1, 1)
	// Its node's lease (its waiter's) runs out.
	_, err = e.pool.Exec(ctx, "UPDATE "+pgx.Identifier{e.schema}.Sanitize()+".nodes SET expires = expires - interval '1 hour'")
	must(t, err)
	wantState(t, e.s, "dw", 1, 0)
	must(t, e.s.Release(ctx, h.Handle(), nil))
	g, err := e.s.Acquire(ctx, req("next", time.Minute, "dw"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
}

// TestNodesLostDequeueGivenUp: a place in the queue that the database
// keeps for a live node, but that no call of that node waits for (its
// dequeue was lost: a grant or a leaving committed on a primary that then
// failed over to a standby it had not reached), is given up by the node's
// store, so the waiter behind it gets the lock. Without that, the place
// lives as long as the node, at the head of the queue, and the release
// hands the lock to nobody.
func TestNodesLostDequeueGivenUp(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "ghost", 1)
	h, err := e.s.Acquire(ctx, req("h", time.Minute, "ghost"))
	must(t, err)
	n := e.node(t)
	// The place of an acquisition of n's node that n does not know: what
	// the new primary kept of a waiter the old one had dequeued.
	_, err = e.pool.Exec(ctx, "SELECT * FROM "+pgx.Identifier{e.schema}.Sanitize()+`.acquire_one(p_name => 'ghost',
		p_ref => 'lost', p_kind => '', p_ttl => 60000000, p_hold => 0, p_counted => false, p_wait => true,
		p_op => 4242, p_wttl => 1000000, p_pats => ARRAY['ghost'], p_lease => 60000000, p_back => 0, p_node => $1, p_weight => 1,
		p_sample => false)`,
		n.NodeID())
	must(t, err)
	wantState(t, e.s, "ghost", 1, 1)
	// A waiter of n behind it starts n's heartbeat and listener.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "ghost")
		r.Wait = true
		g, err := n.Acquire(wctx, r)
		if err == nil {
			err = n.Release(ctx, g.Handle(), nil)
		}
		done <- err
	}()
	// The lost place is given up; the live waiter stays.
	waitFor(t, "a queue of w alone", func() bool {
		st, err := e.s.State(ctx, "ghost", true)
		return err == nil && len(st.Queue) == 1 && st.Queue[0].Ref == "w"
	})
	must(t, e.s.Release(ctx, h.Handle(), nil))
	must(t, <-done)
}

// TestNodesRenewalConfirmsHandedGrant: a grant a release handed to a
// waiter stays its node's until the node confirms it (a dead node's grant
// ends with it). The confirmation is committed with synchronous_commit off,
// so a crash or a failover can lose it; the holder's renewal confirms it
// again, so a renewed lease is not ended early when its node's row later
// runs out.
func TestNodesRenewalConfirmsHandedGrant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	schema := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "conf", 1)
	h, err := e.s.Acquire(ctx, req("h", time.Minute, "conf"))
	must(t, err)
	// A node without a LISTEN connection, whose pool the test closes.
	npool := newPool(t, nil)
	n, err := pgstore.New(ctx, npool, pgstore.WithSchema(e.schema), pgstore.WithoutListen(),
		pgstore.WithPollInterval(5*time.Millisecond))
	must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	got := make(chan store.Grant, 1)
	go func() {
		r := req("w", time.Minute, "conf")
		r.Wait = true
		g, err := n.Acquire(ctx, r)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	waiting(t, e.s, "conf", 1)
	must(t, e.s.Release(ctx, h.Handle(), nil)) // handed to w, its node's
	g := <-got
	confirmed := func() bool {
		var node *int64
		err := e.pool.QueryRow(ctx, "SELECT node FROM "+schema+".holders WHERE lock = 'conf'").Scan(&node)
		return err == nil && node == nil
	}
	waitFor(t, "the node to confirm the grant", confirmed)
	// The confirmation is lost (what a promoted standby that had not
	// received it keeps), then the holder renews its lease.
	_, err = e.pool.Exec(ctx, "UPDATE "+schema+".holders SET node = $1 WHERE lock = 'conf'", n.NodeID())
	must(t, err)
	_, err = n.Keep(ctx, g.Handle(), time.Minute, 0)
	must(t, err)
	if !confirmed() {
		t.Fatal("the renewal left the grant its node's")
	}
	// The node's row runs out (its heartbeat stopped): the renewed lease
	// still holds.
	npool.Close()
	_, err = e.pool.Exec(ctx, "UPDATE "+schema+".nodes SET expires = expires - interval '1 hour' WHERE id = $1", n.NodeID())
	must(t, err)
	if _, err := e.s.Acquire(ctx, req("other", time.Minute, "conf")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("another caller while the renewed lease holds: %v, want ErrUnavailable", err)
	}
}

// TestAcquireAllNoDeadlock: callers naming the same locks in opposite
// orders, on two nodes, never deadlock and never over-grant.
func TestAcquireAllNoDeadlock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other := e.node(t)
	define(t, e.s, "a", 1)
	define(t, e.s, "b", 1)
	var wg sync.WaitGroup
	var held atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := []*pgstore.Store{e.s, other}[i%2]
			names := []string{"a", "b"}
			if i%2 == 1 {
				names = []string{"b", "a"}
			}
			for j := range 10 {
				r := req(fmt.Sprintf("c%d-%d", i, j), time.Minute, names...)
				r.Wait = j%2 == 0
				g, err := s.Acquire(ctx, r)
				if errors.Is(err, store.ErrUnavailable) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if n := held.Add(1); n != 1 {
					t.Errorf("%d holders of a one-slot lock", n)
				}
				held.Add(-1)
				if err := s.Release(ctx, g.Handle(), nil); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	wantState(t, e.s, "a", 0, 0)
	wantState(t, e.s, "b", 0, 0)
}
