package otelevents_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/otelevents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// collected is what a manual reader collected: name → label → value
// (sums, gauges) or count (histograms).
type collected map[string]map[string]float64

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	must(t, r.Collect(context.Background(), &rm))
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			vals := map[string]float64{}
			label := func(s attribute.Set) string { v, _ := s.Value(otelevents.LockKey); return v.AsString() }
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					vals[label(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					vals[label(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					vals[label(p.Attributes)] = float64(p.Count)
				}
			}
			out[m.Name] = vals
		}
	}
	return out
}

func setup(t *testing.T, opts ...otelevents.Option) (*sdkmetric.ManualReader, *otelevents.Metrics) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelevents.New(mp.Meter("test"), opts...)
	must(t, err)
	return r, m
}

// TestInstruments: the events move the counters and histograms under the
// lock's label; the gauges are observed from the store.
func TestInstruments(t *testing.T) {
	ctx := context.Background()
	r, m := setup(t)
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
	reg, err := m.Track(locks)
	must(t, err)
	must(t, locks.Define(ctx, "pay", 2))
	must(t, locks.Define(ctx, "chat/*", 1))
	a, err := locks.Acquire(ctx, "chat/1")
	must(t, err)
	if _, err := locks.TryAcquire(ctx, "chat/1"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatal(err)
	}
	_, err = locks.Acquire(ctx, "chat/2")
	must(t, err)
	_, err = locks.Acquire(ctx, "pay")
	must(t, err)
	got := collect(t, r)
	for _, g := range []struct {
		name, label string
		want        float64
	}{
		{"sleeplock.slots", "pay", 2}, {"sleeplock.running", "pay", 1}, {"sleeplock.waiting", "pay", 0},
		{"sleeplock.locks", "chat/*", 2}, {"sleeplock.running", "chat/*", 2}, {"sleeplock.slots", "chat/*", 2},
	} {
		if v, ok := got[g.name][g.label]; !ok || v != g.want {
			t.Errorf("%s{%s} = %v (%v), want %v", g.name, g.label, v, ok, g.want)
		}
	}
	must(t, a.Release(ctx))
	must(t, reg.Unregister())
	must(t, locks.Close()) // delivers the events
	got = collect(t, r)
	for _, g := range []struct {
		name, label string
		want        float64
	}{
		{"sleeplock.acquisitions", "chat/*", 2}, {"sleeplock.acquisitions", "pay", 1},
		{"sleeplock.refusals", "chat/*", 1}, {"sleeplock.releases", "chat/*", 1},
		{"sleeplock.wait.duration", "chat/*", 2}, {"sleeplock.hold.duration", "chat/*", 1},
	} {
		if v := got[g.name][g.label]; v != g.want {
			t.Errorf("%s{%s} = %v, want %v", g.name, g.label, v, g.want)
		}
	}
}

// TestCardinality: 100,000 family members make one label; past the label
// limit, locks share "(other)".
func TestCardinality(t *testing.T) {
	r, m := setup(t, otelevents.WithMaxLabels(5))
	for i := range 100_000 {
		m.Notify(sleeplock.Event{Type: sleeplock.EventAcquired, Lock: fmt.Sprintf("chat/%d", i)})
	}
	for i := range 10 {
		m.Notify(sleeplock.Event{Type: sleeplock.EventRefused, Lock: fmt.Sprintf("plain-%d", i)})
	}
	got := collect(t, r)
	if n := len(got["sleeplock.acquisitions"]); n != 1 || got["sleeplock.acquisitions"]["chat/*"] != 100_000 {
		t.Errorf("acquisitions %v", got["sleeplock.acquisitions"])
	}
	if n := len(got["sleeplock.refusals"]); n != 5 || got["sleeplock.refusals"][otelevents.Other] != 6 {
		t.Errorf("refusals %v: want 4 labels + (other) with 6", got["sleeplock.refusals"])
	}
}

// TestSpans: a grant that waited makes a span from its start of waiting to
// the grant; a refusal makes an error span.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	_, m := setup(t, otelevents.WithTracer(tp.Tracer("test")))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.Notify(sleeplock.Event{Type: sleeplock.EventAcquired, Lock: "chat/42", Ref: "turn-1", Kind: "turn", Token: 7, Waited: 1500 * time.Millisecond, Time: at})
	m.Notify(sleeplock.Event{Type: sleeplock.EventAcquired, Lock: "chat/42", Ref: "turn-2"}) // no wait: no span
	m.Notify(sleeplock.Event{Type: sleeplock.EventRefused, Lock: "chat/42", Holder: "click", Time: at})
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	w := spans[0]
	if w.Name() != "sleeplock.wait" || !w.EndTime().Equal(at) || w.EndTime().Sub(w.StartTime()) != 1500*time.Millisecond || w.Status().Code == codes.Error {
		t.Errorf("wait span %s %v..%v %v", w.Name(), w.StartTime(), w.EndTime(), w.Status())
	}
	want := map[attribute.Key]string{"sleeplock.lock": "chat/42", "sleeplock.ref": "turn-1", "sleeplock.kind": "turn", "sleeplock.token": "7"}
	for _, kv := range w.Attributes() {
		if v, ok := want[kv.Key]; ok && v == kv.Value.String() {
			delete(want, kv.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("wait span lacks %v: %v", want, w.Attributes())
	}
	if f := spans[1]; f.Status().Code != codes.Error || f.Status().Description != "refused: held by a click" || f.StartTime() != f.EndTime() {
		t.Errorf("refusal span %v %v..%v", f.Status(), f.StartTime(), f.EndTime())
	}
}
