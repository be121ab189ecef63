package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
)

// TestOwnReleaseNotNotified: the holder's own release (the hot pair's)
// sends no notification of a lost hold; a release by another naming the
// ref sends one. (That the holder learns of it: conformance
// Loss/SignalledAcrossNodes.)
func TestOwnReleaseNotNotified(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	define(t, e.s, "own", 1)
	lc, err := pgx.Connect(ctx, dbURL())
	must(t, err)
	defer lc.Close(context.Background())
	_, err = lc.Exec(ctx, "LISTEN "+pgx.Identifier{pgstore.ChannelOf(e.schema)}.Sanitize())
	must(t, err)
	lost := func() int {
		_, err := e.pool.Exec(ctx, "SELECT pg_notify($1, 'marker')", pgstore.ChannelOf(e.schema))
		must(t, err)
		n := 0
		for {
			m, err := lc.WaitForNotification(ctx)
			must(t, err)
			if m.Payload == "marker" {
				return n
			}
			if strings.HasPrefix(m.Payload, "e\t") {
				n++
			}
		}
	}
	for range 2 { // the first release finds the row slow, the second fast
		g, err := e.s.Acquire(ctx, req("holder", time.Minute, "own"))
		must(t, err)
		must(t, e.s.Release(ctx, g.Handle(), nil))
	}
	if n := lost(); n != 0 {
		t.Fatalf("the holder's own releases sent %d notifications of a lost hold", n)
	}
	g, err := e.s.Acquire(ctx, req("holder", time.Minute, "own"))
	must(t, err)
	h := g.Handle()
	h.Token = 0
	must(t, e.node(t).Release(ctx, h, nil))
	if n := lost(); n != 1 {
		t.Fatalf("a release naming the ref sent %d notifications of a lost hold, want 1", n)
	}
}
