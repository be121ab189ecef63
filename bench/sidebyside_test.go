package bench

import (
	"context"

	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sync/semaphore"

	"github.com/sleeplock/sleeplock"
)

// The side-by-side harness: each row of issue 9's table measures sleeplock's
// memory store and its peer in turn, round after round, in one binary, and
// reports the medians of the rounds and the ratio of the medians. Load on
// the machine hits both peers alike, which absolute figures cannot promise.
//
//	go test ./bench -run '^$' -bench SideBySide -benchtime 1x
//
// Each row reports the medians of the rounds for sleeplock and its peer
// (ns/op or µs) and the ratio the table names (time ratio for the
// uncontended rows, throughput ratio for the contended rows, p99 ratio for
// the wait row): the median of the rounds' ratios, each of two runs made
// back to back, which cancels most of the load that other processes put on
// the machine.

const rounds = 11

// span is how long each peer runs in one round of a throughput row.
const span = 100 * time.Millisecond

// peer runs its workload for about d and reports operations done.
type peer func(d time.Duration) (ops int64)

// sideBySide runs a and b in turn for rounds rounds and returns the median
// ns/op of each and the median of the rounds' ratios a/b.
func sideBySide(a, b peer, d time.Duration) (na, nb, ratio float64) {
	var as, bs, rs []float64
	for r := range rounds {
		first, second := a, b
		if r%2 == 1 {
			first, second = b, a // alternate which goes first
		}
		runtime.GC()
		t0 := time.Now()
		n1 := first(d)
		e1 := float64(time.Since(t0).Nanoseconds()) / float64(n1)
		runtime.GC()
		t0 = time.Now()
		n2 := second(d)
		e2 := float64(time.Since(t0).Nanoseconds()) / float64(n2)
		if r%2 == 1 {
			e1, e2 = e2, e1
		}
		as, bs, rs = append(as, e1), append(bs, e2), append(rs, e1/e2)
	}
	return median(as), median(bs), median(rs)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// parallel runs g goroutines doing op until d has passed and returns the
// operations done.
func parallel(g int, d time.Duration, op func(w int, rng *rand.Rand)) int64 {
	var n atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			<-start
			var k int64
			for !stop.Load() {
				op(w, rng)
				k++
			}
			n.Add(k)
		}()
	}
	close(start)
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return n.Load()
}

func mustDefine(b *testing.B, l *sleeplock.Locks, name string, slots int) {
	if err := l.Define(context.Background(), name, slots); err != nil {
		b.Fatal(err)
	}
}

func report(b *testing.B, sl, peer float64, unit, ratioUnit string, ratio float64) {
	b.ReportMetric(sl, "sleeplock-"+unit)
	b.ReportMetric(peer, "peer-"+unit)
	b.ReportMetric(ratio, ratioUnit)
}

