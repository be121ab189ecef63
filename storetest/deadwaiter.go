package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// A slot granted to a waiter whose process died while it waited (its
// store crashed: Harness.Crash) goes back once the other nodes find that
// process dead, not at the end of the grant's TTL: the next waiter gets
// it, with a greater fencing token, and is then the only holder. The
// dead waiter never returns a lease. The grant's TTL (10 minutes) is far
// beyond the next waiter's deadline (20 s), which is far beyond a
// store's waiter TTL (about a second).
var _ = add("Waiter/GrantToDeadWaiterGoesBack", func(t *testing.T, e *env) {
	grantToDeadWaiter(t, e, "dw")
})

// The same with a waiter of two locks (AcquireAll), granted both at once.
var _ = add("Waiter/GrantToDeadWaiterOfSeveralLocksGoesBack", func(t *testing.T, e *env) {
	grantToDeadWaiter(t, e, "dm/a", "dm/b")
})

func grantToDeadWaiter(t *testing.T, e *env, names ...string) {
	if e.h.Reopen == nil || e.h.Crash == nil {
		t.Skip("the store cannot crash a node (Harness.Reopen, Harness.Crash)")
	}
	const ttl = 10 * time.Minute
	l, s := e.locks(t)
	for _, n := range names {
		define(t, l, n, 1)
	}
	a, err := l.AcquireAll(ctx(t), names, sleeplock.NoWait(), sleeplock.Ref("a"), sleeplock.TTL(ttl))
	must(t, err)
	dead := e.h.Reopen(t, s)
	lb := sleeplock.New(dead)
	chB := make(chan result, 1)
	go func() {
		x, err := lb.AcquireAll(ctx(t), names, sleeplock.Ref("b"), sleeplock.TTL(ttl))
		chB <- result{1, x, err}
	}()
	waitWaiting(t, l, names[0], 1)
	cctx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
	defer cancel()
	chC := make(chan result, 1)
	go func() {
		x, err := l.AcquireAll(cctx, names, sleeplock.Ref("c"), sleeplock.TTL(ttl))
		chC <- result{2, x, err}
	}()
	waitWaiting(t, l, names[0], 2)
	e.h.Crash(t, dead)
	if r := <-chB; r.err == nil {
		t.Fatalf("the waiter of a crashed store returned a lease (token %d)", r.lease.Token())
	}
	must(t, a.Release(ctx(t))) // to the dead waiter, at the head of the queue
	released := time.Now()
	r := <-chC
	t.Logf("the next waiter got the slot %v after the release", time.Since(released).Round(time.Millisecond))
	if r.err != nil {
		t.Fatalf("the waiter behind a dead one: %v; want the slot within about a second of the release, not at the dead waiter's TTL", r.err)
	}
	if r.lease.Token() <= a.Token() {
		t.Fatalf("token %d after %d", r.lease.Token(), a.Token())
	}
	for _, n := range names {
		st := state(t, l, n)
		if len(st.Holders) != 1 || st.Holders[0].Ref != "c" {
			t.Fatalf("holders of %s after the grant went back: %+v, want c's alone", n, st.Holders)
		}
	}
	must(t, r.lease.Release(ctx(t)))
	for _, n := range names {
		wantState(t, l, n, 0, 0)
	}
	_ = lb.Close()
}
