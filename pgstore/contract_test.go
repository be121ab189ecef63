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
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "seq", 2)
	nodes := []*pgstore.Store{e.s, e.node(t)}
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

// TestHeldFalsePastExpiry: a lease past its expiry is not held, though no
// one has taken it over yet.
func TestHeldFalsePastExpiry(t *testing.T) {
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
		if st, err := e.s.Held(ctx, g.Handle()); err != nil || st.Held {
			t.Fatalf("lease past its expiry: %+v %v", st, err)
		}
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

// TestUpgradeFromVersion1: a schema made by the released version 1, with
// a lease and a waiter in it, upgrades through Migrate; the lease is still
// held with its token, and the store works on it.
func TestUpgradeFromVersion1(t *testing.T) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	opts := []pgstore.Option{pgstore.WithSchema(schema)}
	must(t, pgstore.MigrateTo(ctx, pool, 1, opts...))
	if _, err := pgstore.New(ctx, pool, opts...); !errors.Is(err, pgstore.ErrSchemaMissing) {
		t.Fatalf("New on a version 1 schema: %v", err)
	}
	// What version 1's code does: define and grant through its functions.
	q := pgx.Identifier{schema}.Sanitize()
	_, err := pool.Exec(ctx, "SELECT * FROM "+q+".define('old', 1, false)")
	must(t, err)
	var ev string
	var token int64
	must(t, pool.QueryRow(ctx, "SELECT r_ev, r_token FROM "+q+
		".acquire('{old}', 'holder', '', 60000000, 0, false, false, 7, 0, 10000000)").Scan(&ev, &token))
	if ev != "granted" || token == 0 {
		t.Fatalf("version 1 grant: %s %d", ev, token)
	}
	must(t, pgstore.Migrate(ctx, pool, opts...))
	var version int
	must(t, pool.QueryRow(ctx, "SELECT max(version) FROM "+q+".schema_version").Scan(&version))
	if version != pgstore.SchemaVersion || version < 2 {
		t.Fatalf("version after Migrate: %d (build %d)", version, pgstore.SchemaVersion)
	}
	s, err := pgstore.New(ctx, pool, opts...)
	must(t, err)
	defer s.Close()
	h := store.Handle{Lock: store.Lock{Name: "old", Token: token}, Ref: store.RefOf("holder")}
	if st, err := s.Held(ctx, h); err != nil || !st.Held {
		t.Fatalf("the version 1 lease after the upgrade: %+v %v", st, err)
	}
	if _, err := s.Acquire(ctx, req("other", time.Minute, "old")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a second holder after the upgrade: %v", err)
	}
	rec := newRecorder()
	must(t, s.Release(ctx, h, rec))
	g, err := s.Acquire(ctx, req("other", time.Minute, "old"))
	must(t, err)
	if g.Token <= token {
		t.Fatalf("token after the upgrade %d, before %d", g.Token, token)
	}
	if evs := rec.drain(); len(evs) != 1 || evs[0].Seq == 0 {
		t.Fatalf("release event after the upgrade: %+v", evs)
	}
	must(t, s.Release(ctx, g.Handle(), nil))
	// Migrate again: nothing to do.
	must(t, pgstore.Migrate(ctx, pool, opts...))
}

// TestUpgradeFromVersion2To4: a schema made by the released version 2, 3
// or 4, with a lease and a queued waiter in it, upgrades through Migrate:
// the lease is still held with its token, its release hands the slot to
// the waiter queued by the old version (which keeps the waiter lease of
// its own row: version 5's nodes do not own it), with its event in the
// holder row, a try does not jump it, and tokens still grow.
func TestUpgradeFromVersion2To4(t *testing.T) {
	for _, from := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("from=%d", from), func(t *testing.T) { testUpgradeFrom(t, from) })
	}
}

