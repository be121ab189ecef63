package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// TestStaleAfterTakesOverByRenewal: with StaleAfter a lease not renewed for
// that long is taken over although it has not expired, and a lease past its
// expiry but renewed more recently than StaleAfter is not.
func TestStaleAfterTakesOverByRenewal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "turn/*", 1)
	old, err := e.s.Acquire(ctx, req("old", time.Hour, "turn/1"))
	must(t, err)
	must(t, e.s.Advance(ctx, 2*time.Second)) // renewed 2s ago, expires in ~1h
	r := req("new", time.Minute, "turn/1")
	r.StaleAfter = time.Hour
	if _, err := e.s.Acquire(ctx, r); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a lease renewed 2s ago taken over with StaleAfter 1h: %v", err)
	}
	rec := newRecorder()
	r.StaleAfter, r.Events = time.Second, rec
	g, err := e.s.Acquire(ctx, r)
	must(t, err)
	evs := rec.drain()
	if len(evs) != 2 || evs[0].Type != store.EventExpired || evs[0].Ref != "old" || evs[1].Type != store.EventAcquired ||
		evs[0].Seq == 0 || evs[1].Seq <= evs[0].Seq {
		t.Fatalf("events of the takeover: %+v", evs)
	}
	if st, err := e.s.Held(ctx, old.Handle()); err != nil || st.Held {
		t.Fatalf("the stale holder still holds: %+v %v", st, err)
	}
	// Past its expiry (TTL 1s, 2s ago) but renewed within StaleAfter (1h):
	// not taken over by a request that judges by StaleAfter.
	must(t, e.s.Release(ctx, g.Handle(), nil))
	_, err = e.s.Acquire(ctx, req("short", time.Second, "turn/2"))
	must(t, err)
	must(t, e.s.Advance(ctx, 2*time.Second))
	r = req("patient", time.Minute, "turn/2")
	r.StaleAfter = time.Hour
	if _, err := e.s.Acquire(ctx, r); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("an expired lease renewed 2s ago taken over with StaleAfter 1h: %v", err)
	}
	// Without StaleAfter the expiry decides.
	_, err = e.s.Acquire(ctx, req("plain", time.Minute, "turn/2"))
	must(t, err)
}

