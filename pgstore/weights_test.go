package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// Weights on PostgreSQL's own paths: a weighted hold of a lock whose row
// is fast and holds nothing is the row's scalar holder (locks.weight,
// wacqs), granted by one UPDATE (acquire_weighted.sql); otherwise it lives
// in a holder row, so a weighted request meets a lock whose row holds
// weight-1 holders (scalar or slot mode) by spilling it, and the holders
// it moved keep working from their holder rows.

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
// theirs. A weighted hold released last leaves the row fast (scalar mode,
// free), as the release of a weight-1 hold does.
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
	if mode, rows := rowMode(t, e, "gpu"); mode != "scalar" || rows != 0 {
		t.Fatalf("the lock free after a weighted hold: row %s with %d holder rows, want scalar with none", mode, rows)
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
// hold of a lock of one slot, which is a hold of weight 1 in the row. Once
// the row is free, an exclusive hold of two slots is its scalar holder,
// and a waiter of weight 1 spills it, its weight kept in its holder row.
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
	if mode, rows := rowMode(t, e, "pair"); g.Weight != 2 || mode != "scalar" || rows != 0 {
		t.Fatalf("exclusive of two slots: weight %d, row %s with %d holder rows; want 2, scalar, none", g.Weight, mode, rows)
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
	if w := holderWeight(t, e, "pair", "w"); w != 2 {
		t.Fatalf("the exclusive hold spilled by a waiter: weight %d in its holder row, want 2", w)
	}
	wantState(t, e.s, "pair", 2, 1)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	must(t, <-done)
}

// holderWeight is the weight of ref's holder row of lock name, 0 when it
// has none.
func holderWeight(t *testing.T, e *env, name, ref string) int {
	t.Helper()
	var w int
	err := e.pool.QueryRow(context.Background(), "SELECT coalesce((SELECT h.weight FROM "+
		pgx.Identifier{e.schema}.Sanitize()+".holders h WHERE h.lock = $1 AND h.ref = $2), 0)", name, ref).Scan(&w)
	must(t, err)
	return w
}

// tracedStore is another store on e's schema whose statements tr keeps.
func tracedStore(t *testing.T, e *env) (*pgstore.Store, *recorderTracer) {
	t.Helper()
	tr := &recorderTracer{}
	s, err := pgstore.New(context.Background(), newPool(t, tr), pgstore.WithSchema(e.schema),
		pgstore.WithPollInterval(5*time.Millisecond))
	must(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, tr
}

// sent returns the tags (the first comment) of the statements tr kept
// since the first n, and forgets them.
func (r *recorderTracer) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.sql {
		tag, _, _ := strings.Cut(strings.TrimPrefix(q, "/* sleeplock "), " */")
		if !strings.HasPrefix(q, "/* sleeplock ") {
			tag = q
		}
		out = append(out, tag)
	}
	r.sql = nil
	return out
}

// wantSent checks that the statements tr kept since the last call are
// exactly those tagged want.
func wantSent(t *testing.T, tr *recorderTracer, what string, want ...string) {
	t.Helper()
	if got := tr.sent(); !slices.Equal(got, want) {
		t.Fatalf("%s: sent %q, want %q", what, got, want)
	}
}

// TestWeightedOneRoundTrip: a weighted TryAcquire of a lock whose row is
// fast and free, and its Release, are one bare UPDATE of the row each
// (acquire_weighted.sql, release_fast.sql with the weight), as a weight-1
// pair is; the first, on a lock with no row, is acquire_one(), which
// makes the row with the hold in it. A weighted refusal is one statement
// once the store has seen the lock held (a stale hint costs one more, as
// for weight 1).
func TestWeightedOneRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "gpu", 4)
	s, tr := tracedStore(t, e)
	for i := range 3 {
		tr.sent()
		g, err := s.Acquire(ctx, weighted(req("w", time.Minute, "gpu"), 3))
		must(t, err)
		if i == 0 {
			wantSent(t, tr, "a weighted grant of a lock with no row", "acquire_one")
		} else {
			wantSent(t, tr, fmt.Sprintf("run %d: a weighted grant", i+1), "acquire_weighted")
		}
		if mode, rows := rowMode(t, e, "gpu"); g.Weight != 3 || mode != "scalar" || rows != 0 {
			t.Fatalf("run %d: weight %d, row %s with %d holder rows; want 3 in the row in scalar mode", i+1, g.Weight,
				mode, rows)
		}
		st, err := s.State(ctx, "gpu", true)
		must(t, err)
		if st.Running != 3 || len(st.Holders) != 1 || st.Holders[0].Weight != 3 || st.Holders[0].Token != g.Token {
			t.Fatalf("run %d: state %+v, want 3 slots in use by the weighted holder", i+1, st)
		}
		tr.sent()
		for j := range 2 {
			if _, err := s.Acquire(ctx, weighted(req("v", time.Minute, "gpu"), 2)); !errors.Is(err, store.ErrUnavailable) {
				t.Fatal(err)
			}
			if j == 0 {
				wantSent(t, tr, "a weighted refusal on a stale hint", "acquire_weighted", "acquire_one")
			} else {
				wantSent(t, tr, "a weighted refusal", "acquire_one")
			}
		}
		// The hint is slow after the refusal: release_one(), which
		// leaves the row fast; then a pair of bare statements.
		must(t, s.Release(ctx, g.Handle(), nil))
		wantSent(t, tr, "a weighted release on a slow hint", "release_one")
		g, err = s.Acquire(ctx, weighted(req("w", time.Minute, "gpu"), 3))
		must(t, err)
		must(t, s.Release(ctx, g.Handle(), nil))
		wantSent(t, tr, "a weighted pair", "acquire_weighted", "release_weighted")
		if mode, rows := rowMode(t, e, "gpu"); mode != "scalar" || rows != 0 {
			t.Fatalf("run %d: after the release, row %s with %d holder rows; want scalar, none", i+1, mode, rows)
		}
	}
}