func testUpgradeFrom(t *testing.T, from int) {
	pool := newPool(t, nil)
	schema := newSchema(t, pool)
	ctx := context.Background()
	opts := []pgstore.Option{pgstore.WithSchema(schema)}
	must(t, pgstore.MigrateTo(ctx, pool, from, opts...))
	if _, err := pgstore.New(ctx, pool, opts...); !errors.Is(err, pgstore.ErrSchemaMissing) {
		t.Fatalf("New on a version %d schema: %v", from, err)
	}
	// What the old version's code does: define, grant and queue through its functions.
	q := pgx.Identifier{schema}.Sanitize()
	_, err := pool.Exec(ctx, "SELECT * FROM "+q+".define('old', 1, false)")
	must(t, err)
	var ev string
	var token, ticket int64
	must(t, pool.QueryRow(ctx, "SELECT r_ev, r_token FROM "+q+
		".acquire('{old}', 'holder', '', 60000000, 0, false, false, 7, 0, 10000000, 0)").Scan(&ev, &token))
	if ev != "granted" || token == 0 {
		t.Fatalf("version %d grant: %s %d", from, ev, token)
	}
	must(t, pool.QueryRow(ctx, "SELECT r_ev, r_ticket FROM "+q+
		".acquire('{old}', 'waiter', '', 60000000, 0, false, true, 8, 0, 600000000, 0)").Scan(&ev, &ticket))
	if ev != "queued" {
		t.Fatalf("version %d queueing: %s", from, ev)
	}
	must(t, pgstore.Migrate(ctx, pool, opts...))
	var version int
	must(t, pool.QueryRow(ctx, "SELECT max(version) FROM "+q+".schema_version").Scan(&version))
	if version != pgstore.SchemaVersion || version < 4 {
		t.Fatalf("version after Migrate: %d (build %d)", version, pgstore.SchemaVersion)
	}
	// A process of version 4 still running keeps its statements: a try
	// through version 4's acquire_one is refused by the lease above.
	must(t, pool.QueryRow(ctx, "SELECT r_ev FROM "+q+
		".acquire_one('old', 'v4-try', '', 60000000, 0, false, false, 9, 10000000, '{old}', 60000000, 0)").Scan(&ev))
	if ev != "refused" {
		t.Fatalf("a try through version 4's acquire_one after the upgrade: %s", ev)
	}
	// and version 4's check_one (now version 5's without a node): a ticket
	// that is not in the queue is gone.
	must(t, pool.QueryRow(ctx, "SELECT r_ev FROM "+q+
		".check_one('{old}', 'v4-w', '', 60000000, 0, false, true, 10, 987654321, 10000000, 0)").Scan(&ev))
	if ev != "gone" {
		t.Fatalf("a check through version 4's check_one after the upgrade: %s", ev)
	}
	s, err := pgstore.New(ctx, pool, opts...)
	must(t, err)
	defer s.Close()
	h := store.Handle{Lock: store.Lock{Name: "old", Token: token}, Ref: store.RefOf("holder")}
	if st, err := s.Held(ctx, h); err != nil || !st.Held {
		t.Fatalf("the version %d lease after the upgrade: %+v %v", from, st, err)
	}
	rec := newRecorder()
	must(t, s.Release(ctx, h, rec))
	if evs := rec.drain(); len(evs) != 1 || evs[0].Seq == 0 || evs[0].Waiting != 1 {
		t.Fatalf("release event after the upgrade: %+v", evs)
	}
	// The release handed the slot to the old version's waiter: a try is
	// refused, naming it.
	var busy *store.BusyError
	if _, err := s.Acquire(ctx, req("other", time.Minute, "old")); !errors.As(err, &busy) || busy.Queued || busy.Ref != "waiter" {
		t.Fatalf("a try after the handoff to the version %d waiter: %v", from, err)
	}
	// The waiter's check (as its node would run it) finds its grant.
	var wtoken, seq int64
	must(t, pool.QueryRow(ctx, "SELECT r_ev, r_token, r_seq FROM "+q+
		".check_one('{old}', 'waiter', '', 60000000, 0, false, true, 8, $1, 600000000, 0, 0)", ticket).Scan(&ev, &wtoken, &seq))
	if ev != "granted" || wtoken <= token || seq == 0 {
		t.Fatalf("the handed waiter's check: %s token %d (holder's %d) seq %d", ev, wtoken, token, seq)
	}
	must(t, s.Release(ctx, store.Handle{Lock: store.Lock{Name: "old", Token: wtoken}, Ref: store.RefOf("waiter")}, nil))
	g, err := s.Acquire(ctx, req("other", time.Minute, "old"))
	must(t, err)
	if g.Token <= wtoken {
		t.Fatalf("token after the upgrade %d, before %d", g.Token, wtoken)
	}
	must(t, s.Release(ctx, g.Handle(), nil))
	must(t, pgstore.Migrate(ctx, pool, opts...))
}

