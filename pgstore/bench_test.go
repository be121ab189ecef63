package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
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
	return newBenchEnvAsync(b, unlogged, false)
}

// newBenchEnvAsync is newBenchEnv with synchronous_commit off on the pool
// when async: the commit does not wait for the WAL flush, so the figures
// show the CPU cost alone (steadier on a shared machine).
func newBenchEnvAsync(b *testing.B, unlogged, async bool) *benchEnv {
	b.Helper()
	var pool *pgxpool.Pool
	if async {
		cfg, err := pgxpool.ParseConfig(dbURL())
		must(b, err)
		cfg.MaxConns = 40
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
		must(b, err)
		b.Cleanup(pool.Close)
	} else {
		pool = newPoolN(b, nil, 40)
	}
	schema := newSchema(b, pool)
	ctx := context.Background()
	opts := []pgstore.Option{pgstore.WithSchema(schema)}
	kind := ""
	if unlogged {
		opts = append(opts, pgstore.WithUnlogged())
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

// warmUp runs one call of f per client, all at once, before the timer
// starts, and reports whether they all succeeded: the figures are then of
// the steady state, not of the pool dialling its connections and each new
// server process planning the statements and compiling the functions at
// its first calls (tens of ms each), which, with a fresh schema for each
// b.N the framework tries, would weigh on a short run's rate and make its
// p99.
func warmUp(b *testing.B, clients int, f func(client int) error) bool {
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			if err := f(c); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	return !b.Failed()
}

// parallel runs b.N calls of f spread over clients goroutines, after
// warmUp, and reports the WAL the server wrote per call (wal-B/op: of the
// whole server, so exact on a server of the benchmark's own).
func parallel(b *testing.B, clients int, f func(client int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	if !warmUp(b, clients, f) {
		return
	}
	wal0 := walInsertLSN(b)
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
	b.ReportMetric(float64(walInsertLSN(b)-wal0)/float64(b.N), "wal-B/op")
}

// walInsertLSN is the server's WAL insert position, in bytes.
func walInsertLSN(b *testing.B) int64 {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL())
	must(b, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var lsn int64
	must(b, conn.QueryRow(context.Background(), "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").Scan(&lsn))
	return lsn
}

// BenchmarkPairs: TryAcquire+Release pairs, each client on its own lock,
// against the bare upsert lease, durable, UNLOGGED, and durable with
// synchronous_commit off ("async").
func BenchmarkPairs(b *testing.B) {
	for _, mode := range []string{"durable", "unlogged", "async"} {
		for _, clients := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/clients=%d/store", mode, clients), func(b *testing.B) {
				e := newBenchEnvAsync(b, mode == "unlogged", mode == "async")
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
				e := newBenchEnvAsync(b, mode == "unlogged", mode == "async")
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

// BenchmarkWeightedPair: TryAcquire+Release of a lock of 4 slots, each
// client on its own lock, durable: weight 1 (the bare UPDATEs of the row's
// slot arrays) against weight 2 (the bare UPDATEs of the row in scalar
// mode: acquire_weighted.sql, release_fast.sql), side by side. Issue 21's
// target: the weighted pair ≥ 0.9× the weight-1 pair.
func BenchmarkWeightedPair(b *testing.B) {
	for _, clients := range []int{1, 8} {
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("clients=%d/weight=%d", clients, w), func(b *testing.B) {
				e := newBenchEnv(b, false)
				ctx := context.Background()
				define(b, e.s, "w/*", 4)
				parallel(b, clients, func(c int) error {
					r := req("r"+strconv.Itoa(c), time.Minute, "w/"+strconv.Itoa(c))
					r.Weight = w
					g, err := e.s.Acquire(ctx, r)
					if err != nil {
						return err
					}
					return e.s.Release(ctx, g.Handle(), nil)
				})
			})
		}
	}
}

// BenchmarkSlots: as many clients as the lock has slots, each taking a
// slot of the one lock (TryAcquire, never refused) and giving it back,
// durable. Every grant and release is of the lock's row (its slot arrays
// ), so they take turns on it: compare with Pairs at as
// many clients, each on its own lock.
func BenchmarkSlots(b *testing.B) {
	for _, slots := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			e := newBenchEnv(b, false)
			ctx := context.Background()
			define(b, e.s, "many", slots)
			parallel(b, slots, func(c int) error {
				g, err := e.s.Acquire(ctx, req("r"+strconv.Itoa(c), time.Minute, "many"))
				if err != nil {
					return err
				}
				return e.s.Release(ctx, g.Handle(), nil)
			})
		})
	}
}

