package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
	"github.com/sleeplock/sleeplock/store"
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := pgtest.EnsureDatabase(ctx, dbURL())
	cancel()
	if err != nil {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "test database unreachable: %v\n", err)
			os.Exit(1)
		}
		skipReason = err.Error()
		fmt.Fprintf(os.Stderr, "\n*** SKIPPING every PostgreSQL test of pgstore: %v (set SLEEPLOCK_TEST_DATABASE_URL) ***\n\n", err)
	}
	// The tests count timed holds and the statements sent by the token
	// rule alone; TestHoldsTimedByTime turns the sampling by time on.
	pgstore.SetHoldSampleEvery(0)
	goleak.VerifyTestMain(m)
}

// skipReason is why the database cannot be used, "" when it can.
var skipReason string

// dbURL is the test database.
func dbURL() string { return pgtest.URL() }

// counter is a pgx tracer that counts the statements sent to the server.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// newPool connects to the test database, or skips (fails under CI) when it
// is unreachable. The pool is closed when the test ends.
func newPool(t testing.TB, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	return newPoolN(t, tracer, 8)
}

// newPoolN is newPool with at most maxConns connections.
func newPoolN(t testing.TB, tracer pgx.QueryTracer, maxConns int32) *pgxpool.Pool {
	t.Helper()
	if skipReason != "" {
		t.Skipf("test database unreachable (set SLEEPLOCK_TEST_DATABASE_URL): %s", skipReason)
	}
	return pgtest.Pool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = maxConns
		pgstore.ConfigurePool(cfg)
		cfg.ConnConfig.Tracer = tracer
	})
}

// newSchema returns a fresh schema name, dropped when the test ends.
func newSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sleeplock_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		// A statement a closed store left running on the server (the
		// server ends it when it next writes to the gone client) may
		// take the tables in another order than the drop: a deadlock,
		// which the server rolls back; the drop is tried again.
		var err error
		for range 5 {
			_, err = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
			if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "40P01" {
				break
			}
		}
		if err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return name
}

// env is one test's database: a pool, a migrated schema and a store.
type env struct {
	pool   *pgxpool.Pool
	schema string
	s      *pgstore.Store
	trace  *counter
}

func newEnv(t testing.TB, opts ...pgstore.Option) *env {
	t.Helper()
	e := &env{trace: &counter{}}
	e.pool = newPool(t, e.trace)
	e.schema = newSchema(t, e.pool)
	opts = append([]pgstore.Option{pgstore.WithSchema(e.schema), pgstore.WithPollInterval(5 * time.Millisecond)}, opts...)
	if err := pgstore.Migrate(context.Background(), e.pool, opts...); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(context.Background(), e.pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e.s = s
	return e
}

// node returns another store on the same schema through a pool of its own:
// another node of the cluster, with opts after the defaults.
func (e *env) node(t testing.TB, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, _ := e.nodePool(t, opts...)
	return s
}

// nodePool is node with its pool.
func (e *env) nodePool(t testing.TB, opts ...pgstore.Option) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t, nil)
	opts = append([]pgstore.Option{pgstore.WithSchema(e.schema), pgstore.WithPollInterval(5 * time.Millisecond)}, opts...)
	s, err := pgstore.New(context.Background(), pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, pool
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func define(t testing.TB, s store.Store, name string, slots int) {
	t.Helper()
	if _, err := s.Define(context.Background(), name, slots, nil); err != nil {
		t.Fatal(err)
	}
}

// req is a request for names by ref with a TTL.
func req(ref string, ttl time.Duration, names ...string) store.AcquireRequest {
	return store.AcquireRequest{Name: names[0], More: names[1:], Ref: store.RefOf(ref), TTL: ttl}
}

// recorder keeps events.
type recorder struct {
	ch chan store.Event
}

func newRecorder() *recorder { return &recorder{ch: make(chan store.Event, 1000)} }

func (r *recorder) Emit(e store.Event) { r.ch <- e }

func (r *recorder) drain() []store.Event {
	var out []store.Event
	for {
		select {
		case e := <-r.ch:
			out = append(out, e)
		default:
			return out
		}
	}
}