// TestVersion5ReleaseStaleOfHoldInLockRow: a process of version 5 still
// running while the schema is upgraded releases a stale hold of one lock
// through release(); the hold a version-6 store granted in the lock's row
// is released (migration 007), and the lock is free.
func TestVersion5ReleaseStaleOfHoldInLockRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "v5rs", 1)
	g, err := e.s.Acquire(ctx, req("stale", time.Minute, "v5rs"))
	must(t, err)
	var fast bool
	q := pgx.Identifier{e.schema}.Sanitize()
	must(t, e.pool.QueryRow(ctx, "SELECT fast AND ref = 'stale' FROM "+q+".locks WHERE name = 'v5rs'").Scan(&fast))
	if !fast {
		t.Fatal("the grant is not in the lock's row")
	}
	must(t, e.s.Advance(ctx, 2*time.Minute))
	var ev string
	must(t, e.pool.QueryRow(ctx, "SELECT r_ev FROM "+q+".release('{v5rs}', '{0}', 'stale', 0, false)").Scan(&ev))
	if ev != "released" {
		t.Fatalf("version 5's ReleaseStale of a hold in its lock's row: %s", ev)
	}
	if st, err := e.s.Held(ctx, g.Handle()); err != nil || st.Held {
		t.Fatalf("released hold: %+v %v", st, err)
	}
	_, err = e.s.Acquire(ctx, req("next", time.Minute, "v5rs"))
	must(t, err)
}

// TestVersion8StatementsOnSlotRow: a process of version 8 still running
// while the schema is upgraded meets a row in slot mode (migration 009).
// Its hot UPDATE grants nothing there (ref is empty, not NULL), its
// acquire_slow() of 13 arguments grants it a holder row (the row spilled:
// its own held.sql looks there), and the holders the version-9 store
// granted in the slots keep them, in holder rows of the same slots.
func TestVersion8StatementsOnSlotRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "v8", 3)
	g, err := e.s.Acquire(ctx, req("new", time.Minute, "v8"))
	must(t, err)
	var slots string
	must(t, e.pool.QueryRow(ctx, "SELECT array_to_string(xref, ',', '-') FROM "+q+".locks WHERE name = 'v8' AND fast AND ref = ''").
		Scan(&slots))
	if slots != "new,-,-" {
		t.Fatalf("slots %q", slots)
	}
	// version 8's queries/acquire1.sql, in short
	tag, err := e.pool.Exec(ctx, "UPDATE "+q+".locks l SET ref = 'old', token = nextval('"+q+".tokens') "+
		"WHERE l.name = 'v8' AND l.fast AND l.ref IS NULL")
	must(t, err)
	if tag.RowsAffected() != 0 {
		t.Fatal("version 8's hot grant took a row in slot mode")
	}
	var ev string
	must(t, e.pool.QueryRow(ctx, "SELECT r_ev FROM "+q+".acquire_slow('v8', 'old', '', 60000000, 0, false, false, 88, "+
		"10000000, '{v8}', 60000000, 0, 0)").Scan(&ev))
	if ev != "granted" {
		t.Fatalf("version 8's acquire_slow: %s", ev)
	}
	var holders string
	must(t, e.pool.QueryRow(ctx, "SELECT string_agg(ref || slot, ',' ORDER BY slot) FROM "+q+".holders WHERE lock = 'v8'").
		Scan(&holders))
	if holders != "new1,old2" {
		t.Fatalf("holder rows %q, want new1,old2", holders)
	}
	st, err := e.s.Held(ctx, g.Handle())
	must(t, err)
	if !st.Held {
		t.Fatal("the version-9 holder lost its slot")
	}
	wantState(t, e.s, "v8", 2, 0)
	must(t, e.s.Release(ctx, g.Handle(), nil))
}
