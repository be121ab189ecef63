// Package redispeer_test measures the Redis store side by side with
// github.com/bsm/redislock, in one binary, against one Redis server: issue
// 32's speed table. redislock is a test-only requirement of this module
// (never of redisstore's).
//
//	SLEEPLOCK_TEST_REDIS_URL=redis://127.0.0.1:6381/0 \
//	  go test ./redispeer -run '^$' -bench . -benchtime 1x
//
// Each throughput row runs both peers in turn, round after round (the
// first alternating), and reports the medians of the rounds' throughputs
// and the median of the rounds' ratios (sleeplock over redislock; above 1
// is faster). Load on the machine hits both peers alike.
// BenchmarkServerTime reports the server's time per call of each peer
// instead (INFO commandstats, INFO cpu), which load moves less, and
// BenchmarkAllocs the client's allocations per pair.
package redispeer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
)

// rounds and span: each throughput row runs each peer rounds times for
// span.
const (
	rounds = 5
	span   = 300 * time.Millisecond
	ttl    = time.Minute
)

// serverURL is the server measured: SLEEPLOCK_TEST_REDIS_URL, or the Redis
// at 127.0.0.1:6379.
func serverURL() string {
	if u := os.Getenv("SLEEPLOCK_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// newClient returns a client of the server, closed after the benchmark;
// it skips the benchmark when the server cannot be reached.
func newClient(b *testing.B) *redis.Client {
	b.Helper()
	o, err := redis.ParseURL(serverURL())
	if err != nil {
		b.Fatal(err)
	}
	c := redis.NewClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		b.Skipf("Redis at %s unreachable: %v", serverURL(), err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// newPrefix returns a key prefix of the benchmark's own, whose keys are
// deleted afterwards.
func newPrefix(b *testing.B, c *redis.Client) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	p := "slpeer:" + hex.EncodeToString(r[:]) + ":"
	b.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for k := range slices.Chunk(keys, 500) {
			c.Del(ctx, k...)
		}
	})
	return p
}

// newLocks returns sleeplock on the Redis store, under prefix, on c.
func newLocks(b *testing.B, c *redis.Client, prefix string, opts ...sleeplock.Option) *sleeplock.Locks {
	b.Helper()
	s, err := redisstore.New(context.Background(), c, redisstore.WithPrefix(prefix), redisstore.WithoutSafetyChecks())
	if err != nil {
		b.Fatal(err)
	}
	l := sleeplock.New(s, append([]sleeplock.Option{sleeplock.WithTTL(ttl)}, opts...)...)
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// parallel runs g goroutines doing op until d has passed and returns the
// operations done; the first error stops the benchmark.
func parallel(b *testing.B, g int, d time.Duration, op func(w int) error) int64 {
	var n atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	for w := range g {
		wg.Go(func() {
			var k int64
			for !stop.Load() {
				if err := op(w); err != nil {
					once.Do(func() { failed = err })
					stop.Store(true)
					break
				}
				k++
			}
			n.Add(k)
		})
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return n.Load()
}

// sideBySide runs ours and theirs in turn for rounds rounds and reports
// the median throughput of each (ops/s) and the median of the rounds'
// ratios ours/theirs.
func sideBySide(b *testing.B, ours, theirs func() int64) {
	sideBySideAs(b, "sleeplock", "redislock", ours, theirs)
}

// sideBySideAs is sideBySide with the peers' names, as its metrics say
// them.
func sideBySideAs(b *testing.B, oursName, theirsName string, ours, theirs func() int64) {
	var os, ts, rs []float64
	for r := range rounds {
		a, c := ours, theirs
		if r%2 == 1 {
			a, c = theirs, ours
		}
		runtime.GC()
		t0 := time.Now()
		na := float64(a()) / time.Since(t0).Seconds()
		runtime.GC()
		t0 = time.Now()
		nc := float64(c()) / time.Since(t0).Seconds()
		if r%2 == 1 {
			na, nc = nc, na
		}
		os, ts, rs = append(os, na), append(ts, nc), append(rs, na/nc)
	}
	b.ReportMetric(median(os), oursName+"-ops/s")
	b.ReportMetric(median(ts), theirsName+"-ops/s")
	b.ReportMetric(median(rs), "ratio")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkPair: TryAcquire+Release pairs, each client on a lock of its
// own, against redislock's Obtain+Release.
func BenchmarkPair(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { pairRow(b, clients) })
	}
}

// pairRow is the row of BenchmarkPair with that many clients.
func pairRow(b *testing.B, clients int) {
	ctx := context.Background()
	c := newClient(b)
	p := newPrefix(b, c)
	l := newLocks(b, c, p)
	if err := l.Define(ctx, "p/*", 1); err != nil {
		b.Fatal(err)
	}
	rl := redislock.New(c)
	for b.Loop() {
		sideBySide(b, func() int64 {
			return parallel(b, clients, span, func(w int) error {
				lease, err := l.TryAcquire(ctx, "p/"+strconv.Itoa(w))
				if err != nil {
					return err
				}
				return lease.Release(ctx)
			})
		}, func() int64 {
			return parallel(b, clients, span, func(w int) error {
				lk, err := rl.Obtain(ctx, p+"rl:"+strconv.Itoa(w), ttl, nil)
				if err != nil {
					return err
				}
				return lk.Release(ctx)
			})
		})
	}
}

// dirty is the server's count of changes since the last save: a write of
// anyone's moves it.
func dirty(b *testing.B, c *redis.Client) int64 {
	return infoInt(b, c, "persistence", "rdb_changes_since_last_save")
}

func infoInt(b *testing.B, c *redis.Client, section, field string) int64 {
	b.Helper()
	f := infoField(b, c, section, field)
	n, err := strconv.ParseInt(f, 10, 64)
	if err != nil {
		b.Fatalf("INFO %s %s: %q", section, field, f)
	}
	return n
}

func infoField(b *testing.B, c *redis.Client, section, field string) string {
	b.Helper()
	v := infoFieldOr(b, c, section, field)
	if v == "" {
		b.Fatalf("INFO %s has no %s", section, field)
	}
	return v
}

// BenchmarkRefusedTry: 8 clients trying a lock another holds, against
// redislock's refused Obtain. writes is the server's changes counted
// while sleeplock's clients ran (0 on a server nobody else writes to).
func BenchmarkRefusedTry(b *testing.B) {
	const clients = 8
	ctx := context.Background()
	c := newClient(b)
	p := newPrefix(b, c)
	l := newLocks(b, c, p)
	if err := l.Define(ctx, "held", 1); err != nil {
		b.Fatal(err)
	}
	holder, err := l.TryAcquire(ctx, "held", sleeplock.NoKeepAlive())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = holder.Release(ctx) }()
	rl := redislock.New(c)
	lk, err := rl.Obtain(ctx, p+"rl:held", ttl, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = lk.Release(ctx) }()
	var writes int64
	for b.Loop() {
		sideBySide(b, func() int64 {
			d0 := dirty(b, c)
			n := parallel(b, clients, span, func(int) error {
				_, err := l.TryAcquire(ctx, "held")
				if errors.Is(err, sleeplock.ErrUnavailable) {
					return nil
				}
				return fmt.Errorf("refused try: %w", err)
			})
			writes += dirty(b, c) - d0
			return n
		}, func() int64 {
			return parallel(b, clients, span, func(int) error {
				_, err := rl.Obtain(ctx, p+"rl:held", ttl, nil)
				if errors.Is(err, redislock.ErrNotObtained) {
					return nil
				}
				return fmt.Errorf("refused obtain: %w", err)
			})
		})
	}
	b.ReportMetric(float64(writes), "writes")
}

// BenchmarkHandOver: A releases a lock B waits for; the time from A's
// Release to B's Acquire returning.
func BenchmarkHandOver(b *testing.B) {
	const n = 200
	ctx := context.Background()
	c := newClient(b)
	p := newPrefix(b, c)
	queued := make(chan struct{}, 1)
	la, lb := newLocks(b, c, p), newLocks(b, newClient(b), p, sleeplock.WithInlineNotifier(waiting(queued)))
	if err := la.Define(ctx, "h", 1); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var ds []float64
		for range n {
			a, err := la.TryAcquire(ctx, "h")
			if err != nil {
				b.Fatal(err)
			}
			got := make(chan time.Time, 1)
			go func() {
				g, err := lb.Acquire(ctx, "h")
				t := time.Now()
				if err != nil {
					b.Error(err)
				} else {
					_ = g.Release(ctx)
				}
				got <- t
			}()
			<-queued
			t0 := time.Now()
			if err := a.Release(ctx); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, float64((<-got).Sub(t0).Microseconds()))
		}
		slices.Sort(ds)
		b.ReportMetric(ds[len(ds)/2], "p50-µs")
		b.ReportMetric(ds[len(ds)*99/100], "p99-µs")
	}
}

