package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
)

// TestLossSignalledAcrossNodes: a hold released by another node (naming
// its ref), released there as stale or deleted there with force ends the
// holder's lease at once, without a renewal (the lease has no keep-alive
// and an hour's TTL), on a lock of one slot and on one of several (its
// holds in the row's arrays), as redisstore's test of the same name.
func TestLossSignalledAcrossNodes(t *testing.T) {
	e := newEnv(t)
	la, lb := sleeplock.New(e.s), sleeplock.New(e.node(t))
	defer func() { _ = la.Close(); _ = lb.Close() }()
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		slots int
		end   func(name string) error
	}{
		{"released", 1, func(name string) error {
			op, err := lb.LeaseOf("worker-1", []string{name})
			if err == nil {
				err = op.Release(ctx)
			}
			return err
		}},
		{"released-slots", 3, func(name string) error {
			op, err := lb.LeaseOf("worker-1", []string{name})
			if err == nil {
				err = op.Release(ctx)
			}
			return err
		}},
		{"stale", 1, func(name string) error {
			time.Sleep(10 * time.Millisecond)
			ok, err := lb.ReleaseStale(ctx, "worker-1", []string{name}, time.Millisecond)
			if err == nil && !ok {
				err = errors.New("not released as stale")
			}
			return err
		}},
		{"deleted", 1, func(name string) error {
			_, err := lb.Delete(ctx, name, sleeplock.Force())
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			must(t, la.Define(ctx, c.name, c.slots))
			a, err := la.TryAcquire(ctx, c.name, sleeplock.Ref("worker-1"), sleeplock.TTL(time.Hour),
				sleeplock.NoKeepAlive())
			must(t, err)
			waitFor(t, "the holder's store listening", e.s.Listening)
			must(t, c.end(c.name))
			select {
			case <-a.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the holder did not learn of its loss")
			}
			if !errors.Is(a.Err(), sleeplock.ErrLeaseLost) {
				t.Fatalf("Err = %v, want ErrLeaseLost", a.Err())
			}
		})
	}
}

// TestOwnReleaseNotNotified: the holder's own release (the hot pair's)
// sends no notification of a lost hold; a release by another naming the
// ref sends one.
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