// TestEventSeqOrdersEachLock: events of one lock from two nodes, cycling
// at once, carry distinct growing Seq numbers, and replaying them in Seq
// order gives each event's Running and Waiting from the one before.
func TestEventSeqOrdersEachLock(t *testing.T) {
	// Waiter leases of 10 s: a heartbeat late by 40 % of the default 1 s
	// (a loaded machine) would let a node's lease run out, and a grant
	// handed to its waiter then expire (an event this replay does not
	// expect: TestWaitersLiveAsTheirNode is about that).
	wttl := pgstore.WithWaiterTTL(10 * time.Second)
	e := newEnv(t, wttl)
	ctx := context.Background()
	define(t, e.s, "seq", 2)
	nodes := []*pgstore.Store{e.s, e.node(t, wttl)}
	rec := newRecorder()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := nodes[i%2]
			for j := range 20 {
				r := req(fmt.Sprintf("w%d", i), time.Minute, "seq")
				r.Wait, r.Events = true, rec
				g, err := s.Acquire(ctx, r)
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.Release(ctx, g.Handle(), rec); err != nil {
					t.Error(i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := rec.drain()
	sort.Slice(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
	running, waiting := 0, 0
	for i, ev := range evs {
		if ev.Seq == 0 || (i > 0 && ev.Seq == evs[i-1].Seq) {
			t.Fatalf("event %d (%v) has Seq %d", i, ev.Type, ev.Seq)
		}
		switch ev.Type {
		case store.EventAcquired:
			running++
			if ev.Waited > 0 {
				waiting--
			}
		case store.EventReleased:
			running--
		case store.EventWaiting:
			waiting++
		}
		if ev.Running != running || ev.Waiting != waiting {
			for _, e := range evs[:i+1] {
				t.Logf("%v seq %d ref %s tok %d run %d wait %d waited %v", e.Type, e.Seq, e.Ref, e.Token, e.Running, e.Waiting, e.Waited)
			}
			t.Fatalf("event %d (%v seq %d): running %d waiting %d, replayed %d %d", i, ev.Type, ev.Seq,
				ev.Running, ev.Waiting, running, waiting)
		}
	}
	if running != 0 || waiting != 0 || len(evs) < 160 {
		t.Fatalf("%d events end at running %d waiting %d", len(evs), running, waiting)
	}
}

// TestUnknownLockOnReleaseSide: Release, Keep, Held and ReleaseStale of a
// name no definition covers report ErrNotFound and change nothing, also
// when the handle's other locks are held.
func TestUnknownLockOnReleaseSide(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "real", 1)
	ghost := store.Handle{Lock: store.Lock{Name: "ghost"}, Ref: store.RefOf("r")}
	g, err := e.s.Acquire(ctx, req("r", time.Minute, "real"))
	must(t, err)
	mixed := g.Handle()
	mixed.More = []store.Lock{{Name: "ghost"}}
	for _, h := range []store.Handle{ghost, mixed} {
		if err := e.s.Release(ctx, h, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Release %v: %v", h, err)
		}
		if err := e.s.Release(ctx, h, newRecorder()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Release with events %v: %v", h, err)
		}
		if _, err := e.s.Keep(ctx, h, time.Minute, 0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Keep %v: %v", h, err)
		}
		if _, err := e.s.Held(ctx, h); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Held %v: %v", h, err)
		}
		if _, err := e.s.ReleaseStale(ctx, h, 0, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReleaseStale %v: %v", h, err)
		}
	}
	if st, err := e.s.Held(ctx, g.Handle()); err != nil || !st.Held {
		t.Fatalf("the real lock after calls naming a ghost: %+v %v", st, err)
	}
	// A family covers its members: not held, not "not found".
	define(t, e.s, "fam/*", 1)
	fm := store.Handle{Lock: store.Lock{Name: "fam/1"}, Ref: store.RefOf("r")}
	if err := e.s.Release(ctx, fm, nil); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("Release of a free family member: %v", err)
	}
}

// TestHeldExpiredPastExpiry: a lease past its expiry that nobody took over
// is held and marked expired; State counts it apart from Running.
func TestHeldExpiredPastExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "a", 1)
	define(t, e.s, "b", 1)
	one, err := e.s.Acquire(ctx, req("r", time.Minute, "a"))
	must(t, err)
	if _, err := e.s.Acquire(ctx, req("r2", time.Minute, "b", "a/x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AcquireAll naming a ghost: %v", err)
	}
	define(t, e.s, "c", 1)
	two, err := e.s.Acquire(ctx, req("r2", time.Minute, "b", "c"))
	must(t, err)
	for _, g := range []store.Grant{one, two} {
		if st, err := e.s.Held(ctx, g.Handle()); err != nil || !st.Held {
			t.Fatalf("fresh lease: %+v %v", st, err)
		}
	}
	must(t, e.s.Advance(ctx, 2*time.Minute))
	for _, g := range []store.Grant{one, two} {
		if st, err := e.s.Held(ctx, g.Handle()); err != nil || !st.Held || !st.Expired {
			t.Fatalf("lease past its expiry: %+v %v", st, err)
		}
	}
	if st, err := e.s.State(ctx, "a", false); err != nil || st.Running != 0 || st.Expired != 1 {
		t.Fatalf("State of a lock whose holder is past its expiry: %+v %v", st, err)
	}
	// Taken over: no longer held.
	_, err = e.s.Acquire(ctx, req("r3", time.Minute, "a"))
	must(t, err)
	if st, err := e.s.Held(ctx, one.Handle()); err != nil || st.Held {
		t.Fatalf("lease taken over: %+v %v", st, err)
	}
	if st, err := e.s.State(ctx, "a", false); err != nil || st.Running != 1 || st.Expired != 0 {
		t.Fatalf("State after the takeover: %+v %v", st, err)
	}
}