// TestWeightedInRowCounts: a weighted hold in the row of a lock (in slot
// mode when it came) counts its weight wherever the lock is read: the
// weight-1 callers that come while it is there spill it, keeping its
// weight in its holder row, and get the slots left; its events carry it.
func TestWeightedInRowCounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "gpu", 4)
	s, tr := tracedStore(t, e)
	// a weight-1 pair: the row in slot mode, every slot free
	g, err := s.Acquire(ctx, req("one", time.Minute, "gpu"))
	must(t, err)
	must(t, s.Release(ctx, g.Handle(), nil))
	if mode, _ := rowMode(t, e, "gpu"); mode != "slot" {
		t.Fatalf("row in %s mode, want slot", mode)
	}
	tr.sent()
	rec := newRecorder()
	r := weighted(req("w", time.Minute, "gpu"), 2)
	r.Events = rec
	w, err := s.Acquire(ctx, r)
	must(t, err)
	wantSent(t, tr, "a weighted grant of a free row in slot mode", "acquire_weighted_events")
	if mode, rows := rowMode(t, e, "gpu"); w.Weight != 2 || mode != "scalar" || rows != 0 {
		t.Fatalf("weight %d, row %s with %d holder rows; want 2, scalar, none", w.Weight, mode, rows)
	}
	if evs := rec.drain(); len(evs) != 1 || evs[0].Type != store.EventAcquired || evs[0].Weight != 2 ||
		evs[0].Running != 2 || evs[0].Slots != 4 || evs[0].Token != w.Token || evs[0].Seq == 0 {
		t.Fatalf("events %+v: want one acquired of weight 2, 2 of 4 slots in use", evs)
	}
	wantState(t, e.s, "gpu", 2, 0)
	// Weight 1, from this store and another: two slots are left.
	var ones []store.Grant
	for _, st := range []store.Store{s, e.node(t)} {
		o, err := st.Acquire(ctx, req("o"+strconv.Itoa(len(ones)), time.Minute, "gpu"))
		must(t, err)
		ones = append(ones, o)
	}
	if hw := holderWeight(t, e, "gpu", "w"); hw != 2 {
		t.Fatalf("the weighted hold spilled: weight %d in its holder row, want 2", hw)
	}
	wantState(t, e.s, "gpu", 4, 0)
	for _, st := range []store.Store{s, e.node(t)} {
		if _, err := st.Acquire(ctx, req("x", time.Minute, "gpu")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("a fifth slot: %v, want ErrUnavailable", err)
		}
	}
	// A weighted request while the row holds a weighted hold: refused on
	// the slots in use (2 free of 4, 3 asked), granted when they fit.
	must(t, s.Release(ctx, ones[0].Handle(), nil))
	must(t, s.Release(ctx, ones[1].Handle(), nil))
	tr.sent()
	if _, err := s.Acquire(ctx, weighted(req("v", time.Minute, "gpu"), 3)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("weight 3 with 2 slots free: %v, want ErrUnavailable", err)
	}
	v, err := s.Acquire(ctx, weighted(req("v", time.Minute, "gpu"), 2))
	must(t, err)
	wantState(t, e.s, "gpu", 4, 0)
	rec = newRecorder()
	must(t, s.Release(ctx, w.Handle(), rec))
	must(t, s.Release(ctx, v.Handle(), nil))
	if evs := rec.drain(); len(evs) != 1 || evs[0].Type != store.EventReleased || evs[0].Weight != 2 {
		t.Fatalf("events %+v: want one released of weight 2", evs)
	}
	wantState(t, e.s, "gpu", 0, 0)

	// In the row again, released by the bare statement: its event carries
	// the weight.
	r.Events = rec
	w, err = s.Acquire(ctx, r)
	must(t, err)
	tr.sent()
	must(t, s.Release(ctx, w.Handle(), rec))
	wantSent(t, tr, "a weighted release with its event", "release_weighted_events")
	if evs := rec.drain(); len(evs) != 2 || evs[1].Type != store.EventReleased || evs[1].Weight != 2 ||
		evs[1].Running != 0 || evs[1].Slots != 4 || evs[1].Seq <= evs[0].Seq {
		t.Fatalf("events %+v: want the acquired one, then one released of weight 2", evs)
	}
}

