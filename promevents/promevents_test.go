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
	"github.com/sleeplock/sleeplock/promevents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCounters: each event type moves its counter under the lock's label,
// and waits and holds land in the histograms.
func TestCounters(t *testing.T) {
	ctx := context.Background()
	m := promevents.New()
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
	must(t, locks.Define(ctx, "pay", 1))
	must(t, locks.Define(ctx, "chat/*", 1))
	a, err := locks.Acquire(ctx, "pay")
	must(t, err)
	if _, err := locks.TryAcquire(ctx, "pay"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("try: %v", err)
	}
	got := make(chan error)
	go func() {
		b, err := locks.Acquire(ctx, "pay")
		if err == nil {
			err = b.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, func() bool { st, _ := locks.State(ctx, "pay"); return st.Waiting == 1 })
	must(t, a.Release(ctx))
	must(t, <-got)
	c, err := locks.Acquire(ctx, "chat/42")
	must(t, err)
	must(t, c.Release(ctx))
	must(t, locks.Close()) // delivers the queued events

	for _, tc := range []struct {
		metric string
		got    float64
		want   float64
	}{
		{"acquisitions pay", value(t, m, "sleeplock_acquisitions_total", "pay"), 2},
		{"refusals pay", value(t, m, "sleeplock_refusals_total", "pay"), 1},
		{"releases pay", value(t, m, "sleeplock_releases_total", "pay"), 2},
		{"acquisitions chat/*", value(t, m, "sleeplock_acquisitions_total", "chat/*"), 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.metric, tc.got, tc.want)
		}
	}
	text := scrape(t, m)
	for _, line := range []string{
		`sleeplock_wait_seconds_count{lock="pay"} 2`,
		`sleeplock_hold_seconds_count{lock="pay"} 2`,
		`sleeplock_hold_seconds_count{lock="chat/*"} 1`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("no %q in\n%s", line, text)
		}
	}
}

// TestCardinality: 100,000 distinct family members make one label.
func TestCardinality(t *testing.T) {
	ctx := context.Background()
	m := promevents.New()
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
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
	must(t, locks.Close())
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(m))
	n, err := testutil.GatherAndCount(reg)
	must(t, err)
	// 2 labels × (5 counters + 2 histograms).
	if n != 2*7 {
		t.Errorf("%d series after 100,000 family members, want 14", n)
	}
	if v := value(t, m, "sleeplock_acquisitions_total", "chat/*"); v != 50_000 {
		t.Errorf("chat/* acquisitions %v, want 50000", v)
	}
}

// TestMaxLabels: past the limit, locks share the label "(other)".
func TestMaxLabels(t *testing.T) {
	m := promevents.New(promevents.WithMaxLabels(3), promevents.WithMapper(func(s string) string { return s }))
	for i := range 10 {
		m.Notify(sleeplock.Event{Type: sleeplock.EventRefused, Lock: fmt.Sprintf("lock%d", i)})
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
	m := promevents.New(promevents.WithMapper(func(s string) string { return "all" }))
	m.Notify(sleeplock.Event{Type: sleeplock.EventLost, Lock: "a"})
	m.Notify(sleeplock.Event{Type: sleeplock.EventExpired, Lock: "b/1", Held: time.Second})
	if v := value(t, m, "sleeplock_lost_total", "all"); v != 1 {
		t.Errorf("lost = %v", v)
	}
	if v := value(t, m, "sleeplock_expirations_total", "all"); v != 1 {
		t.Errorf("expirations = %v", v)
	}
}

// TestGauges: slots, running, waiting and locks are read from the store at
// scrape time and summed per label.
func TestGauges(t *testing.T) {
	ctx := context.Background()
	m := promevents.New()
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
	defer locks.Close()
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
	text := scrape(t, m.Track(locks))
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

// TestScrapeError: a store that cannot answer fails the scrape.
func TestScrapeError(t *testing.T) {
	m := promevents.New()
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
	must(t, locks.Close())
	reg := prometheus.NewRegistry()
	must(t, reg.Register(m.Track(locks)))
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
