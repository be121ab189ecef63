package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"unsafe"

	"go.uber.org/goleak"
	"golang.org/x/sync/semaphore"

	"github.com/sleeplock/sleeplock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// BenchmarkUncontended: one goroutine takes and gives back a slot of a
// named lock; the peers are a semaphore and a buffered channel held in a
// variable (no name lookup).
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("sleeplock", func(b *testing.B) {
		l := sleeplock.New(nil)
		defer l.Close()
		if err := l.Define(ctx, "payments", 3); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			lease, err := l.TryAcquire(ctx, "payments")
			if err != nil {
				b.Fatal(err)
			}
			_ = lease.Release(ctx)
		}
	})
	b.Run("x-sync-semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(3)
		b.ReportAllocs()
		for b.Loop() {
			if !s.TryAcquire(1) {
				b.Fatal("refused")
			}
			s.Release(1)
		}
	})
	b.Run("channel", func(b *testing.B) {
		c := make(chan struct{}, 3)
		b.ReportAllocs()
		for b.Loop() {
			select {
			case c <- struct{}{}:
			default:
				b.Fatal("refused")
			}
			<-c
		}
	})
}

// BenchmarkContended: 64 goroutines share 2 slots with blocking acquires.
func BenchmarkContended(b *testing.B) {
	ctx := context.Background()
	const goroutines = 64
	par := goroutines / runtime.GOMAXPROCS(0)
	if par < 1 {
		par = 1
	}
	b.Run("sleeplock", func(b *testing.B) {
		l := sleeplock.New(nil)
		defer l.Close()
		if err := l.Define(ctx, "db", 2); err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(par)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lease, err := l.Acquire(ctx, "db")
				if err != nil {
					panic(err)
				}
				_ = lease.Release(ctx)
			}
		})
	})
	b.Run("x-sync-semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(2)
		b.SetParallelism(par)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Acquire(ctx, 1); err != nil {
					panic(err)
				}
				s.Release(1)
			}
		})
	})
	b.Run("channel", func(b *testing.B) {
		c := make(chan struct{}, 2)
		b.SetParallelism(par)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c <- struct{}{}
				<-c
			}
		})
	})
}

// BenchmarkFamilyMemory touches 1,000,000 family locks (chat/0 …
// chat/999999) once each and reports the heap they keep afterwards, per
// lock ("idle-B/lock"), and while all are held at once ("held-B/lock").
func BenchmarkFamilyMemory(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = "chat/" + strconv.Itoa(i)
	}
	for b.Loop() {
		l := sleeplock.New(nil)
		if err := l.Define(ctx, "chat/*", 1); err != nil {
			b.Fatal(err)
		}
		before := heap()
		leases := make([]sleeplock.Lease, n)
		for i, name := range names {
			lease, err := l.TryAcquire(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			leases[i] = lease
		}
		held := sub(heap(), before+uint64(n)*uint64(unsafe.Sizeof(leases[0])))
		for _, lease := range leases {
			_ = lease.Release(ctx)
		}
		clear(leases)
		idle := sub(heap(), before)
		b.ReportMetric(float64(held)/n, "held-B/lock")
		b.ReportMetric(float64(idle)/n, "idle-B/lock")
		_ = l.Close()
	}
}

func heap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// BenchmarkWeighted: 64 goroutines share 8 slots with blocking acquires
// of weights 1 to 4 (goroutine i asks 1+i%4), sleeplock's Weight against
// x/sync's Weighted. (Issue 21.)
func BenchmarkWeighted(b *testing.B) {
	ctx := context.Background()
	const goroutines, slots = 64, 8
	par := max(goroutines/runtime.GOMAXPROCS(0), 1)
	b.Run("sleeplock", func(b *testing.B) {
		l := sleeplock.New(nil)
		defer l.Close()
		if err := l.Define(ctx, "gpu", slots); err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		b.SetParallelism(par)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := sleeplock.Weight(1 + int(next.Add(1))%4)
			for pb.Next() {
				lease, err := l.Acquire(ctx, "gpu", w)
				if err != nil {
					panic(err)
				}
				_ = lease.Release(ctx)
			}
		})
	})
	b.Run("x-sync-semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(slots)
		var next atomic.Int64
		b.SetParallelism(par)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := 1 + next.Add(1)%4
			for pb.Next() {
				if err := s.Acquire(ctx, w); err != nil {
					panic(err)
				}
				s.Release(w)
			}
		})
	})
}