// BenchmarkHotLock: 8 and 32 clients trying one lock that another holds:
// every try is refused.
func BenchmarkHotLock(b *testing.B) {
	for _, clients := range []int{8, 32} {
		b.Run(fmt.Sprintf("clients=%d/store", clients), func(b *testing.B) {
			e := newBenchEnv(b, false)
			ctx := context.Background()
			define(b, e.s, "hot", 1)
			_, err := e.s.Acquire(ctx, req("holder", time.Hour, "hot"))
			must(b, err)
			parallel(b, clients, func(c int) error {
				_, err := e.s.Acquire(ctx, req("r"+strconv.Itoa(c), time.Minute, "hot"))
				if !errors.Is(err, store.ErrUnavailable) {
					return fmt.Errorf("not refused: %w", err)
				}
				return nil
			})
		})
		b.Run(fmt.Sprintf("clients=%d/upsert", clients), func(b *testing.B) {
			e := newBenchEnv(b, false)
			ctx := context.Background()
			ok, err := e.peerTry(ctx, "hot", "holder")
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			_, err = e.pool.Exec(ctx, "UPDATE "+e.ident+".peer SET expires = now() + interval '1 hour'")
			must(b, err)
			parallel(b, clients, func(c int) error {
				ok, err := e.peerTry(ctx, "hot", "r"+strconv.Itoa(c))
				if err != nil || ok {
					return fmt.Errorf("not refused: %v %w", ok, err)
				}
				return nil
			})
		})
	}
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

// handoffNodes returns n stores on one migrated schema, each with a pool of
// its own (nodes of a cluster), listening for wake-ups unless poll.
func handoffNodes(b *testing.B, n int, poll bool) []*pgstore.Store {
	b.Helper()
	pool := newPoolN(b, nil, 40)
	schema := newSchema(b, pool)
	ctx := context.Background()
	must(b, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	var out []*pgstore.Store
	for range n {
		opts := []pgstore.Option{pgstore.WithSchema(schema)}
		if poll {
			opts = append(opts, pgstore.WithoutListen())
		}
		s, err := pgstore.New(ctx, newPoolN(b, nil, 40), opts...)
		must(b, err)
		b.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

// quantile returns the q-quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// BenchmarkHandoff: waiters spread over two nodes take turns on a 1-slot
// lock (hold 0): the time from a holder's Release call to the next grant,
// on whichever node, with 1 and 10 waiters queued. "listen" is the default
// (woken by NOTIFY); "poll" is WithoutListen, the fallback.
func BenchmarkHandoff(b *testing.B) {
	for _, waiters := range []int{1, 10} {
		for _, mode := range []string{"listen", "poll"} {
			b.Run(fmt.Sprintf("waiters=%d/%s", waiters, mode), func(b *testing.B) {
				if os.Getenv("HANDOFF_NOTIFY_ONLY") != "" {
					defer pgstore.SetListenPoll(time.Hour)()
				}
				nodes := handoffNodes(b, 2, mode == "poll")
				ctx := context.Background()
				define(b, nodes[0], "h", 1)
				var released atomic.Int64 // UnixNano of the last Release call
				var mu sync.Mutex
				var lat []time.Duration
				var next atomic.Int64
				var wg sync.WaitGroup
				if !warmUp(b, waiters+1, func(c int) error {
					r := req("c"+strconv.Itoa(c), time.Minute, "h")
					r.Wait = true
					g, err := nodes[c%2].Acquire(ctx, r)
					if err != nil {
						return err
					}
					return nodes[c%2].Release(ctx, g.Handle(), nil)
				}) {
					return
				}
				b.ResetTimer()
				for c := range waiters + 1 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s := nodes[c%2]
						for next.Add(1) <= int64(b.N) {
							r := req("c"+strconv.Itoa(c), time.Minute, "h")
							r.Wait = true
							g, err := s.Acquire(ctx, r)
							if err != nil {
								b.Error(err)
								return
							}
							if t0 := released.Load(); t0 != 0 {
								mu.Lock()
								lat = append(lat, time.Since(time.Unix(0, t0)))
								mu.Unlock()
							}
							released.Store(time.Now().UnixNano())
							if err := s.Release(ctx, g.Handle(), nil); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(quantile(lat, 0.5).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(quantile(lat, 0.99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "grants/s")
			})
		}
	}
}

// BenchmarkCycle: clients cycling through one 1-slot lock with a blocking
// Acquire and a Release (hold 0), spread over two nodes: grants per second
// with 32 clients against 1.
func BenchmarkCycle(b *testing.B) {
	for _, clients := range []int{1, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			nodes := handoffNodes(b, 2, false)
			ctx := context.Background()
			define(b, nodes[0], "cy", 1)
			parallel(b, clients, func(c int) error {
				s := nodes[c%2]
				r := req("c"+strconv.Itoa(c), time.Minute, "cy")
				r.Wait = true
				g, err := s.Acquire(ctx, r)
				if err != nil {
					return err
				}
				return s.Release(ctx, g.Handle(), nil)
			})
		})
	}
}

// seqRecorder keeps the Seq of each ref's waiting and acquired events.
type seqRecorder struct {
	mu       sync.Mutex
	waited   map[string]uint64
	acquired map[string]uint64
}

func (r *seqRecorder) Emit(e store.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Type {
	case store.EventWaiting:
		r.waited[e.Ref] = e.Seq
	case store.EventAcquired:
		r.acquired[e.Ref] = e.Seq
	}
}

// BenchmarkWaiters1000: 1,000 waiters on one held 1-slot lock across 4
// stores (pools of 20). It reports the statements the stores send per
// second while the waiters wait (the database's work: heartbeats and the
// heads' checks), then the drain rate once the holder releases (each
// waiter releases at once, hold 0), and checks the grants kept ticket
// order. Run it with -benchtime 1x.
func BenchmarkWaiters1000(b *testing.B) {
	const waiters = 1000
	for b.Loop() {
		pool := newPoolN(b, nil, 20)
		schema := newSchema(b, pool)
		ctx := context.Background()
		must(b, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
		tr := &counter{}
		app := "sleeplock-bench-" + schema
		nodes := appNodes(b, schema, app, tr, 4)
		cpu := func() time.Duration { return backendCPU(b, pool, app) }
		define(b, nodes[0], "crowd", 1)
		h, err := nodes[0].Acquire(ctx, req("holder", time.Hour, "crowd"))
		must(b, err)
		rec := &seqRecorder{waited: map[string]uint64{}, acquired: map[string]uint64{}}
		var wg sync.WaitGroup
		start := time.Now()
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := nodes[i%4]
				r := req("w"+strconv.Itoa(i), time.Minute, "crowd")
				r.Wait, r.Events = true, rec
				g, err := s.Acquire(ctx, r)
				if err != nil {
					b.Error(err)
					return
				}
				if err := s.Release(ctx, g.Handle(), nil); err != nil {
					b.Error(err)
				}
			}()
		}
		last := 0
		waitForB(b, func() bool {
			st, err := nodes[0].State(ctx, "crowd", false)
			if st.Waiting/100 != last/100 {
				b.Logf("%v: %d waiting", time.Since(start), st.Waiting)
			}
			last = st.Waiting
			return err == nil && st.Waiting == waiters
		})
		queued := time.Since(start)
		n0, c0 := tr.n.Load(), cpu()
		t0 := time.Now()
		time.Sleep(5 * time.Second) // the measured wait
		idle := float64(tr.n.Load()-n0) / time.Since(t0).Seconds()
		b.ReportMetric(pctOfCore(cpu()-c0, time.Since(t0)), "pg-cpu-%-waiting")
		t1 := time.Now()
		must(b, nodes[0].Release(ctx, h.Handle(), nil))
		wg.Wait()
		drain := time.Since(t1)
		b.ReportMetric(queued.Seconds(), "s-to-queue")
		b.ReportMetric(idle, "stmts/s-waiting")
		b.ReportMetric(waiters/drain.Seconds(), "drain-grants/s")
		// For scale: one client's TryAcquire+Release pairs on a lock of
		// its own, on the same stores (the drain's target is this rate).
		define(b, nodes[0], "alone", 1)
		t2 := time.Now()
		for range 300 {
			g, err := nodes[0].Acquire(ctx, req("alone", time.Minute, "alone"))
			must(b, err)
			must(b, nodes[0].Release(ctx, g.Handle(), nil))
		}
		b.ReportMetric(300/time.Since(t2).Seconds(), "pair/s")
		refs := make([]string, 0, waiters)
		for ref := range rec.waited {
			refs = append(refs, ref)
		}
		slices.SortFunc(refs, func(x, y string) int { return compareU(rec.waited[x], rec.waited[y]) })
		for i := 1; i < len(refs); i++ {
			if rec.acquired[refs[i]] < rec.acquired[refs[i-1]] {
				b.Fatalf("%s queued after %s but was granted before it", refs[i], refs[i-1])
			}
		}
	}
}

// appNodes returns n stores on schema, each with a pool of 20 of its own
// whose connections (the listener's too) have application_name app and
// send their statements through tr; closed when the benchmark ends.
func appNodes(b *testing.B, schema, app string, tr pgx.QueryTracer, n int) []*pgstore.Store {
	b.Helper()
	ctx := context.Background()
	var nodes []*pgstore.Store
	for range n {
		cfg, err := pgxpool.ParseConfig(dbURL())
		must(b, err)
		cfg.MaxConns = 20
		cfg.ConnConfig.Tracer = tr
		cfg.ConnConfig.RuntimeParams["application_name"] = app
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		must(b, err)
		b.Cleanup(p.Close)
		s, err := pgstore.New(ctx, p, pgstore.WithSchema(schema))
		must(b, err)
		b.Cleanup(func() { _ = s.Close() })
		nodes = append(nodes, s)
	}
	return nodes
}

// backendCPU sums the CPU time of the backends whose application_name is
// app (the server runs on this machine): the first field of
// /proc/PID/schedstat, in nanoseconds. (/proc/PID/stat counts whole clock
// ticks of 10 ms per backend: over the dozen busy backends of a minute's
// window, up to ± 0.2 % of a core.)
func backendCPU(b *testing.B, pool *pgxpool.Pool, app string) time.Duration {
	b.Helper()
	rows, err := pool.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	must(b, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(b, err)
	var ns int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			continue // gone meanwhile, or another machine
		}
		f := strings.Fields(string(raw))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			ns += n
		}
	}
	return time.Duration(ns)
}

// pctOfCore is CPU time spent over elapsed wall time, in % of a core.
func pctOfCore(cpu, elapsed time.Duration) float64 {
	return 100 * cpu.Seconds() / elapsed.Seconds()
}

func compareU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// waitForB polls cond (a state) for up to three minutes.
func waitForB(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkTakeover: a holder on one node dies (stops renewing; TTL
// 300ms) while a caller waits on another node: the time from the dead
// lease's expiry (the database's clock, on this machine) to the waiter's
// grant. Run it with -benchtime 10x or so.
func BenchmarkTakeover(b *testing.B) {
	nodes := handoffNodes(b, 2, false)
	ctx := context.Background()
	define(b, nodes[0], "t", 1)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		dead, err := nodes[0].Acquire(ctx, req("dead"+strconv.Itoa(i), 300*time.Millisecond, "t"))
		must(b, err)
		r := req("next", time.Minute, "t")
		r.Wait = true
		g, err := nodes[1].Acquire(ctx, r)
		must(b, err)
		lat = append(lat, time.Since(dead.Expires))
		must(b, nodes[1].Release(ctx, g.Handle(), nil))
	}
	b.ReportMetric(float64(quantile(lat, 0.5).Microseconds())/1000, "p50-ms-after-expiry")
	b.ReportMetric(float64(quantile(lat, 1).Microseconds())/1000, "max-ms-after-expiry")
}

// BenchmarkWideLock: on a lock that one reader holds, another reader's
// TryAcquire+Release (a second holder of the lock, as `sleeplock run -s`
// takes it), and State of the lock, for a lock of 2, 1,024, 1,025 and
// 1,000,000 slots (`run -s` defines 1,000,000), durable. The cost must not
// grow with the slots past 1,024: a wider lock keeps its holders in holder
// rows, not in per-slot arrays (TestWideLockKeepsNoSlotArrays).
func BenchmarkWideLock(b *testing.B) {
	for _, slots := range []int{2, 1024, 1025, 1_000_000} {
		for _, op := range []string{"pair", "state"} {
			b.Run(fmt.Sprintf("slots=%d/%s", slots, op), func(b *testing.B) {
				e := newBenchEnv(b, false)
				ctx := context.Background()
				define(b, e.s, "wide", slots)
				if _, err := e.s.Acquire(ctx, req("holder", time.Hour, "wide")); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if op == "state" {
						if _, err := e.s.State(ctx, "wide", true); err != nil {
							b.Fatal(err)
						}
						continue
					}
					g, err := e.s.Acquire(ctx, req("reader", time.Minute, "wide"))
					if err != nil {
						b.Fatal(err)
					}
					if err := e.s.Release(ctx, g.Handle(), nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
