package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

// A lock of many slots (`sleeplock run -s` defines 1,000,000) costs what a
// lock of a few does: its row keeps no element per slot (slot mode, one
// element of the row's arrays per slot, is for locks of at most 1,024
// slots), and a free slot number is found from the holder rows, not by
// scanning 1..slots. Each statement on such a lock took 0.2–0.9 s before
// (the arrays of 1,000,000 elements read by holding, written by every
// grant; generate_series(1, slots) for a free slot number): the checks
// here are on what the database keeps and answers, not on time
// (BenchmarkWideLock has the figures).

// slotsOf reads the slot numbers of lock name's holders and the longest
// slot array of any lock's row (0: none has one).
func slotsOf(t *testing.T, e *env, name string) (slots []int, longest int) {
	t.Helper()
	q := pgx.Identifier{e.schema}.Sanitize()
	must(t, e.pool.QueryRow(context.Background(),
		"SELECT coalesce((SELECT array_agg(h.slot ORDER BY h.slot) FROM "+q+".holding h WHERE h.lock = $1), '{}'), "+
			"coalesce((SELECT max(cardinality(l.xref)) FROM "+q+".locks l), 0)", name).Scan(&slots, &longest))
	return slots, longest
}

// TestWideLockKeepsNoSlotArrays: readers of a lock of 1,000,000 slots
// share it with holder rows (the first in the row, in scalar mode), each
// in the lowest free slot number; an exclusive caller queues behind them,
// State counts it, and it is granted every slot once they are gone.
func TestWideLockKeepsNoSlotArrays(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const wide = 1_000_000
	define(t, e.s, "wide", wide)
	grants := map[string]*store.Grant{}
	for _, ref := range []string{"a", "b", "c"} {
		g, err := e.s.Acquire(ctx, req(ref, time.Minute, "wide"))
		must(t, err)
		grants[ref] = &g
		if mode, _ := rowMode(t, e, "wide"); mode == "slot" {
			t.Fatalf("after %s: the row of a lock of %d slots is in slot mode", ref, wide)
		}
	}
	if slots, longest := slotsOf(t, e, "wide"); !slices.Equal(slots, []int{1, 2, 3}) || longest != 0 {
		t.Fatalf("holders in slots %v, longest slot array %d: want [1 2 3], 0", slots, longest)
	}
	// b's slot is the lowest free one: d takes it.
	must(t, e.s.Release(ctx, grants["b"].Handle(), nil))
	g, err := e.s.Acquire(ctx, req("d", time.Minute, "wide"))
	must(t, err)
	grants["d"] = &g
	delete(grants, "b")
	if slots, _ := slotsOf(t, e, "wide"); !slices.Equal(slots, []int{1, 2, 3}) {
		t.Fatalf("after b's release and d's grant: holders in slots %v, want [1 2 3]", slots)
	}
	st, err := e.s.State(ctx, "wide", false)
	must(t, err)
	if st.Slots != wide || st.Running != 3 || st.Leases != 3 || st.Waiting != 0 {
		t.Fatalf("state %+v: want %d slots, 3 running, 3 leases, none waiting", st, wide)
	}

	// An exclusive caller waits for every slot.
	x := req("x", time.Minute, "wide")
	x.Weight, x.Wait = store.WeightAll, true
	type result struct {
		g   store.Grant
		err error
	}
	done := make(chan result, 1)
	xctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		g, err := e.s.Acquire(xctx, x)
		done <- result{g, err}
	}()
	for st.Waiting != 1 {
		select {
		case r := <-done:
			t.Fatalf("exclusive acquire while 3 hold: %+v, %v; want it to wait", r.g, r.err)
		case <-time.After(5 * time.Millisecond):
		}
		st, err = e.s.State(ctx, "wide", false)
		must(t, err)
	}
	if st.Running != 3 {
		t.Fatalf("state with the exclusive caller queued %+v: want 3 running, 1 waiting", st)
	}
	for _, ref := range []string{"a", "c", "d"} {
		must(t, e.s.Release(ctx, grants[ref].Handle(), nil))
	}
	r := <-done
	must(t, r.err)
	if r.g.Weight != wide {
		t.Fatalf("exclusive grant of weight %d, want %d", r.g.Weight, wide)
	}
	st, err = e.s.State(ctx, "wide", false)
	must(t, err)
	if st.Running != wide || st.Leases != 1 || st.Waiting != 0 {
		t.Fatalf("state with the exclusive holder %+v: want %d running, 1 lease", st, wide)
	}
	if _, longest := slotsOf(t, e, "wide"); longest != 0 {
		t.Fatalf("longest slot array %d, want none", longest)
	}
	must(t, e.s.Release(ctx, r.g.Handle(), nil))
}

// TestSlotModeUpTo1024: a lock of 1,024 slots still keeps its holders in
// its row's arrays (one UPDATE a grant, BenchmarkSlots), one of 1,025 in
// holder rows.
func TestSlotModeUpTo1024(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		slots int
		mode  string
	}{{1024, "slot"}, {1025, "slow"}} {
		name := fmt.Sprintf("edge%d", c.slots)
		define(t, e.s, name, c.slots)
		for _, ref := range []string{"a", "b"} {
			_, err := e.s.Acquire(ctx, req(ref, time.Minute, name))
			must(t, err)
		}
		if mode, _ := rowMode(t, e, name); mode != c.mode {
			t.Fatalf("a lock of %d slots with 2 holders: row %s, want %s", c.slots, mode, c.mode)
		}
		if st, err := e.s.State(ctx, name, false); err != nil || st.Running != 2 {
			t.Fatalf("state of %s: %+v, %v; want 2 running", name, st, err)
		}
	}
}

// TestFreeSlotFull: free_slot() of a lock whose holders take every slot
// number is NULL, and the lowest gap otherwise.
func TestFreeSlotFull(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "three", 3)
	var gs []store.Grant
	for _, ref := range []string{"a", "b", "c"} {
		g, err := e.s.Acquire(ctx, req(ref, time.Minute, "three"))
		must(t, err)
		gs = append(gs, g)
	}
	q := pgx.Identifier{e.schema}.Sanitize()
	// the row in slot mode: its holders to holder rows first
	var spilled bool
	must(t, e.pool.QueryRow(ctx, "SELECT "+q+".spill('three')").Scan(&spilled))
	free := func() *int {
		var n *int
		must(t, e.pool.QueryRow(ctx, "SELECT "+q+".free_slot('three', 3)").Scan(&n))
		return n
	}
	if n := free(); n != nil {
		t.Fatalf("free slot of a full lock: %d, want none", *n)
	}
	must(t, e.s.Release(ctx, gs[1].Handle(), nil))
	if n := free(); n == nil || *n != 2 {
		t.Fatalf("free slot after slot 2's release: %v, want 2", n)
	}
	if _, err := e.s.Acquire(ctx, req("d", time.Minute, "three")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Acquire(ctx, req("e", time.Minute, "three")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a fourth holder of 3 slots: %v, want ErrUnavailable", err)
	}
}