// waiting is a notifier that tells ch of each caller that joins a queue.
func waiting(ch chan<- struct{}) sleeplock.Notifier {
	return sleeplock.NotifierFunc(func(e sleeplock.Event) {
		if e.Type == sleeplock.EventWaiting {
			ch <- struct{}{}
		}
	})
}

// BenchmarkDrain: 1,000 waiters on 4 stores (as 4 processes would be)
// queue for one lock in a known order. Idle, they cost the server
// idle-core-% of a core (the server's CPU time over 2 s: on a server
// nobody else uses). Then the holder releases and each waiter releases as
// soon as it is granted: drain-ratio is the drain's rate over a
// 1-client TryAcquire+Release pair's (measured before and after the
// drain), and fifo-errors counts the waiters granted out of their queue
// order. drain-cpu-µs/grant is the server's CPU time over the drain per
// waiter granted (INFO cpu: each hand-over's release, its messages and
// the last release): on a loaded machine, steadier than the rates.
func BenchmarkDrain(b *testing.B) {
	const waiters, nodes = 1000, 4
	ctx := context.Background()
	c := newClient(b)
	p := newPrefix(b, c)
	ls := make([]*sleeplock.Locks, nodes)
	queued := make(chan struct{}, 1)
	for i := range ls {
		ls[i] = newLocks(b, newClient(b), p, sleeplock.WithInlineNotifier(waiting(queued)))
	}
	l := ls[0]
	if err := l.Define(ctx, "d", 1); err != nil {
		b.Fatal(err)
	}
	if err := l.Define(ctx, "pair", 1); err != nil {
		b.Fatal(err)
	}
	pairs := func() int64 {
		return parallel(b, 1, span, func(int) error {
			lease, err := l.TryAcquire(ctx, "pair")
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		})
	}
	for b.Loop() {
		before := pairs()

		holder, err := l.TryAcquire(ctx, "d")
		if err != nil {
			b.Fatal(err)
		}
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range waiters {
			wg.Go(func() {
				g, err := ls[i%nodes].Acquire(ctx, "d")
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if err := g.Release(ctx); err != nil {
					b.Error(err)
				}
			})
			<-queued
		}
		cpu0 := serverCPU(b, c)
		t0 := time.Now()
		time.Sleep(2 * time.Second)
		idle := (serverCPU(b, c) - cpu0) / time.Since(t0).Seconds()

		cpu0 = serverCPU(b, c)
		t0 = time.Now()
		if err := holder.Release(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		drainRate := float64(waiters) / time.Since(t0).Seconds()
		drainCPU := 1e6 * (serverCPU(b, c) - cpu0) / waiters
		pairRate := float64(before+pairs()) / (2 * span.Seconds())
		wrong := 0
		for k, i := range order {
			if k != i {
				wrong++
			}
		}
		b.ReportMetric(100*idle, "idle-core-%")
		b.ReportMetric(drainRate, "drain-ops/s")
		b.ReportMetric(drainCPU, "drain-cpu-µs/grant")
		b.ReportMetric(pairRate, "pair-ops/s")
		b.ReportMetric(drainRate/pairRate, "drain-ratio")
		b.ReportMetric(float64(wrong), "fifo-errors")
	}
}

// serverCPU is the CPU time (s) the server has used.
func serverCPU(b *testing.B, c *redis.Client) float64 {
	var t float64
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(infoField(b, c, "cpu", f), 64)
		if err != nil {
			b.Fatal(err)
		}
		t += v
	}
	return t
}

