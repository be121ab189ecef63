package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
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
// the family): they never go down. A multi-lock grant (the slow path)
// counts like a fast one. The tokens start at 256, so the first grant's
// hold is timed (a multiple of 256) and the others are not.
func TestStatsSurviveTheSweep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "sw", 1)
	define(t, e.s, "swf/*", 2)
	_, err := e.pool.Exec(ctx, "SELECT setval('"+q+".tokens', 255)")
	must(t, err)
	for _, names := range [][]string{{"sw"}, {"sw"}, {"swf/a"}, {"swf/b"}, {"sw", "swf/a"}} {
		g, err := e.s.Acquire(ctx, req("me", time.Minute, names...))
		must(t, err)
		must(t, e.s.Release(ctx, g.Handle(), nil))
	}
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			name  string
			n     uint64
			timed uint64
		}{{"sw", 3, 1}, {"swf/*", 3, 0}} {
			got := statsEntry(t, e.s, c.name)
			if got.Acquisitions != c.n || got.Releases != c.n || got.Holds.Count != c.timed || got.HoldSampling != 256 ||
				got.Waits.Count != c.n || got.Locks != map[bool]int{false: 1, true: 0}[got.Family] {
				t.Fatalf("%s: %s: %+v, want %d grants and releases, %d timed holds", when, c.name, got, c.n, c.timed)
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
	_, err = e.pool.Exec(ctx, "UPDATE "+q+".locks SET freed = freed - interval '2 minutes'")
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

// TestHoldsTimedByTime: a lock taken seldom has hold times although its
// tokens are not timed (1 in 256 by token): the first release by the fast
// row of each store (a cron job's process makes one per run) times its hold
// whatever its token; the next, within holdSampleEvery, do not. Another
// store (the next run) times its first again. The counts stay exact: one
// timed hold per store's three releases, each the one bare statement.
func TestHoldsTimedByTime(t *testing.T) {
	t.Cleanup(pgstore.SetHoldSampleEvery(30 * time.Second))
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "cron", 1)
	define(t, e.s, "cron3", 3)
	_, err := e.pool.Exec(ctx, "SELECT setval('"+q+".tokens', 300)") // no multiple of 256 below 512
	must(t, err)
	for _, c := range []struct{ lock, release string }{{"cron", "release_fast"}, {"cron3", "release_slot"}} {
		var sampled uint64
		for run := range 2 { // two processes
			s, tr := tracedStore(t, e)
			var tags []string
			for range 3 {
				g, err := s.Acquire(ctx, req("job", time.Minute, c.lock))
				must(t, err)
				if g.Token%256 == 0 {
					t.Fatalf("token %d is timed by token", g.Token)
				}
				must(t, s.Release(ctx, g.Handle(), nil))
				for _, tag := range tr.sent() {
					if strings.HasPrefix(tag, c.release) {
						tags = append(tags, tag)
					}
				}
			}
			if len(tags) != 3 || slices.ContainsFunc(tags, func(tag string) bool { return tag != c.release }) {
				t.Fatalf("%s: store %d sent the fast releases %q, want %s thrice", c.lock, run, tags, c.release)
			}
			sampled++
			if got := statsEntry(t, e.s, c.lock); got.Holds.Count != sampled || got.Releases != 3*uint64(run+1) {
				t.Fatalf("%s: %d timed holds, %d releases after store %d, want %d and %d", c.lock, got.Holds.Count, got.Releases, run, sampled, 3*(run+1))
			}
		}
	}
}

// TestHoldsTimedByTimeOnHolderRows: the sampling by time of
// TestHoldsTimedByTime on the paths of holder rows: release_one() of a
// lock of more than 1,024 slots that another holds beside (its holds in
// holder rows), and release() of two locks at once. Each store (a cron
// job's process) times its first release of each lock whatever the token,
// and not the next within holdSampleEvery; every hold the sampled release
// ends is timed, and the counts stay exact.
func TestHoldsTimedByTimeOnHolderRows(t *testing.T) {
	t.Cleanup(pgstore.SetHoldSampleEvery(30 * time.Second))
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "wide", 2000)
	define(t, e.s, "ma", 1)
	define(t, e.s, "mb", 1)
	_, err := e.pool.Exec(ctx, "SELECT setval('"+q+".tokens', 300)") // no multiple of 256 below 512
	must(t, err)
	_, err = e.s.Acquire(ctx, req("keeper", time.Minute, "wide")) // the job's holds go to holder rows
	must(t, err)
	for _, c := range []struct {
		names   []string
		release string
	}{{[]string{"wide"}, "release_one"}, {[]string{"ma", "mb"}, ".release("}} {
		for run := range 2 { // two processes
			s, tr := tracedStore(t, e)
			for range 3 {
				g, err := s.Acquire(ctx, req("job", time.Minute, c.names...))
				must(t, err)
				if g.Token%256 == 0 {
					t.Fatalf("token %d is timed by token", g.Token)
				}
				tr.sent()
				must(t, s.Release(ctx, g.Handle(), nil))
				if got := tr.sent(); len(got) != 1 || !strings.Contains(got[0], c.release) {
					t.Fatalf("%v: the release sent %q, want %s", c.names, got, c.release)
				}
			}
			for _, name := range c.names {
				if got := statsEntry(t, e.s, name); got.Holds.Count != uint64(run+1) || got.Releases != 3*uint64(run+1) {
					t.Fatalf("%s: %d timed holds, %d releases after store %d, want %d and %d", name, got.Holds.Count,
						got.Releases, run, run+1, 3*(run+1))
				}
			}
		}
	}
}

