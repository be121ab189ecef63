package promevents_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/promevents"
)

// BenchmarkPair is the memory store's uncontended TryAcquire+Release with
// no notifier, on the general path with no event (what a notifier makes
// the pair take), with a notifier that does nothing (the cost of
// sleeplock's event delivery, two events a pair) and with Prometheus
// metrics registered and scraped, side by side.
func BenchmarkPair(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []sleeplock.Option
	}{
		{"none", nil},
		{"general", nil}, // an option: the general path, which the notifiers take, with no event
		{"noop", []sleeplock.Option{sleeplock.WithNotifier(sleeplock.NotifierFunc(func(sleeplock.Event) {}))}},
		{"prometheus", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			locks := sleeplock.New(nil, bc.opts...)
			defer locks.Close()
			if bc.name == "prometheus" {
				reg := prometheus.NewRegistry()
				reg.MustRegister(promevents.New(locks))
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
			if err := locks.Define(ctx, "bench", 1); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var opts []sleeplock.AcquireOption
			if bc.name == "general" {
				opts = append(opts, sleeplock.NoWait())
			}
			for b.Loop() {
				l, err := locks.TryAcquire(ctx, "bench", opts...)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScrape is a GET /metrics of 10,000 held locks (5,000 plain
// locks and 5,000 members of one family).
func BenchmarkScrape(b *testing.B) {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	m := promevents.New(locks)
	if err := locks.Define(ctx, "chat/*", 1); err != nil {
		b.Fatal(err)
	}
	for i := range 5000 {
		name := fmt.Sprintf("job-%d", i)
		if err := locks.Define(ctx, name, 2); err != nil {
			b.Fatal(err)
		}
		for _, n := range []string{name, fmt.Sprintf("chat/%d", i)} {
			if _, err := locks.Acquire(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		_, _ = io.Copy(io.Discard, w.Body)
	}
}

// BenchmarkContended is 64 goroutines taking turns on 2 slots with
// blocking Acquire, without metrics and with the Prometheus collector
// registered and scraped (its cost is the store's, paid when a caller
// waits).
func BenchmarkContended(b *testing.B) {
	for _, name := range []string{"none", "prometheus"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			locks := sleeplock.New(nil)
			defer locks.Close()
			if name == "prometheus" {
				reg := prometheus.NewRegistry()
				reg.MustRegister(promevents.New(locks))
				defer func() {
					if _, err := reg.Gather(); err != nil {
						b.Error(err)
					}
				}()
			}
			if err := locks.Define(ctx, "bench", 2); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := locks.Acquire(ctx, "bench")
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
