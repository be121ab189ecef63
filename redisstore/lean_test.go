package redisstore_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
)

// commands returns the calls of every command but FCALL and those of
// the library's loading (INFO commandstats since the last reset).
func commands(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || name == "fcall" || name == "config|resetstat" || name == "info" {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		out[name] = n
	}
	return out
}

// TestUncontendedPairRunsSixCommands: on a server of its own, a
// TryAcquire and Release of a lock nobody else wants runs six commands
// inside its two function calls (the definition, the record with the
// last token, the clock and one write; the record and one write), writes
// no counter field, and the counters are exact after it.
func TestUncontendedPairRunsSixCommands(t *testing.T) {
	srv := startServer(t)
	c := srv.Client()
	defer func() { _ = c.Close() }()
	l := sleeplock.New(open(t, c, "p:"))
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	if err := l.Define(ctx, "f/*", 1); err != nil {
		t.Fatal(err)
	}
	pair := func() {
		x, err := l.TryAcquire(ctx, "f/x", sleeplock.NoKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair() // the library loaded, the record made
	for range 3 {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		pair()
		got, n := commands(t, c), 0
		for _, k := range got {
			n += k
		}
		if n != 6 || got["hmget"] != 2 || got["time"] != 1 || got["hset"] != 2 || got["hget"] != 1 {
			t.Fatalf("an uncontended pair ran %v, want 2 HMGET, TIME, HSET, then HGET, HSET", got)
		}
	}
	// The pairs wrote no counter: their counts are in the record's tally,
	// beside the last token, until Stats counts them.
	fields, err := c.HKeys(ctx, "p:{f}:s").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fields)
	if !slices.Equal(fields, []string{"", "f/x"}) {
		t.Fatalf("the state hash after 4 uncontended pairs has fields %q, want only the record and the last token", fields)
	}
	st, err := l.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Acquisitions != 4 || st[0].Releases != 4 || st[0].Holds.Count != 4 {
		t.Fatalf("stats after 4 pairs: %+v", st)
	}
	// Stats counted the hold time the last release left in the record:
	// the record is gone.
	if n, err := c.HExists(ctx, "p:{f}:s", "f/x").Result(); err != nil || n {
		t.Fatalf("the record of a released lock after Stats: %v %v", n, err)
	}
}