// TestWeightedInRowReleasedByWeightOneStatements: the weight of the row's
// holder is that of the holder the weighted grant made, and of no other:
// the weight-1 bare statements (queries/acquire_fast.sql and
// release_fast.sql, sent as they are), which write no weight, release a
// weighted holder of the row and grant the row again, and the new holder
// is of weight 1.
func TestWeightedInRowReleasedByWeightOneStatements(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "gpu", 4)
	q := pgx.Identifier{e.schema}.Sanitize()
	bare := func(file string) string {
		b, err := os.ReadFile("queries/" + file)
		must(t, err)
		return strings.ReplaceAll(string(b), "{{schema}}", q)
	}
	acquireFast, releaseFast := bare("acquire_fast.sql"), bare("release_fast.sql")
	for i, release := range []string{"store", "release_fast.sql"} {
		w, err := e.s.Acquire(ctx, weighted(req("w", time.Minute, "gpu"), 3))
		must(t, err)
		if mode, rows := rowMode(t, e, "gpu"); mode != "scalar" || rows != 0 {
			t.Fatalf("%s: row %s with %d holder rows; want scalar, none", release, mode, rows)
		}
		// acquire_fast.sql does not take a held row.
		if tag, err := e.pool.Exec(ctx, acquireFast, "gpu", "old", "", int64(60e6), int64(0), int64(1), int64(60e6),
			int64(0)); err != nil || tag.RowsAffected() != 0 {
			t.Fatalf("%s: acquire_fast of a row with a weighted holder: %v %v", release, tag, err)
		}
		wantState(t, e.s, "gpu", 3, 0)
		if i == 0 {
			must(t, e.s.Release(ctx, w.Handle(), nil))
		} else {
			var kind string
			var at, since time.Time
			var token, slots, seq int64
			must(t, e.pool.QueryRow(ctx, releaseFast, "gpu", int64(0), "w", false).Scan(&kind, &token, &at, &since, &slots, &seq))
			if token != w.Token {
				t.Fatalf("release_fast released token %d, want %d", token, w.Token)
			}
		}
		if tag, err := e.pool.Exec(ctx, acquireFast, "gpu", "old", "", int64(60e6), int64(0), int64(1), int64(60e6),
			int64(0)); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("after a %s release: acquire_fast of the free row: %v %v", release, tag, err)
		}
		st, err := e.s.State(ctx, "gpu", true)
		must(t, err)
		if st.Running != 1 || len(st.Holders) != 1 || st.Holders[0].Ref != "old" || st.Holders[0].Weight != 1 {
			t.Fatalf("after a %s release, acquire_fast's grant: state %+v, want 1 slot in use by old, of weight 1", release, st)
		}
		// three weight-1 slots are left; a spill carries weight 1
		var more []store.Grant
		for _, ref := range []string{"a", "b", "c"} {
			g, err := e.s.Acquire(ctx, req(ref, time.Minute, "gpu"))
			must(t, err)
			more = append(more, g)
		}
		if hw := holderWeight(t, e, "gpu", "old"); hw != 1 {
			t.Fatalf("acquire_fast's holder spilled: weight %d, want 1", hw)
		}
		wantState(t, e.s, "gpu", 4, 0)
		for _, g := range more {
			must(t, e.s.Release(ctx, g.Handle(), nil))
		}
		must(t, e.s.Release(ctx, store.Handle{Lock: store.Lock{Name: "gpu"}, Ref: store.RefOf("old")}, nil))
		wantState(t, e.s, "gpu", 0, 0)
	}
}