// TestHoldsTimedByTimeOnExpiry: an expired hold taken over is timed by
// time as a released one is: the first takeover of a lock by a store (a
// cron job's process) times the expired hold whatever its token, the next
// within holdSampleEvery does not; the counts stay exact.
func TestHoldsTimedByTimeOnExpiry(t *testing.T) {
	t.Cleanup(pgstore.SetHoldSampleEvery(30 * time.Second))
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "lapse", 1)
	_, err := e.pool.Exec(ctx, "SELECT setval('"+q+".tokens', 300)") // no multiple of 256 below 512
	must(t, err)
	s, _ := tracedStore(t, e)
	for i, want := range []uint64{1, 1} {
		g, err := s.Acquire(ctx, req(fmt.Sprint("dead", i), time.Minute, "lapse"))
		must(t, err)
		must(t, e.s.Advance(ctx, 2*time.Minute))
		if g.Token%256 == 0 {
			t.Fatalf("token %d is timed by token", g.Token)
		}
		// the next caller takes the expired hold over
		g2, err := s.Acquire(ctx, req(fmt.Sprint("next", i), time.Minute, "lapse"))
		must(t, err)
		must(t, s.Release(ctx, g2.Handle(), nil))
		got := statsEntry(t, e.s, "lapse")
		if got.Expiries != uint64(i+1) || got.Holds.Count != want {
			t.Fatalf("takeover %d: %d expiries, %d timed holds; want %d and %d", i, got.Expiries, got.Holds.Count, i+1, want)
		}
	}
}

// TestHoldsTimedByToken: a hold is timed exactly when its token is a
// multiple of 256 (HoldSampling), on each way a hold ends: the fast row's
// release (release_fast.sql), a slot of the row's arrays (release_slot.sql)
// and holder rows (release(), after a grant of two locks at once). The
// token sequence is set so that the first grant of each case draws 256;
// the counts stay exact.
func TestHoldsTimedByToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "fast", 1)
	define(t, e.s, "slots", 3)
	define(t, e.s, "pair/*", 1)
	for _, c := range []struct {
		what, entry string
		names       []string
	}{{"the fast row", "fast", []string{"fast"}}, {"a slot", "slots", []string{"slots"}},
		{"holder rows", "pair/*", []string{"pair/a", "pair/b"}}} {
		_, err := e.pool.Exec(ctx, "SELECT setval('"+q+".tokens', 255)")
		must(t, err)
		var ended, timed uint64
		for range 2 {
			g, err := e.s.Acquire(ctx, req("me", time.Minute, c.names...))
			must(t, err)
			h := g.Handle()
			h.Each(func(l store.Lock) {
				ended++
				if l.Token%256 == 0 {
					timed++
				}
			})
			must(t, e.s.Release(ctx, h, nil))
		}
		got := statsEntry(t, e.s, c.entry)
		if timed == 0 || got.Releases != ended || got.Holds.Count != timed || got.HoldSampling != 256 {
			t.Fatalf("%s: %d releases, %d timed holds, sampling %d; want %d, %d (> 0), 256",
				c.what, got.Releases, got.Holds.Count, got.HoldSampling, ended, timed)
		}
		var inBuckets uint64
		for _, n := range got.Holds.Buckets {
			inBuckets += n
		}
		if inBuckets != got.Holds.Count {
			t.Fatalf("%s: %d timed holds in buckets, Count %d", c.what, inBuckets, got.Holds.Count)
		}
	}
}

// TestUntimedRelease: the bare release (release_fast.sql, release_slot.sql,
// one statement whatever the token) of a hold whose token is timed (a
// multiple of 256) counts the release and the hold's time; that of another
// hold counts the release alone; that of a ref alone (token 0, any hold: not
// the holder's own) is release()'s, which tells the holder's node (lost()).
// The counts stay exact on each.
func TestUntimedRelease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "one", 1)
	define(t, e.s, "three", 3)
	s, tr := tracedStore(t, e)
	for _, c := range []struct{ lock, acquire, release string }{
		{"one", "acquire_fast", "release_fast"}, {"three", "acquire_slot", "release_slot"}} {
		var ended, timed uint64
		pair := func(byRef bool) int64 {
			g, err := s.Acquire(ctx, req("me", time.Minute, c.lock))
			must(t, err)
			h := g.Handle()
			if byRef {
				h.Token = 0
			}
			must(t, s.Release(ctx, h, nil))
			ended++
			if g.Token%256 == 0 {
				timed++
			}
			return g.Token
		}
		pair(false) // the lock's row is made; the store sees it fast
		tr.sent()
		_, err := e.pool.Exec(ctx, "SELECT setval('"+q+".tokens', 255)")
		must(t, err)
		// tokens 256 (timed), 257, and 258 released by ref alone
		for i, want := range []string{c.release, c.release, ""} {
			byRef := i == 2
			tok := pair(byRef)
			what := fmt.Sprintf("%s: token %d, by ref %v", c.lock, tok, byRef)
			if byRef {
				if got := tr.sent(); len(got) != 2 || got[0] != c.acquire || !strings.Contains(got[1], ".release(") {
					t.Fatalf("%s: sent %q, want %q and release()", what, got, c.acquire)
				}
				continue
			}
			wantSent(t, tr, what, c.acquire, want)
		}
		got := statsEntry(t, e.s, c.lock)
		if got.Releases != ended || got.Holds.Count != timed || timed == 0 {
			t.Fatalf("%s: %d releases, %d timed holds; want %d, %d (> 0)", c.lock, got.Releases, got.Holds.Count,
				ended, timed)
		}
	}
}
