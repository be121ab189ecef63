package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// benchEnv is a migrated schema on a pool big enough for 32 clients, plus
// the peer: a bare single-statement upsert lease on a table of the same
// kind (durable or UNLOGGED) in the same schema.
type benchEnv struct {
	pool   *pgxpool.Pool
	s      *pgstore.Store
	ident  string
	upsert string
	delete string
}

func newBenchEnv(b *testing.B, unlogged bool) *benchEnv {
	b.Helper()
	pool := newPoolN(b, nil, 40)
	schema := newSchema(b, pool)
	ctx := context.Background()
	opts := []pgstore.Option{pgstore.WithSchema(schema)}
	kind := ""
	if unlogged {
		opts = append(opts, pgstore.Unlogged())
		kind = "UNLOGGED"
	}
	must(b, pgstore.Migrate(ctx, pool, opts...))
	s, err := pgstore.New(ctx, pool, opts...)
	must(b, err)
	b.Cleanup(func() { _ = s.Close() })
	ident := pgx.Identifier{schema}.Sanitize()
	_, err = pool.Exec(ctx, "CREATE "+kind+" TABLE "+ident+".peer (name text PRIMARY KEY, ref text NOT NULL, expires timestamptz NOT NULL)")
	must(b, err)
	return &benchEnv{
		pool: pool, s: s, ident: ident,
		upsert: "INSERT INTO " + ident + ".peer AS p (name, ref, expires) VALUES ($1, $2, now() + interval '1 minute') " +
			"ON CONFLICT (name) DO UPDATE SET ref = excluded.ref, expires = excluded.expires WHERE p.expires < now() RETURNING true",
		delete: "DELETE FROM " + ident + ".peer WHERE name = $1 AND ref = $2",
	}
}

// peerTry is the peer's try: true when granted.
func (e *benchEnv) peerTry(ctx context.Context, name, ref string) (bool, error) {
	var ok bool
	err := e.pool.QueryRow(ctx, e.upsert, name, ref).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

// parallel runs b.N calls of f spread over clients goroutines.
func parallel(b *testing.B, clients int, f func(client int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := f(c); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkPairs: TryAcquire+Release pairs, each client on its own lock,
// against the bare upsert lease, durable and UNLOGGED.
func BenchmarkPairs(b *testing.B) {
	for _, mode := range []string{"durable", "unlogged"} {
		for _, clients := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/clients=%d/store", mode, clients), func(b *testing.B) {
				e := newBenchEnv(b, mode == "unlogged")
				ctx := context.Background()
				define(b, e.s, "b/*", 1)
				parallel(b, clients, func(c int) error {
					g, err := e.s.Acquire(ctx, req("r"+strconv.Itoa(c), time.Minute, "b/"+strconv.Itoa(c)))
					if err != nil {
						return err
					}
					return e.s.Release(ctx, g.Handle(), nil)
				})
			})
			b.Run(fmt.Sprintf("%s/clients=%d/upsert", mode, clients), func(b *testing.B) {
				e := newBenchEnv(b, mode == "unlogged")
				ctx := context.Background()
				parallel(b, clients, func(c int) error {
					name, ref := "b/"+strconv.Itoa(c), "r"+strconv.Itoa(c)
					ok, err := e.peerTry(ctx, name, ref)
					if err != nil || !ok {
						return fmt.Errorf("upsert: %v %w", ok, err)
					}
					_, err = e.pool.Exec(ctx, e.delete, name, ref)
					return err
				})
			})
		}
	}
}

// BenchmarkHotLock: 32 clients trying one lock that another holds: every
// try is refused.
func BenchmarkHotLock(b *testing.B) {
	b.Run("store", func(b *testing.B) {
		e := newBenchEnv(b, false)
		ctx := context.Background()
		define(b, e.s, "hot", 1)
		_, err := e.s.Acquire(ctx, req("holder", time.Hour, "hot"))
		must(b, err)
		parallel(b, 32, func(c int) error {
			_, err := e.s.Acquire(ctx, req("r"+strconv.Itoa(c), time.Minute, "hot"))
			if !errors.Is(err, store.ErrUnavailable) {
				return fmt.Errorf("not refused: %w", err)
			}
			return nil
		})
	})
	b.Run("upsert", func(b *testing.B) {
		e := newBenchEnv(b, false)
		ctx := context.Background()
		ok, err := e.peerTry(ctx, "hot", "holder")
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		_, err = e.pool.Exec(ctx, "UPDATE "+e.ident+".peer SET expires = now() + interval '1 hour'")
		must(b, err)
		parallel(b, 32, func(c int) error {
			ok, err := e.peerTry(ctx, "hot", "r"+strconv.Itoa(c))
			if err != nil || ok {
				return fmt.Errorf("not refused: %v %w", ok, err)
			}
			return nil
		})
	})
}

// BenchmarkRows: one client's latency with 1,000, 100,000 and 1,000,000
// held locks in the tables: a TryAcquire+Release pair on a new member of a
// family, and a refused TryAcquire of a held one.
func BenchmarkRows(b *testing.B) {
	for _, rows := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			e := newBenchEnv(b, false)
			ctx := context.Background()
			define(b, e.s, "load/*", 1)
			_, err := e.pool.Exec(ctx, "INSERT INTO "+e.ident+".locks (name) SELECT 'load/' || g FROM generate_series(1, $1::int) g", rows)
			must(b, err)
			_, err = e.pool.Exec(ctx, "INSERT INTO "+e.ident+".holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold) "+
				"SELECT 'load/' || g, 'r' || g, 'turn', nextval('"+e.ident+".tokens'), 1, 1, now(), now(), now() + interval '1 hour', 3600000000, 0 "+
				"FROM generate_series(1, $1::int) g", rows)
			must(b, err)
			_, err = e.pool.Exec(ctx, "ANALYZE "+e.ident+".locks, "+e.ident+".holders")
			must(b, err)
			b.Run("pair", func(b *testing.B) {
				i := 0
				for b.Loop() {
					i++
					g, err := e.s.Acquire(ctx, req("x", time.Minute, "load/new"+strconv.Itoa(i)))
					must(b, err)
					must(b, e.s.Release(ctx, g.Handle(), nil))
				}
			})
			b.Run("refused", func(b *testing.B) {
				i := 0
				for b.Loop() {
					i++
					_, err := e.s.Acquire(ctx, req("x", time.Minute, "load/"+strconv.Itoa(1+i%rows)))
					if !errors.Is(err, store.ErrUnavailable) {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
