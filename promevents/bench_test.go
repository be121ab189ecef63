package promevents_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/promevents"
)

// BenchmarkPair is the memory store's uncontended TryAcquire+Release with
// no notifier, with a notifier that does nothing (the cost of sleeplock's
// event delivery) and with the Prometheus notifier, side by side.
func BenchmarkPair(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []sleeplock.Option
	}{
		{"none", nil},
		{"noop", []sleeplock.Option{sleeplock.WithNotifier(sleeplock.NotifierFunc(func(sleeplock.Event) {}))}},
		{"prometheus", []sleeplock.Option{sleeplock.WithNotifier(promevents.New())}},
		{"prometheus-inline", []sleeplock.Option{sleeplock.WithInlineNotifier(promevents.New())}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			locks := sleeplock.New(nil, bc.opts...)
			defer locks.Close()
			if err := locks.Define(ctx, "bench", 1); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				l, err := locks.TryAcquire(ctx, "bench")
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
	m := promevents.New()
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
	defer locks.Close()
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
	reg.MustRegister(m.Track(locks))
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

// BenchmarkNotify is the Prometheus notifier's own cost per event (an
// acquired and a released event of a family member), off the lock path.
func BenchmarkNotify(b *testing.B) {
	m := promevents.New()
	acq := sleeplock.Event{Type: sleeplock.EventAcquired, Lock: "chat/42", Waited: time.Millisecond}
	rel := sleeplock.Event{Type: sleeplock.EventReleased, Lock: "chat/42", Held: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		m.Notify(acq)
		m.Notify(rel)
	}
}