// BenchmarkAllocs: b.N TryAcquire+Release pairs of one client, for
// -benchmem's allocations and bytes per pair of each peer (the rows above
// run by time and report none). -benchtime 1x measures nothing: give it a
// count (-benchtime 10000x).
func BenchmarkAllocs(b *testing.B) { benchPairs(b, nil) }

// benchPairs runs b.N TryAcquire+Release pairs of one client of each peer,
// reporting allocations; hook, when not nil, is added to each client once
// the lock is defined (BenchmarkClient's answerHere).
func benchPairs(b *testing.B, hook redis.Hook) {
	ctx := context.Background()
	b.Run("peer=sleeplock", func(b *testing.B) {
		c := newClient(b)
		l := newLocks(b, c, newPrefix(b, c))
		if err := l.Define(ctx, "p/*", 1); err != nil {
			b.Fatal(err)
		}
		if hook != nil {
			c.AddHook(hook)
		}
		b.ReportAllocs()
		for b.Loop() {
			lease, err := l.TryAcquire(ctx, "p/x")
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("peer=redislock", func(b *testing.B) {
		c := newClient(b)
		p := newPrefix(b, c)
		rl := redislock.New(c)
		if hook != nil {
			c.AddHook(hook)
		}
		b.ReportAllocs()
		for b.Loop() {
			lk, err := rl.Obtain(ctx, p+"rl:x", ttl, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
