package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

func TestTryAcquireReleaseKeepHeld(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "payments", 2)
	rec := newRecorder()
	r := req("a", time.Minute, "payments")
	r.Kind, r.Events = "turn", rec
	g, err := e.s.Acquire(ctx, r)
	must(t, err)
	if g.Token == 0 || g.Reentered || g.Expires.IsZero() || g.Acquired.IsZero() {
		t.Fatalf("grant %+v", g)
	}
	g2, err := e.s.Acquire(ctx, req("b", time.Minute, "payments"))
	must(t, err)
	if g2.Token <= g.Token {
		t.Fatalf("tokens do not grow: %d then %d", g.Token, g2.Token)
	}
	_, err = e.s.Acquire(ctx, req("c", time.Minute, "payments"))
	var busy *store.BusyError
	if !errors.As(err, &busy) || busy.Lock != "payments" || busy.Kind != "turn" || busy.Ref != "a" || busy.Queued {
		t.Fatalf("third try: %v %+v", err, busy)
	}
	st, err := e.s.Held(ctx, g.Handle())
	must(t, err)
	if !st.Held || st.Expires.IsZero() || st.Now.IsZero() {
		t.Fatalf("held: %+v", st)
	}
	exp, err := e.s.Keep(ctx, g.Handle(), 2*time.Minute, 0)
	must(t, err)
	if !exp.After(g.Expires) {
		t.Fatalf("keep did not extend: %v -> %v", g.Expires, exp)
	}
	must(t, e.s.Release(ctx, g.Handle(), rec))
	if err := e.s.Release(ctx, g.Handle(), rec); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("second release: %v", err)
	}
	if _, err := e.s.Keep(ctx, g.Handle(), time.Minute, 0); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("keep after release: %v", err)
	}
	evs := rec.drain()
	if len(evs) != 2 || evs[0].Type != store.EventAcquired || evs[1].Type != store.EventReleased || evs[1].Running != 1 {
		t.Fatalf("events %+v", evs)
	}
	must(t, e.s.Release(ctx, g2.Handle(), nil))
	sts, err := e.s.List(ctx, true)
	must(t, err)
	if len(sts) != 1 || sts[0].Running != 0 {
		t.Fatalf("list %+v", sts)
	}
}
