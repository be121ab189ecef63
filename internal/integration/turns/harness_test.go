package turns_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/fakeclock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/turns"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The times of the tests: a turn's TTL and a click's hold, as in the reference's
// deployment (a click blocks turns for 30 s unless kept).
const (
	ttl  = 10 * time.Minute
	hold = 30 * time.Second
)

// factory makes the nodes of one cluster over one store.
type factory struct {
	name string
	// newNodes returns n Locks that share one lock state, each standing
	// for a node, and a function that makes d pass on the store's clock
	// without waiting. With separate is true the Locks have stores (and
	// connection pools) of their own, so one may be closed alone.
	newNodes func(t *testing.T, n int) (locks []*sleeplock.Locks, advance func(d time.Duration), separate bool)
	// app, when not nil, returns a database handle on the test's schema and
	// that schema's name, for tests of the application's own tables.
	app func(t *testing.T, l *sleeplock.Locks) (db appDB, schema string)
	// pinned, when not nil, reports how many connections of node l's pool
	// are in use.
	pinned func(l *sleeplock.Locks) int
}

// appDB runs statements on the application's database.
type appDB interface {
	Exec(ctx context.Context, sql string, args ...any) error
	Rows(ctx context.Context, sql string) ([][]any, error)
}

// factories are the stores every test runs on; pg_test.go adds PostgreSQL.
var factories = []factory{{
	name: "memory",
	newNodes: func(t *testing.T, n int) ([]*sleeplock.Locks, func(time.Duration), bool) {
		clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		s := memstore.New(memstore.WithClock(clock))
		t.Cleanup(func() { _ = s.Close() })
		locks := make([]*sleeplock.Locks, n)
		for i := range locks {
			locks[i] = sleeplock.New(s)
		}
		return locks, clock.Advance, false
	},
}}

// cluster is one test's nodes over one store.
type cluster struct {
	t        *testing.T
	f        factory
	locks    []*sleeplock.Locks
	nodes    []*turns.Turns
	advance  func(time.Duration)
	separate bool
	crashed  []bool
}

// each runs test on every store, with a cluster of n nodes.
func each(t *testing.T, n int, test func(t *testing.T, c *cluster)) {
	for _, f := range factories {
		t.Run(f.name, func(t *testing.T) {
			test(t, newCluster(t, f, n))
		})
	}
}

func newCluster(t *testing.T, f factory, n int) *cluster {
	t.Helper()
	locks, advance, separate := f.newNodes(t, n)
	c := &cluster{t: t, f: f, locks: locks, advance: advance, separate: separate, crashed: make([]bool, n)}
	for _, l := range locks {
		c.nodes = append(c.nodes, turns.New(l, turns.WithTTL(ttl)))
	}
	must(t, c.nodes[0].Define(t.Context()))
	if separate {
		t.Cleanup(func() {
			for _, l := range c.locks {
				_ = l.Close()
			}
		})
	}
	return c
}

// node returns node i's Turns.
func (c *cluster) node(i int) *turns.Turns { return c.nodes[i] }

// crash makes node i go down mid-turn: it releases nothing, and on stores
// with a pool per node its connections close.
func (c *cluster) crash(i int) {
	c.crashed[i] = true
	if c.separate {
		_ = c.locks[i].Close()
	}
}

// state returns the holders of a lock.
func (c *cluster) state(name string) sleeplock.State {
	c.t.Helper()
	i := 0
	for c.crashed[i] {
		i++
	}
	st, err := c.locks[i].StateDetail(c.t.Context(), name)
	must(c.t, err)
	return st
}

// holder returns the ref holding a lock, "" when free.
func (c *cluster) holder(name string) string {
	c.t.Helper()
	st := c.state(name)
	switch len(st.Holders) {
	case 0:
		return ""
	case 1:
		return st.Holders[0].Ref
	default:
		c.t.Fatalf("%d holders of %s", len(st.Holders), name)
		return ""
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

func wantBool(t *testing.T, what string, got bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}
