package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// stmtLog counts the statements a pool sends, by the function or query
// they call.
type stmtLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *stmtLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.n[stmtKind(d.SQL)]++
	l.mu.Unlock()
	return ctx
}

func (l *stmtLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *stmtLog) take() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.n
	l.n = map[string]int{}
	return n
}

// stmtKind names a statement of the store: the query of queries/ its
// comment names, or the first function of the schema it calls.
func stmtKind(sql string) string {
	if rest, ok := strings.CutPrefix(sql, "/* sleeplock "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	if i := strings.Index(sql, "\"."); i >= 0 {
		name, _, _ := strings.Cut(sql[i+2:], "(")
		return name
	}
	return "other"
}

// BenchmarkHandoffTrace follows a hand-over across nodes, one at a time:
// a holder on one node releases while a caller of the other node waits
// (then the roles swap). Per grant it reports the release's round trip
// (its statement and its commit: release-ms), the time from the Release
// call to the NOTIFY reaching a listener (notify-ms, read on a LISTEN
// connection of its own), from there to the waiter's Acquire returning
// (wake-ms), the whole hand-over (p50-ms, p99-ms), the statements each node
// sent per grant, and for scale a round trip (rt-ms: SELECT 1), a commit
// that flushes (commit-ms: txid_current() less a round trip) and a
// 1-client TryAcquire+Release pair (pair-ms) on the same server.
func BenchmarkHandoffTrace(b *testing.B) {
	pool := newPoolN(b, nil, 4)
	schema := newSchema(b, pool)
	ctx := context.Background()
	must(b, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
	logs := []*stmtLog{{n: map[string]int{}}, {n: map[string]int{}}}
	var nodes []*pgstore.Store
	for i := range 2 {
		s, err := pgstore.New(ctx, newPoolN(b, logs[i], 8), pgstore.WithSchema(schema))
		must(b, err)
		b.Cleanup(func() { _ = s.Close() })
		nodes = append(nodes, s)
	}
	define(b, nodes[0], "t", 1)
	define(b, nodes[0], "pair", 1)

	// A listener of its own: when the grant's NOTIFY reaches a listener.
	lc, err := pgx.Connect(ctx, dbURL())
	must(b, err)
	defer func() { _ = lc.Close(context.Background()) }()
	_, err = lc.Exec(ctx, "LISTEN "+pgx.Identifier{pgstore.ChannelOf(schema)}.Sanitize())
	must(b, err)
	var notifiedAt atomic.Int64
	lctx, stop := context.WithCancel(ctx)
	listened := make(chan struct{})
	go func() {
		defer close(listened)
		for {
			n, err := lc.WaitForNotification(lctx)
			if err != nil {
				return
			}
			if strings.HasPrefix(n.Payload, "g ") {
				notifiedAt.Store(time.Now().UnixNano())
			}
		}
	}()
	defer func() { stop(); <-listened }()

	scale := func() (rt, commit, pair time.Duration) {
		const n = 200
		t := time.Now()
		for range n {
			_, err := pool.Exec(ctx, "SELECT 1")
			must(b, err)
		}
		rt = time.Since(t) / n
		t = time.Now()
		for range n {
			_, err := pool.Exec(ctx, "SELECT txid_current()")
			must(b, err)
		}
		commit = time.Since(t)/n - rt
		t = time.Now()
		for range n {
			g, err := nodes[0].Acquire(ctx, req("p", time.Minute, "pair"))
			must(b, err)
			must(b, nodes[0].Release(ctx, g.Handle(), nil))
		}
		return rt, commit, time.Since(t) / n
	}

	hold, err := nodes[0].Acquire(ctx, req("c0", time.Minute, "t"))
	must(b, err)
	var release, notify, wake, whole []time.Duration
	stmts := [2]map[string]int{{}, {}}
	for i := range b.N + 10 {
		holder, waiter := i%2, (i+1)%2
		queued := make(chan struct{}, 1)
		type result struct {
			g   store.Grant
			err error
			at  time.Time
		}
		got := make(chan result, 1)
		go func() {
			r := req("c"+string(rune('0'+waiter)), time.Minute, "t")
			r.Wait = true
			r.Events = emitterFunc(func(e store.Event) {
				if e.Type == store.EventWaiting {
					queued <- struct{}{}
				}
			})
			g, err := nodes[waiter].Acquire(ctx, r)
			got <- result{g, err, time.Now()}
		}()
		<-queued
		for j := range logs {
			logs[j].take()
		}
		notifiedAt.Store(0)
		t0 := time.Now()
		must(b, nodes[holder].Release(ctx, hold.Handle(), nil))
		t1 := time.Now()
		r := <-got
		must(b, r.err)
		hold = r.g
		t2 := time.Unix(0, notifiedAt.Load())
		if i < 10 { // warm-up
			continue
		}
		release = append(release, t1.Sub(t0))
		notify = append(notify, t2.Sub(t0))
		wake = append(wake, r.at.Sub(t2))
		whole = append(whole, r.at.Sub(t0))
		for j, who := range []int{holder, waiter} {
			for k, v := range logs[who].take() {
				stmts[j][k] += v
			}
		}
	}
	b.StopTimer()
	rt, commit, pair := scale()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(quantile(release, 0.5)), "release-ms")
	b.ReportMetric(ms(quantile(notify, 0.5)), "notify-ms")
	b.ReportMetric(ms(quantile(wake, 0.5)), "wake-ms")
	b.ReportMetric(ms(quantile(whole, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(whole, 0.99)), "p99-ms")
	b.ReportMetric(ms(rt), "rt-ms")
	b.ReportMetric(ms(commit), "commit-ms")
	b.ReportMetric(ms(pair), "pair-ms")
	for j, who := range []string{"releaser", "waiter"} {
		total := 0
		for k, v := range stmts[j] {
			total += v
			b.Logf("%s: %s %.2f per grant", who, k, float64(v)/float64(b.N))
		}
		b.ReportMetric(float64(total)/float64(b.N), who+"-stmts/grant")
	}
}

// emitterFunc is a store.Emitter of a function.
type emitterFunc func(store.Event)

func (f emitterFunc) Emit(e store.Event) { f(e) }

// BenchmarkCycleTrace is BenchmarkCycle's hot lock (clients on two nodes
// cycling through one 1-slot lock: a blocking Acquire, then Release) with
// the statements each kind sends per grant logged.
func BenchmarkCycleTrace(b *testing.B) {
	for _, clients := range []int{1, 32} {
		b.Run("clients="+string(rune('0'+clients/10))+string(rune('0'+clients%10)), func(b *testing.B) {
			pool := newPoolN(b, nil, 4)
			schema := newSchema(b, pool)
			ctx := context.Background()
			must(b, pgstore.Migrate(ctx, pool, pgstore.WithSchema(schema)))
			log := &stmtLog{n: map[string]int{}}
			var nodes []*pgstore.Store
			for range 2 {
				s, err := pgstore.New(ctx, newPoolN(b, log, 40), pgstore.WithSchema(schema))
				must(b, err)
				b.Cleanup(func() { _ = s.Close() })
				nodes = append(nodes, s)
			}
			define(b, nodes[0], "cy", 1)
			parallel(b, clients, func(c int) error {
				s := nodes[c%2]
				r := req("c"+string(rune('A'+c)), time.Minute, "cy")
				r.Wait = true
				g, err := s.Acquire(ctx, r)
				if err != nil {
					return err
				}
				return s.Release(ctx, g.Handle(), nil)
			})
			if b.N < 100 {
				return
			}
			for k, v := range log.take() {
				if v >= b.N/20 {
					b.Logf("%s %.2f per grant", k, float64(v)/float64(b.N))
				}
			}
		})
	}
}
