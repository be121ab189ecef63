package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

func statsEntry(t *testing.T, s store.StatsReader, name string) store.Stats {
	t.Helper()
	all, err := s.Stats(context.Background())
	must(t, err)
	for _, e := range all {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no Stats entry %q in %+v", name, all)
	return store.Stats{}
}

// TestStatsSurviveTheSweep: the counters of a lock whose row the sweep
// deletes are folded into its definition's row (a family's members into
// the family): they never go down. Holds are timed, every one, and a
// multi-lock grant (the slow path) counts like a fast one.
func TestStatsSurviveTheSweep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "sw", 1)
	define(t, e.s, "swf/*", 2)
	for _, names := range [][]string{{"sw"}, {"sw"}, {"swf/a"}, {"swf/b"}, {"sw", "swf/a"}} {
		g, err := e.s.Acquire(ctx, req("me", time.Minute, names...))
		must(t, err)
		must(t, e.s.Release(ctx, g.Handle(), nil))
	}
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			name string
			n    uint64
		}{{"sw", 3}, {"swf/*", 3}} {
			got := statsEntry(t, e.s, c.name)
			if got.Acquisitions != c.n || got.Releases != c.n || got.Holds.Count != c.n || got.HoldSampling != 1 ||
				got.Waits.Count != c.n || got.Locks != map[bool]int{false: 1, true: 0}[got.Family] {
				t.Fatalf("%s: %s: %+v, want %d grants, releases and timed holds", when, c.name, got, c.n)
			}
			var inBuckets uint64
			for _, n := range got.Holds.Buckets {
				inBuckets += n
			}
			if inBuckets != got.Holds.Count {
				t.Fatalf("%s: %s: %d holds in buckets, Count %d", when, c.name, inBuckets, got.Holds.Count)
			}
		}
	}
	check("before the sweep")
	_, err := e.pool.Exec(ctx, "UPDATE "+q+".locks SET freed = freed - interval '2 minutes'")
	must(t, err)
	var n int64
	must(t, e.pool.QueryRow(ctx, "SELECT "+q+".sweep(64)").Scan(&n))
	var left int
	must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM "+q+".locks").Scan(&left))
	if n == 0 || left != 0 {
		t.Fatalf("the sweep deleted %d rows, %d left", n, left)
	}
	check("after the sweep")
}

// TestRefusalsCountedInProcess: a refused try is counted by the store that
// was refused (it writes nothing to the database), under the lock's
// definition, a family member's under its family.
func TestRefusalsCountedInProcess(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "rf/*", 1)
	_ = statsEntry(t, e.s, "rf/*") // the store learns the definitions
	for _, name := range []string{"rf/1", "rf/2"} {
		_, err := e.s.Acquire(ctx, req("holder", time.Minute, name))
		must(t, err)
		for range 3 {
			_, err := e.s.Acquire(ctx, req("other", time.Minute, name))
			var busy *store.BusyError
			if !errors.As(err, &busy) {
				t.Fatalf("a try of a held lock: %v", err)
			}
		}
	}
	got := statsEntry(t, e.s, "rf/*")
	if got.Refusals != 6 || got.Acquisitions != 2 || got.Locks != 2 || got.Running != 2 || got.Slots != 2 {
		t.Fatalf("family after 6 refusals of 2 members held: %+v", got)
	}
}