func BenchmarkSideBySide(b *testing.B) {
	ctx := context.Background()

	// Row 1: uncontended TryAcquire+Release, time (ratio: sleeplock's time
	// over the semaphore's; lower is better).
	b.Run("uncontended", func(b *testing.B) {
		for b.Loop() {
			l := sleeplock.New(nil)
			mustDefine(b, l, "payments", 3)
			sem := semaphore.NewWeighted(3)
			const n = 1 << 18
			sl, pe, r := sideBySide(func(time.Duration) int64 {
				for range n {
					lease, err := l.TryAcquire(ctx, "payments")
					if err != nil {
						panic(err)
					}
					_ = lease.Release(ctx)
				}
				return n
			}, func(time.Duration) int64 {
				for range n {
					if !sem.TryAcquire(1) {
						panic("refused")
					}
					sem.Release(1)
				}
				return n
			}, 0)
			report(b, sl, pe, "ns/op", "time-ratio", r)
			_ = l.Close()
		}
	})

	// Row 1 through a handle ((*Locks).Lock): no lookup by name.
	b.Run("uncontended-handle", func(b *testing.B) {
		for b.Loop() {
			l := sleeplock.New(nil)
			mustDefine(b, l, "payments", 3)
			k := l.Lock("payments")
			sem := semaphore.NewWeighted(3)
			const n = 1 << 18
			sl, pe, r := sideBySide(func(time.Duration) int64 {
				for range n {
					lease, err := k.TryAcquire(ctx)
					if err != nil {
						panic(err)
					}
					_ = lease.Release(ctx)
				}
				return n
			}, func(time.Duration) int64 {
				for range n {
					if !sem.TryAcquire(1) {
						panic("refused")
					}
					sem.Release(1)
				}
				return n
			}, 0)
			report(b, sl, pe, "ns/op", "time-ratio", r)
			_ = l.Close()
		}
	})

	// Rows 2 and 3: goroutines share one lock with blocking Acquire
	// (ratio: sleeplock's throughput over the semaphore's; higher is better).
	// Both start with nobody waiting and fall into a queue once every slot
	// is held by a goroutine that is not running; a round counts mostly
	// what came before (the section "Issue 30: the queued path" of
	// bench/README.md before e0682ad, in git).
	// The -yield row has each holder yield its core while it holds, so
	// that callers queue from the start: the queued path's own cost.
	for _, c := range []struct {
		name       string
		gor, slots int
		yield      bool
	}{{"g64-slots2", 64, 2, false}, {"g1000-slots10", 1000, 10, false}, {"g64-slots2-yield", 64, 2, true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				l := sleeplock.New(nil)
				mustDefine(b, l, "db", c.slots)
				sem := semaphore.NewWeighted(int64(c.slots))
				sl, pe, r := sideBySide(func(d time.Duration) int64 {
					return parallel(c.gor, d, func(int, *rand.Rand) {
						lease, err := l.Acquire(ctx, "db")
						if err != nil {
							panic(err)
						}
						if c.yield {
							runtime.Gosched()
						}
						_ = lease.Release(ctx)
					})
				}, func(d time.Duration) int64 {
					return parallel(c.gor, d, func(int, *rand.Rand) {
						if err := sem.Acquire(ctx, 1); err != nil {
							panic(err)
						}
						if c.yield {
							runtime.Gosched()
						}
						sem.Release(1)
					})
				}, span)
				report(b, sl, pe, "ns/op", "throughput-ratio", 1/r)
				_ = l.Close()
			}
		})
	}

	// The weighted row (issue 21's BenchmarkWeighted, interleaved): 64
	// goroutines on 8 slots, goroutine w asking weight 1+w%4 (ratio:
	// throughput, as rows 2 and 3).
	b.Run("g64-weighted-slots8", func(b *testing.B) {
		for b.Loop() {
			l := sleeplock.New(nil)
			mustDefine(b, l, "gpu", 8)
			sem := semaphore.NewWeighted(8)
			var weights [4]sleeplock.AcquireOption
			for i := range weights {
				weights[i] = sleeplock.Weight(1 + i)
			}
			sl, pe, r := sideBySide(func(d time.Duration) int64 {
				return parallel(64, d, func(w int, _ *rand.Rand) {
					lease, err := l.Acquire(ctx, "gpu", weights[w%4])
					if err != nil {
						panic(err)
					}
					_ = lease.Release(ctx)
				})
			}, func(d time.Duration) int64 {
				return parallel(64, d, func(w int, _ *rand.Rand) {
					n := int64(1 + w%4)
					if err := sem.Acquire(ctx, n); err != nil {
						panic(err)
					}
					sem.Release(n)
				})
			}, span)
			report(b, sl, pe, "ns/op", "throughput-ratio", 1/r)
			_ = l.Close()
		}
	})

	// Row 4: 64 goroutines over 10,000 distinct one-slot locks, against
	// one semaphore per lock in a sync.Map, both looked up by name.
	b.Run("g64-locks10000", func(b *testing.B) {
		const nlocks = 10_000
		names := make([]string, nlocks)
		for i := range names {
			names[i] = "lock-" + strconv.Itoa(i)
		}
		for b.Loop() {
			l := sleeplock.New(nil)
			var sems sync.Map
			for _, name := range names {
				mustDefine(b, l, name, 1)
				sems.Store(name, semaphore.NewWeighted(1))
			}
			sl, pe, r := sideBySide(func(d time.Duration) int64 {
				return parallel(64, d, func(_ int, rng *rand.Rand) {
					lease, err := l.Acquire(ctx, names[rng.IntN(nlocks)])
					if err != nil {
						panic(err)
					}
					_ = lease.Release(ctx)
				})
			}, func(d time.Duration) int64 {
				return parallel(64, d, func(_ int, rng *rand.Rand) {
					v, _ := sems.Load(names[rng.IntN(nlocks)])
					s := v.(*semaphore.Weighted)
					if err := s.Acquire(ctx, 1); err != nil {
						panic(err)
					}
					s.Release(1)
				})
			}, span)
			report(b, sl, pe, "ns/op", "throughput-ratio", 1/r)
			_ = l.Close()
		}
	})

	// Row 4 with a handle per lock, against the semaphores in a slice
	// (neither looks a name up).
	b.Run("g64-locks10000-handles", func(b *testing.B) {
		const nlocks = 10_000
		for b.Loop() {
			l := sleeplock.New(nil)
			handles := make([]*sleeplock.Lock, nlocks)
			sems := make([]*semaphore.Weighted, nlocks)
			for i := range handles {
				name := "lock-" + strconv.Itoa(i)
				mustDefine(b, l, name, 1)
				handles[i], sems[i] = l.Lock(name), semaphore.NewWeighted(1)
			}
			sl, pe, r := sideBySide(func(d time.Duration) int64 {
				return parallel(64, d, func(_ int, rng *rand.Rand) {
					lease, err := handles[rng.IntN(nlocks)].Acquire(ctx)
					if err != nil {
						panic(err)
					}
					_ = lease.Release(ctx)
				})
			}, func(d time.Duration) int64 {
				return parallel(64, d, func(_ int, rng *rand.Rand) {
					s := sems[rng.IntN(nlocks)]
					if err := s.Acquire(ctx, 1); err != nil {
						panic(err)
					}
					s.Release(1)
				})
			}, span)
			report(b, sl, pe, "ns/op", "throughput-ratio", 1/r)
			_ = l.Close()
		}
	})

	// Row 5 and the fairness figure: 64 goroutines on 2 slots; the p99
	// of the time each Acquire waited, and at p99 and p99.9 how many later
	// arrivals were granted before a waiter (overtakes).
	b.Run("g64-slots2-p99", func(b *testing.B) {
		for b.Loop() {
			l := sleeplock.New(nil)
			mustDefine(b, l, "db", 2)
			sem := semaphore.NewWeighted(2)
			var slP, peP, slO, peO, slO3, peO3, ratio []float64
			for r := range rounds {
				run := func(sl bool) {
					runtime.GC()
					waits, over, over3 := latencies(64, span, func() func() {
						if sl {
							lease, err := l.Acquire(ctx, "db")
							if err != nil {
								panic(err)
							}
							return func() { _ = lease.Release(ctx) }
						}
						if err := sem.Acquire(ctx, 1); err != nil {
							panic(err)
						}
						return func() { sem.Release(1) }
					})
					if sl {
						slP, slO, slO3 = append(slP, waits), append(slO, over), append(slO3, over3)
					} else {
						peP, peO, peO3 = append(peP, waits), append(peO, over), append(peO3, over3)
					}
				}
				run(r%2 == 0)
				run(r%2 == 1)
				ratio = append(ratio, slP[len(slP)-1]/peP[len(peP)-1])
			}
			b.ReportMetric(median(slP), "sleeplock-p99-µs")
			b.ReportMetric(median(peP), "peer-p99-µs")
			b.ReportMetric(median(ratio), "p99-ratio")
			b.ReportMetric(median(slO), "sleeplock-p99-overtakes")
			b.ReportMetric(median(peO), "peer-p99-overtakes")
			b.ReportMetric(median(slO3), "sleeplock-p999-overtakes")
			b.ReportMetric(median(peO3), "peer-p999-overtakes")
			_ = l.Close()
		}
	})

	// Row 6: heap per held family lock (100,000 members held at once).
	b.Run("family-heap", func(b *testing.B) {
		const n = 100_000
		names := make([]string, n)
		for i := range names {
			names[i] = "chat/" + strconv.Itoa(i)
		}
		for b.Loop() {
			var held []float64
			for range 3 {
				l := sleeplock.New(nil)
				if err := l.Define(ctx, "chat/*", 1); err != nil {
					b.Fatal(err)
				}
				leases := make([]sleeplock.Lease, n)
				before := heap()
				for i, name := range names {
					lease, err := l.TryAcquire(ctx, name)
					if err != nil {
						b.Fatal(err)
					}
					leases[i] = lease
				}
				held = append(held, float64(sub(heap(), before))/n)
				for _, lease := range leases {
					_ = lease.Release(ctx)
				}
				_ = l.Close()
			}
			b.ReportMetric(median(held), "held-B/lock")
			b.ReportMetric(float64(unsafe.Sizeof(sleeplock.Lease{})), "lease-B")
		}
	})
}

