package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
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
