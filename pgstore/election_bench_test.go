package pgstore_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/pgstore"
)

// BenchmarkElectionHandOver: two candidates on two nodes take turns
// leading an election; p50/p99 of the time from Resign's call to the next
// candidate's Campaign returning (issue 31: graceful hand-over). Compare
// with BenchmarkHandoff/waiters=1/listen, the bare lock's hand-over, in
// the same run.
func BenchmarkElectionHandOver(b *testing.B) {
	nodes := handoffNodes(b, 2, false)
	ctx := context.Background()
	els := make([]*election.Election, 2)
	for i, s := range nodes {
		locks := sleeplock.New(s)
		b.Cleanup(func() { _ = locks.Close() })
		el, err := election.New(locks, "handover", election.WithTTL(time.Minute))
		must(b, err)
		els[i] = el
	}
	var resigned atomic.Int64 // UnixNano of the last Resign call
	var mu sync.Mutex
	var lat []time.Duration
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				term, err := els[c].Campaign(ctx, election.Candidate{ID: "c"})
				if err != nil {
					b.Error(err)
					return
				}
				if t0 := resigned.Load(); t0 != 0 {
					mu.Lock()
					lat = append(lat, time.Since(time.Unix(0, t0)))
					mu.Unlock()
				}
				resigned.Store(time.Now().UnixNano())
				if err := term.Resign(ctx); err != nil {
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
}

// BenchmarkElectionIdle: 100 candidates of one election on 4 stores (25
// each, pools of their own), one leading and 99 waiting, the election's
// default TTL (15s). It reports the CPU time of the stores' PostgreSQL
// backends while nothing changes, in % of a core, and the statements the
// stores send per second (issue 31: < 1 % of a PostgreSQL core). The
// window is a minute; SLEEPLOCK_BENCH_WINDOW (a duration) changes it. Run
// it with -benchtime 1x.
func BenchmarkElectionIdle(b *testing.B) {
	window := time.Minute
	if v := os.Getenv("SLEEPLOCK_BENCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		must(b, err)
		window = d
	}
	for b.Loop() {
		pool := newPoolN(b, nil, 4)
		schema := newSchema(b, pool)
		ctx, cancel := context.WithCancel(context.Background())
		must(b, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
		tr := &counter{}
		app := "sleeplock-bench-" + schema
		var els []*election.Election
		for _, s := range appNodes(b, schema, app, tr, 4) {
			locks := sleeplock.New(s)
			b.Cleanup(func() { _ = locks.Close() })
			el, err := election.New(locks, "idle")
			must(b, err)
			els = append(els, el)
		}
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = els[i%4].Run(ctx, election.Candidate{ID: "c" + strconv.Itoa(i)}, func(ctx context.Context, _ *election.Term) error {
					<-ctx.Done()
					return nil
				})
			}()
		}
		waitForB(b, func() bool {
			l, err := els[0].Leader(ctx)
			return err == nil && l.Waiting == 99
		})
		n0, c0, t0 := tr.n.Load(), backendCPU(b, pool, app), time.Now()
		time.Sleep(window) // the measured idle time
		elapsed := time.Since(t0)
		b.ReportMetric(pctOfCore(backendCPU(b, pool, app)-c0, elapsed), "pg-cpu-%")
		b.ReportMetric(float64(tr.n.Load()-n0)/elapsed.Seconds(), "stmts/s")
		cancel()
		wg.Wait()
	}
}

// BenchmarkElectionObserve: an observer on a store of its own while
// candidates on another store campaign and resign (each iteration: a term
// begins, then the election is vacant: two changes). It reports the
// statements the observer's store sent per change, everything included
// (heartbeats), once it has seen the last change (a term left held): issue 31
// wants no query per change beyond the one notification.
func BenchmarkElectionObserve(b *testing.B) {
	pool := newPoolN(b, nil, 4)
	schema := newSchema(b, pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(b, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	tr := &counter{}
	nodes := appNodes(b, schema, "sleeplock-bench-"+schema, tr, 1)
	observer := sleeplock.New(nodes[0])
	b.Cleanup(func() { _ = observer.Close() })
	oel, err := election.New(observer, "observed", election.WithTTL(time.Hour))
	must(b, err)
	other := appNodes(b, schema, "sleeplock-bench-other-"+schema, &counter{}, 1)[0]
	locks := sleeplock.New(other)
	b.Cleanup(func() { _ = locks.Close() })
	el, err := election.New(locks, "observed", election.WithTTL(time.Hour))
	must(b, err)
	events := oel.Observe(ctx)
	if ev := <-events; ev.Type != election.Vacant {
		b.Fatalf("first event %v, want vacant", ev.Type)
	}
	n0 := tr.n.Load()
	for b.Loop() {
		term, err := el.Campaign(ctx, election.Candidate{ID: "c"})
		must(b, err)
		must(b, term.Resign(ctx))
	}
	// A last term: an event the observer must deliver, whatever it
	// coalesced (vacant, elected, vacant may come as nothing).
	final, err := el.Campaign(ctx, election.Candidate{ID: "c"})
	must(b, err)
	for ev := range events {
		if ev.Type == election.Elected && ev.Token == final.Token() {
			break
		}
	}
	b.ReportMetric(float64(tr.n.Load()-n0)/float64(2*b.N+1), "stmts/change")
	must(b, final.Resign(ctx))
}