// latencies runs g goroutines that take (acquire returns the release) and
// give back a slot until d has passed. It returns the p99 of the time an
// acquisition took, in µs, and the p99 and p99.9 of overtakes: for each
// acquisition, how many acquisitions that arrived later were granted
// before it. (The p99 is often 0–2 for both peers when the machine is
// busy; the p99.9 still tells a lock that lets a caller lose its turn
// from one that does not.)
func latencies(g int, d time.Duration, acquire func() (release func())) (p99, overtakes, overtakes999 float64) {
	type sample struct {
		arrive, grant int64
		wait          time.Duration
	}
	var arrivals, grants atomic.Int64
	var stop atomic.Bool
	var mu sync.Mutex
	var all []sample
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			for !stop.Load() {
				t0 := time.Now()
				a := arrivals.Add(1)
				release := acquire()
				gr := grants.Add(1)
				wait := time.Since(t0)
				release()
				mine = append(mine, sample{a, gr, wait})
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	waits := make([]float64, len(all))
	for i, s := range all {
		waits[i] = float64(s.wait.Nanoseconds()) / 1e3
	}
	slices.Sort(waits)
	// Overtakes: for each sample, count samples with a later arrival and an
	// earlier grant (a Fenwick tree over grant order, arrivals descending).
	slices.SortFunc(all, func(x, y sample) int { return int(y.arrive - x.arrive) })
	n := int(grants.Load()) + 1
	tree := make([]int32, n+1)
	over := make([]float64, len(all))
	for i, s := range all {
		c := 0
		for j := int(s.grant) - 1; j > 0; j -= j & -j {
			c += int(tree[j])
		}
		over[i] = float64(c)
		for j := int(s.grant); j <= n; j += j & -j {
			tree[j]++
		}
	}
	slices.Sort(over)
	return pct(waits, 0.99), pct(over, 0.99), pct(over, 0.999)
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
