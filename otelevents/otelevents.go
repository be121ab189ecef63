// Package otelevents reports sleeplock's events and lock states through
// the OpenTelemetry metrics API, and optionally a span for each wait.
//
//	m, err := otelevents.New(otel.Meter("sleeplock"))
//	locks := sleeplock.New(s, sleeplock.WithInlineNotifier(m)) // or WithNotifier, with WithTracer
//	reg, err := m.Track(locks) // the gauges; reg.Unregister() to stop
//
// The instruments are those of package promevents: counters
// sleeplock.acquisitions, .refusals, .releases, .expirations and .lost;
// histograms sleeplock.wait.duration and sleeplock.hold.duration (seconds);
// gauges sleeplock.slots, .running, .waiting and .locks, observed from the
// store at collection time. Every measurement has one attribute,
// sleeplock.lock, whose cardinality is bounded: a family member
// ("chat/42") is reported under its family ("chat/*") by default (see
// WithMapper), and at most 1000 distinct values are kept (later ones are
// "(other)").
package otelevents

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/labels"
)

// LockKey is the attribute that names a lock's label (and, on spans, the
// lock).
const LockKey = attribute.Key("sleeplock.lock")

// Other is the label of locks that came after the label limit was reached.
const Other = labels.Other

// Option configures Metrics.
type Option func(*config)

type config struct {
	mapper    func(string) string
	maxLabels int
	tracer    trace.Tracer
	timeout   time.Duration
}

// WithMapper sets the function that turns a lock name into its
// sleeplock.lock attribute (default: "chat/42" → "chat/*"). It must return
// few distinct values: the label limit (WithMaxLabels) applies to them.
func WithMapper(f func(name string) string) Option {
	return func(c *config) {
		if f != nil {
			c.mapper = f
		}
	}
}

// WithMaxLabels sets how many distinct sleeplock.lock values are kept
// (default 1000); the locks of further values are counted as "(other)".
func WithMaxLabels(n int) Option { return func(c *config) { c.maxLabels = n } }

// WithTracer records a span named "sleeplock.wait" for each grant that
// waited and each refusal. The Notifier learns of a wait only when it ends,
// so the span is made from the event: it starts at the grant's time minus
// the time waited and ends at the grant (or the refusal, an error status);
// it has no parent, as events carry no caller context. Its attributes are
// the full lock name, the ref, the kind and the fencing token.
func WithTracer(t trace.Tracer) Option { return func(c *config) { c.tracer = t } }

// WithObserveTimeout bounds the store query of a collection (default 5 s).
func WithObserveTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Metrics is a sleeplock.Notifier that records events with OpenTelemetry
// instruments. Track adds the gauges.
type Metrics struct {
	cfg                            config
	meter                          metric.Meter
	set                            *labels.Set[attrs]
	acq, ref, rel, exp, lost       metric.Int64Counter
	wait, hold                     metric.Float64Histogram
	slots, running, waiting, locks metric.Int64ObservableGauge
}

// attrs are one label's measurement options, made once.
type attrs struct {
	add    []metric.AddOption
	record []metric.RecordOption
	obs    []metric.ObserveOption
}