// TestWeightedInRowTakenOver: an expired weighted holder of the row is
// taken over, with its weight, by a request that needs its slots, and
// stops blocking once taken over.
func TestWeightedInRowTakenOver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "gpu", 4)
	w, err := e.s.Acquire(ctx, weighted(req("w", time.Second, "gpu"), 3))
	must(t, err)
	if mode, _ := rowMode(t, e, "gpu"); mode != "scalar" {
		t.Fatalf("row in %s mode, want scalar", mode)
	}
	must(t, e.s.Advance(ctx, 2*time.Second))
	st, err := e.s.State(ctx, "gpu", false)
	must(t, err)
	if st.Running != 0 || st.Expired != 3 {
		t.Fatalf("state %+v: want 3 slots of an expired holder", st)
	}
	// Two slots asked: one is free by slot count, so the expired holder's
	// are taken.
	rec := newRecorder()
	r := weighted(req("v", time.Minute, "gpu"), 2)
	r.Events = rec
	v, err := e.s.Acquire(ctx, r)
	must(t, err)
	var expired *store.Event
	for _, ev := range rec.drain() {
		if ev.Type == store.EventExpired {
			expired = &ev
		}
	}
	if expired == nil || expired.Weight != 3 || expired.Token != w.Token {
		t.Fatalf("no expired event of weight 3 for the taken-over holder: %+v", expired)
	}
	st, err = e.s.State(ctx, "gpu", true)
	must(t, err)
	if st.Running != 2 || st.Expired != 0 || len(st.Holders) != 1 || st.Holders[0].Token != v.Token {
		t.Fatalf("state %+v: want the new holder of weight 2 alone", st)
	}
	if held, err := e.s.Held(ctx, w.Handle()); err != nil || held.Held {
		t.Fatalf("the taken-over holder: held %+v, %v", held, err)
	}
	// two slots are left for weight 1
	for _, ref := range []string{"a", "b"} {
		_, err := e.s.Acquire(ctx, req(ref, time.Minute, "gpu"))
		must(t, err)
	}
	wantState(t, e.s, "gpu", 4, 0)
}