// TestCloseRemovesWaiters: closing a store while its caller waits ends the
// wait with exactly store.ErrClosed and removes the waiter from the shared
// queue, so other nodes are not refused for "others waiting".
func TestCloseRemovesWaiters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "cl", 1)
	h, err := e.s.Acquire(ctx, req("h", time.Minute, "cl"))
	must(t, err)
	node := e.node(t)
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "cl")
		r.Wait = true
		_, err := node.Acquire(ctx, r)
		done <- err
	}()
	waiting(t, e.s, "cl", 1)
	must(t, node.Close())
	if err := <-done; err != store.ErrClosed { //nolint:errorlint // exactly ErrClosed, nothing joined
		t.Fatalf("waiter of a closed store: %v", err)
	}
	var rows int
	must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{e.schema}.Sanitize()+".waiters").Scan(&rows))
	if rows != 0 {
		t.Fatalf("%d waiter rows left after Close", rows)
	}
	must(t, e.s.Release(ctx, h.Handle(), nil))
	g, err := e.s.Acquire(ctx, req("next", time.Minute, "cl"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
}

// TestZeroInputsNoPanic: every exported function and method of the
// package, given nil and zero values, returns an error matching
// store.ErrInvalid or store.ErrInvalidConfig (or nothing) and never panics.
func TestZeroInputsNoPanic(t *testing.T) {
	var nilCtx context.Context
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, store.ErrInvalidConfig) && !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want an error matching ErrInvalidConfig", what, err)
		}
	}
	ctx := context.Background()
	check("Migrate(ctx, nil)", pgstore.Migrate(ctx, nil))
	check("MigrateSQL(ctx, nil)", pgstore.MigrateSQL(ctx, nil))
	check("Migrate(nil, nil)", pgstore.Migrate(nilCtx, nil))
	_, err := pgstore.New(ctx, nil)
	check("New(ctx, nil)", err)
	_, err = pgstore.NewSQL(ctx, (*sql.DB)(nil))
	check("NewSQL(ctx, nil)", err)
	_, err = pgstore.Open(ctx, "")
	check(`Open(ctx, "")`, err)
	_, err = pgstore.Open(nilCtx, "postgres://x")
	check("Open(nil, dsn)", err)
	pool := newPool(t, nil)
	_, err = pgstore.New(nilCtx, pool)
	check("New(nil, pool)", err)
	check("Migrate with an empty schema", pgstore.Migrate(ctx, pool, pgstore.WithSchema("")))
	check("Migrate with a zero poll interval", pgstore.Migrate(ctx, pool, pgstore.WithPollInterval(0)))
	check("Migrate with a bad listen DSN", pgstore.Migrate(ctx, pool, pgstore.WithListenDSN("postgres://%zz")))
	pgstore.ConfigurePool(nil)

	// Every method of a zero Store, with zero arguments.
	for _, s := range []*pgstore.Store{nil, {}} {
		v := reflect.ValueOf(s)
		for i := range v.NumMethod() {
			m := v.Type().Method(i)
			if m.Name == "Listening" { // a test hook
				continue
			}
			args := make([]reflect.Value, m.Type.NumIn()-1)
			for j := range args {
				args[j] = reflect.Zero(m.Type.In(j + 1))
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s on a %v store with zero values panicked: %v", m.Name, s == nil, p)
					}
				}()
				out := v.Method(i).Call(args)
				if len(out) > 0 {
					if err, ok := out[len(out)-1].Interface().(error); ok && m.Name != "Close" {
						check(m.Name, err)
					}
				}
			}()
		}
	}
}

// TestKeepNotConfirmedWhenContextEnded: a renewal whose context ended while
// it was in flight is not counted as a renewal, even when the statement
// returned success — as PostgreSQL does for a cancelled wait for
// synchronous replication, which it commits only locally.
func TestKeepNotConfirmedWhenContextEnded(t *testing.T) {
	e := newEnv(t)
	define(t, e.s, "a", 1)
	g, err := e.s.Acquire(context.Background(), req("r", time.Minute, "a"))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.s.EndContextAfterQueries(cancel)
	if _, err := e.s.Keep(ctx, g.Handle(), time.Minute, 0); !errors.Is(err, pgstore.ErrUnreachable) {
		t.Fatalf("Keep whose context ended in flight = %v, want an error matching ErrUnreachable", err)
	}
}

// TestGrantGivenBackWhenContextEnded: an acquisition whose context ended
// while its statement was in flight returns the context's error and gives
// back the slot the server may have granted, so nobody holds it unknowingly.
func TestGrantGivenBackWhenContextEnded(t *testing.T) {
	e := newEnv(t)
	define(t, e.s, "a", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.s.EndContextAfterQueries(cancel)
	if _, err := e.s.Acquire(ctx, req("r", time.Minute, "a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire whose context ended in flight = %v, want context.Canceled", err)
	}
	st, err := e.s.State(context.Background(), "a", false)
	if err != nil || st.Running != 0 || st.Expired != 0 {
		t.Fatalf("the slot was not given back: %+v %v", st, err)
	}
}