// New makes the instruments with meter.
func New(meter metric.Meter, opts ...Option) (*Metrics, error) {
	c := config{timeout: 5 * time.Second}
	for _, o := range opts {
		o(&c)
	}
	m := &Metrics{cfg: c, meter: meter}
	m.set = labels.NewSet(c.mapper, c.maxLabels, func(label string) *attrs {
		set := attribute.NewSet(LockKey.String(label))
		return &attrs{
			add:    []metric.AddOption{metric.WithAttributeSet(set)},
			record: []metric.RecordOption{metric.WithAttributeSet(set)},
			obs:    []metric.ObserveOption{metric.WithAttributeSet(set)},
		}
	})
	var err, e error
	counter := func(name, unit, desc string) metric.Int64Counter {
		var c metric.Int64Counter
		c, e = meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	m.acq = counter("sleeplock.acquisitions", "{acquisition}", "Slots granted (re-entrant acquisitions not counted).")
	m.ref = counter("sleeplock.refusals", "{refusal}", "Tries and no-wait acquisitions turned down.")
	m.rel = counter("sleeplock.releases", "{release}", "Slots released.")
	m.exp = counter("sleeplock.expirations", "{expiration}", "Leases taken over after their TTL.")
	m.lost = counter("sleeplock.lost", "{lease}", "Holders that learned they no longer hold their lease.")
	buckets := metric.WithExplicitBucketBoundaries(0.001, 0.004, 0.016, 0.064, 0.256, 1, 4, 16, 64, 256, 1024)
	m.wait, e = meter.Float64Histogram("sleeplock.wait.duration", metric.WithUnit("s"), buckets,
		metric.WithDescription("Time spent in the queue before a grant."))
	err = errors.Join(err, e)
	m.hold, e = meter.Float64Histogram("sleeplock.hold.duration", metric.WithUnit("s"), buckets,
		metric.WithDescription("Time a slot was held, recorded at release or expiry."))
	err = errors.Join(err, e)
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		var g metric.Int64ObservableGauge
		g, e = meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	m.slots = gauge("sleeplock.slots", "{slot}", "Slots of the locks under the label.")
	m.running = gauge("sleeplock.running", "{holder}", "Holders of the locks under the label.")
	m.waiting = gauge("sleeplock.waiting", "{waiter}", "Callers waiting for the locks under the label.")
	m.locks = gauge("sleeplock.locks", "{lock}", "Locks under the label (defined, or family members in use).")
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Notify records e. It implements sleeplock.Notifier.
func (m *Metrics) Notify(e sleeplock.Event) {
	ctx := context.Background()
	switch e.Type {
	case sleeplock.EventAcquired:
		a := m.set.Get(e.Lock)
		m.acq.Add(ctx, 1, a.add...)
		m.wait.Record(ctx, e.Waited.Seconds(), a.record...)
		if m.cfg.tracer != nil && e.Waited > 0 {
			m.span(ctx, e, nil)
		}
	case sleeplock.EventRefused:
		m.ref.Add(ctx, 1, m.set.Get(e.Lock).add...)
		if m.cfg.tracer != nil {
			m.span(ctx, e, errors.New("refused: held by "+holder(e.Holder)))
		}
	case sleeplock.EventReleased:
		a := m.set.Get(e.Lock)
		m.rel.Add(ctx, 1, a.add...)
		m.hold.Record(ctx, e.Held.Seconds(), a.record...)
	case sleeplock.EventExpired:
		a := m.set.Get(e.Lock)
		m.exp.Add(ctx, 1, a.add...)
		m.hold.Record(ctx, e.Held.Seconds(), a.record...)
	case sleeplock.EventLost:
		// The hold's end is recorded by the expiry or release that caused
		// the loss.
		m.lost.Add(ctx, 1, m.set.Get(e.Lock).add...)
	}
}

func holder(kind string) string {
	if kind == "" {
		return "another holder"
	}
	return "a " + kind
}

func (m *Metrics) span(ctx context.Context, e sleeplock.Event, refused error) {
	end := e.Time
	if end.IsZero() {
		end = time.Now()
	}
	attrs := []attribute.KeyValue{LockKey.String(e.Lock)}
	if e.Ref != "" {
		attrs = append(attrs, attribute.String("sleeplock.ref", e.Ref))
	}
	if e.Kind != "" {
		attrs = append(attrs, attribute.String("sleeplock.kind", e.Kind))
	}
	if e.Token != 0 {
		attrs = append(attrs, attribute.Int64("sleeplock.token", e.Token))
	}
	_, sp := m.cfg.tracer.Start(ctx, "sleeplock.wait", trace.WithTimestamp(end.Add(-e.Waited)),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	if refused != nil {
		if e.Holder != "" {
			sp.SetAttributes(attribute.String("sleeplock.holder", e.Holder))
		}
		sp.SetStatus(codes.Error, refused.Error())
	}
	sp.End(trace.WithTimestamp(end))
}

// Track registers the gauges slots, running, waiting and locks per label,
// observed from locks' store at each collection (one List without holder
// detail). Unregister the Registration to stop.
func (m *Metrics) Track(locks *sleeplock.Locks) (metric.Registration, error) {
	return m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, m.cfg.timeout)
		defer cancel()
		states, err := locks.Store().List(ctx, false)
		if err != nil {
			return err
		}
		type sums struct{ slots, running, waiting, locks int64 }
		agg := map[*attrs]*sums{}
		var order []*attrs
		for i := range states {
			st := &states[i]
			a := m.set.Get(st.Name)
			s := agg[a]
			if s == nil {
				s = &sums{}
				agg[a] = s
				order = append(order, a)
			}
			if st.Family {
				continue // a definition: its members in use are listed on their own
			}
			s.slots += int64(st.Slots)
			s.running += int64(st.Running)
			s.waiting += int64(st.Waiting)
			s.locks++
		}
		for _, a := range order {
			s := agg[a]
			o.ObserveInt64(m.slots, s.slots, a.obs...)
			o.ObserveInt64(m.running, s.running, a.obs...)
			o.ObserveInt64(m.waiting, s.waiting, a.obs...)
			o.ObserveInt64(m.locks, s.locks, a.obs...)
		}
		return nil
	}, m.slots, m.running, m.waiting, m.locks)
}
