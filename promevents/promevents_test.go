package promevents_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/fakeclock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/promevents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCardinality: 100,000 distinct family members make one label each
// family, and are all counted.
func TestCardinality(t *testing.T) {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	m := promevents.New(locks)
	must(t, locks.Define(ctx, "chat/*", 1))
	must(t, locks.Define(ctx, "user/*", 2))
	for i := range 100_000 {
		name := fmt.Sprintf("chat/%d", i)
		if i%2 == 1 {
			name = fmt.Sprintf("user/%d/x", i)
		}
		l, err := locks.TryAcquire(ctx, name)
		must(t, err)
		must(t, l.Release(ctx))
	}
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(m))
	n, err := testutil.GatherAndCount(reg)
	must(t, err)
	// 2 labels × (5 counters + 2 histograms + 7 gauges).
	if n != 2*14 {
		t.Errorf("%d series after 100,000 family members, want 28", n)
	}
	if v := value(t, m, "sleeplock_acquisitions_total", "chat/*"); v != 50_000 {
		t.Errorf("chat/* acquisitions %v, want 50000", v)
	}
}

// TestMaxLabels: past the limit, locks share the label "(other)".
func TestMaxLabels(t *testing.T) {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	m := promevents.New(locks, promevents.WithMaxLabels(3), promevents.WithMapper(func(s string) string { return s }))
	for i := range 10 {
		name := fmt.Sprintf("lock%d", i)
		must(t, locks.Define(ctx, name, 1))
		_, err := locks.TryAcquire(ctx, name)
		must(t, err)
		_, err = locks.TryAcquire(ctx, name)
		if !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatal(err)
		}
	}
	n := testutil.CollectAndCount(m, "sleeplock_refusals_total")
	if n != 4 {
		t.Errorf("%d series, want 3 + (other)", n)
	}
	if v := value(t, m, "sleeplock_refusals_total", promevents.Other); v != 7 {
		t.Errorf("(other) = %v, want 7", v)
	}
}

// TestMapper: a custom mapper chooses the label.
func TestMapper(t *testing.T) {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	m := promevents.New(locks, promevents.WithMapper(func(s string) string { return "all" }))
	must(t, locks.Define(ctx, "a", 1))
	must(t, locks.Define(ctx, "b/*", 1))
	for _, name := range []string{"a", "b/1"} {
		l, err := locks.TryAcquire(ctx, name)
		must(t, err)
		must(t, l.Release(ctx))
	}
	if v := value(t, m, "sleeplock_acquisitions_total", "all"); v != 2 {
		t.Errorf("acquisitions = %v", v)
	}
}

// TestGauges: slots, running, waiting and locks are read from the store at
// scrape time and summed per label.
func TestGauges(t *testing.T) {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	m := promevents.New(locks)
	must(t, locks.Define(ctx, "pay", 3))
	must(t, locks.Define(ctx, "chat/*", 1))
	_, err := locks.Acquire(ctx, "pay")
	must(t, err)
	_, err = locks.Acquire(ctx, "chat/1")
	must(t, err)
	_, err = locks.Acquire(ctx, "chat/2")
	must(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = locks.Acquire(wctx, "chat/1")
	}()
	waitFor(t, func() bool { st, _ := locks.State(ctx, "chat/1"); return st.Waiting == 1 })
	text := scrape(t, m)
	cancel()
	<-done
	for _, line := range []string{
		`sleeplock_slots{lock="pay"} 3`,
		`sleeplock_running{lock="pay"} 1`,
		`sleeplock_waiting{lock="pay"} 0`,
		`sleeplock_locks{lock="pay"} 1`,
		`sleeplock_slots{lock="chat/*"} 2`,
		`sleeplock_running{lock="chat/*"} 2`,
		`sleeplock_waiting{lock="chat/*"} 1`,
		`sleeplock_locks{lock="chat/*"} 2`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("no %q in\n%s", line, text)
		}
	}
}

// TestStuckGauges: a holder that stopped renewing counts in late_holders
// before its expiry, and oldest_hold_seconds gives its hold's age; a lock
// just taken has none late (issue 42).
func TestStuckGauges(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	locks := sleeplock.New(memstore.New(memstore.WithClock(clock)), sleeplock.WithTTL(30*time.Second))
	defer locks.Close()
	m := promevents.New(locks)
	must(t, locks.Define(ctx, "stuck", 1))
	must(t, locks.Define(ctx, "fresh", 1))
	_, err := locks.TryAcquire(ctx, "stuck", sleeplock.NoKeepAlive())
	must(t, err)
	clock.Advance(20 * time.Second) // past half the TTL, with no renewal
	_, err = locks.TryAcquire(ctx, "fresh", sleeplock.NoKeepAlive())
	must(t, err)
	text := scrape(t, m)
	for _, line := range []string{
		`sleeplock_late_holders{lock="stuck"} 1`,
		`sleeplock_oldest_hold_seconds{lock="stuck"} 20`,
		`sleeplock_late_holders{lock="fresh"} 0`,
		`sleeplock_oldest_hold_seconds{lock="fresh"} 0`,
		`sleeplock_running{lock="stuck"} 1`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("no %q in\n%s", line, text)
		}
	}
}

// TestScrapeError: a store that cannot answer fails the scrape.
func TestScrapeError(t *testing.T) {
	locks := sleeplock.New(nil)
	m := promevents.New(locks)
	must(t, locks.Close())
	reg := prometheus.NewRegistry()
	must(t, reg.Register(m))
	if _, err := reg.Gather(); err == nil || !errors.Is(err, sleeplock.ErrClosed) && !strings.Contains(err.Error(), "closed") {
		t.Fatalf("gather on a closed store: %v", err)
	}
}

// value is the counter name{lock=label} of m, 0 when it has no series.
func value(t *testing.T, m *promevents.Metrics, name, label string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	must(t, reg.Register(m))
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			if mf.GetName() == name && mt.GetLabel()[0].GetValue() == label {
				return mt.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func scrape(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(c))
	var b strings.Builder
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			lbl := ""
			if len(mt.GetLabel()) > 0 {
				lbl = fmt.Sprintf(`{lock=%q}`, mt.GetLabel()[0].GetValue())
			}
			switch {
			case mt.Gauge != nil:
				fmt.Fprintf(&b, "%s%s %v\n", mf.GetName(), lbl, mt.GetGauge().GetValue())
			case mt.Counter != nil:
				fmt.Fprintf(&b, "%s%s %v\n", mf.GetName(), lbl, mt.GetCounter().GetValue())
			case mt.Histogram != nil:
				fmt.Fprintf(&b, "%s_count%s %v\n", mf.GetName(), lbl, mt.GetHistogram().GetSampleCount())
			}
		}
	}
	return b.String()
}

// waitFor polls cond: the queue has no event for "a caller joined".
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
