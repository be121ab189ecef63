package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/integration/stores"
	"github.com/sleeplock/sleeplock/otelevents"
	"github.com/sleeplock/sleeplock/promevents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPromCounts: a known workload, on every store, read back at scrape
// time: 200 pairs, a refusal, a wait, a family's members folded into it.
func TestPromCounts(t *testing.T) {
	for _, st := range stores.All {
		t.Run(st.Name, func(t *testing.T) {
			ctx := context.Background()
			locks := st.Open(t)
			m := promevents.New(locks)
			must(t, locks.Define(ctx, "pay", 1))
			must(t, locks.Define(ctx, "chat/*", 1))
			for range 200 {
				l, err := locks.TryAcquire(ctx, "pay")
				must(t, err)
				must(t, l.Release(ctx))
			}
			a, err := locks.Acquire(ctx, "pay")
			must(t, err)
			if _, err := locks.TryAcquire(ctx, "pay", sleeplock.Ref("other")); !errors.Is(err, sleeplock.ErrUnavailable) {
				t.Fatalf("try: %v", err)
			}
			got := make(chan error)
			go func() {
				b, err := locks.Acquire(ctx, "pay", sleeplock.Ref("waiter"))
				if err == nil {
					err = b.Release(ctx)
				}
				got <- err
			}()
			untilWaiting(t, locks, "pay")
			must(t, a.Release(ctx))
			must(t, <-got)
			for i := range 30 {
				c, err := locks.Acquire(ctx, fmt.Sprintf("chat/%d", i%4))
				must(t, err)
				must(t, c.Release(ctx))
			}
			text, err := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, "sleeplock_acquisitions_total",
				"sleeplock_refusals_total", "sleeplock_releases_total", "sleeplock_expirations_total",
				"sleeplock_wait_seconds", "sleeplock_locks", "sleeplock_running")
			must(t, err)
			for _, line := range []string{
				`sleeplock_acquisitions_total{lock="pay"} 202`,
				`sleeplock_refusals_total{lock="pay"} 1`,
				`sleeplock_releases_total{lock="pay"} 202`,
				`sleeplock_expirations_total{lock="pay"} 0`,
				`sleeplock_acquisitions_total{lock="chat/*"} 30`,
				`sleeplock_releases_total{lock="chat/*"} 30`,
				`sleeplock_wait_seconds_count{lock="pay"} 202`,
				`sleeplock_wait_seconds_count{lock="chat/*"} 30`,
				`sleeplock_locks{lock="chat/*"} 0`,
				`sleeplock_running{lock="pay"} 0`,
			} {
				if !strings.Contains(string(text), line+"\n") {
					t.Errorf("no %q in\n%s", line, text)
				}
			}
		})
	}
}

// TestOtelInstruments: a known workload, on every store, observed at
// collection time: counters under the lock's label (a family's members
// under the family), gauges from the store.
func TestOtelInstruments(t *testing.T) {
	for _, st := range stores.All {
		t.Run(st.Name, func(t *testing.T) {
			ctx := context.Background()
			locks := st.Open(t)
			r := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			m, err := otelevents.New(mp.Meter("test"), locks)
			must(t, err)
			must(t, locks.Define(ctx, "pay", 2))
			must(t, locks.Define(ctx, "chat/*", 1))
			for range 150 {
				l, err := locks.TryAcquire(ctx, "pay")
				must(t, err)
				must(t, l.Release(ctx))
			}
			a, err := locks.Acquire(ctx, "chat/1")
			must(t, err)
			if _, err := locks.TryAcquire(ctx, "chat/1", sleeplock.Ref("other")); !errors.Is(err, sleeplock.ErrUnavailable) {
				t.Fatal(err)
			}
			b, err := locks.Acquire(ctx, "chat/2")
			must(t, err)
			p, err := locks.Acquire(ctx, "pay")
			must(t, err)
			got := observed(t, r)
			for _, g := range []struct {
				name, label string
				want        float64
			}{
				{"sleeplock.slots", "pay", 2}, {"sleeplock.running", "pay", 1}, {"sleeplock.waiting", "pay", 0},
				{"sleeplock.locks", "chat/*", 2}, {"sleeplock.running", "chat/*", 2}, {"sleeplock.slots", "chat/*", 2},
				{"sleeplock.acquisitions", "chat/*", 2}, {"sleeplock.acquisitions", "pay", 151},
				{"sleeplock.refusals", "chat/*", 1}, {"sleeplock.releases", "chat/*", 0}, {"sleeplock.releases", "pay", 150},
			} {
				if v, ok := got[g.name+"{"+g.label+"}"]; !ok || v != g.want {
					t.Errorf("%s{%s} = %v (%v), want %v", g.name, g.label, v, ok, g.want)
				}
			}
			for _, l := range []sleeplock.Lease{a, b, p} {
				must(t, l.Release(ctx))
			}
			if v := observed(t, r)["sleeplock.releases{chat/*}"]; v != 2 {
				t.Errorf("releases{chat/*} = %v, want 2", v)
			}
			must(t, m.Close())
		})
	}
}

// observed collects r once: "name{label}" → value, of the integer sums
// and gauges.
func observed(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	must(t, r.Collect(context.Background(), &rm))
	out := map[string]float64{}
	put := func(name string, attrs attribute.Set, v int64) {
		label, _ := attrs.Value(otelevents.LockKey)
		out[name+"{"+label.AsString()+"}"] = float64(v)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if d, ok := mt.Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					put(mt.Name, p.Attributes, p.Value)
				}
			}
			if d, ok := mt.Data.(metricdata.Gauge[int64]); ok {
				for _, p := range d.DataPoints {
					put(mt.Name, p.Attributes, p.Value)
				}
			}
		}
	}
	return out
}

// untilWaiting returns once a caller waits for name: the state is
// polled, as the test's own Locks have no notifier (so that the memory
// store's counts are those of its plain path).
func untilWaiting(t *testing.T, locks *sleeplock.Locks, name string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; {
		st, err := locks.State(context.Background(), name)
		must(t, err)
		if st.Waiting == 1 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("nobody waits for %s after 10 s", name)
		}
		time.Sleep(time.Millisecond)
	}
}
