package otelevents_test

import (
	"context"
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
	"github.com/sleeplock/sleeplock/internal/fakeclock"
	"github.com/sleeplock/sleeplock/memstore"
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
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					vals[label(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					vals[label(p.Attributes)] = p.Value
				}
			}
			out[m.Name] = vals
		}
	}
	return out
}

func setup(t *testing.T, locks *sleeplock.Locks, opts ...otelevents.Option) (*sdkmetric.ManualReader, *otelevents.Metrics) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelevents.New(mp.Meter("test"), locks, opts...)
	must(t, err)
	return r, m
}

// TestCardinality: 10,000 family members make one label; past the label
// limit, locks share "(other)".
func TestCardinality(t *testing.T) {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	r, _ := setup(t, locks, otelevents.WithMaxLabels(5), otelevents.WithMapper(func(s string) string { return s }))
	must(t, locks.Define(ctx, "chat/*", 1))
	for i := range 10_000 {
		l, err := locks.TryAcquire(ctx, fmt.Sprintf("chat/%d", i))
		must(t, err)
		must(t, l.Release(ctx))
	}
	for i := range 10 {
		name := fmt.Sprintf("plain-%d", i)
		must(t, locks.Define(ctx, name, 1))
		_, err := locks.TryAcquire(ctx, name)
		must(t, err)
		if _, err := locks.TryAcquire(ctx, name); err == nil {
			t.Fatal("granted twice")
		}
	}
	got := collect(t, r)
	if got["sleeplock.acquisitions"]["chat/*"] != 10_000 {
		t.Errorf("acquisitions %v", got["sleeplock.acquisitions"])
	}
	if n := len(got["sleeplock.refusals"]); n != 6 || got["sleeplock.refusals"][otelevents.Other] != 6 {
		t.Errorf("refusals %v: want chat/* and 4 labels, + (other) with 6", got["sleeplock.refusals"])
	}
}

// TestStuckGauges: a holder that stopped renewing counts in
// sleeplock.holders.late before its expiry, and sleeplock.hold.oldest gives
// its hold's age; a lock just taken has none late (issue 42).
func TestStuckGauges(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	locks := sleeplock.New(memstore.New(memstore.WithClock(clock)), sleeplock.WithTTL(30*time.Second))
	defer locks.Close()
	r, _ := setup(t, locks)
	must(t, locks.Define(ctx, "stuck", 1))
	must(t, locks.Define(ctx, "fresh", 1))
	_, err := locks.TryAcquire(ctx, "stuck", sleeplock.NoKeepAlive())
	must(t, err)
	clock.Advance(20 * time.Second) // past half the TTL, with no renewal
	_, err = locks.TryAcquire(ctx, "fresh", sleeplock.NoKeepAlive())
	must(t, err)
	got := collect(t, r)
	if late := got["sleeplock.holders.late"]; late["stuck"] != 1 || late["fresh"] != 0 || len(late) != 2 {
		t.Errorf("sleeplock.holders.late %v, want stuck 1, fresh 0", late)
	}
	if oldest := got["sleeplock.hold.oldest"]; oldest["stuck"] != 20 || oldest["fresh"] != 0 || len(oldest) != 2 {
		t.Errorf("sleeplock.hold.oldest %v, want stuck 20, fresh 0", oldest)
	}
}

// TestSpans: a grant that waited makes a span from its start of waiting to
// the grant; a refusal makes an error span.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	locks := sleeplock.New(nil)
	defer locks.Close()
	_, m := setup(t, locks, otelevents.WithTracer(tp.Tracer("test")))
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
