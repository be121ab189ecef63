// Package otelevents reports sleeplock's locks through the OpenTelemetry
// metrics API, observed from the store at collection time, and optionally
// a span for each wait:
//
//	m, err := otelevents.New(otel.Meter("sleeplock"), locks)
//	defer m.Close() // stops observing
//
// Nothing runs on the lock path: the store counts grants, releases,
// refusals, expiries, losses, wait and hold times in its lock records,
// and each collection reads them with one Locks.Stats (one query on a
// database store, counting every process's grants). The instruments are
// those of package promevents: observable counters sleeplock.acquisitions,
// .refusals, .releases, .expirations and .lost; sleeplock.wait.time and
// sleeplock.hold.time (seconds, sums) with sleeplock.holds.timed (the
// holds that hold.time sums: every one on SQLite and Redis, 1 in
// store.Stats.HoldSampling on the memory and PostgreSQL stores, and one
// every 30 s); gauges sleeplock.slots,
// .running, .expired, .waiting and .locks; and, read with one Locks.List
// more, the gauges of a stuck lock: sleeplock.hold.oldest (seconds), the
// age of the oldest hold, and sleeplock.holders.late, the holders that
// missed a renewal they owed (sleeplock.Holder.Late). The OpenTelemetry API has no
// asynchronous histogram, so the wait and hold buckets are reported by
// promevents only; the sums and counts give the means. Every measurement
// has one attribute, sleeplock.lock, whose cardinality is bounded: a
// family's members are counted under the family ("chat/*"), the store's
// entries are mapped by WithMapper, and at most 1000 distinct values are
// kept (later ones are "(other)").
//
// Elections (package election) named by WithElections have two counters
// more, with the attribute sleeplock.election: sleeplock.election.terms,
// the terms begun (the grants of the election's lock: each term is a
// change of leader, a candidate that campaigns again counting again), and
// sleeplock.election.takeovers, the terms that ended without their leader
// resigning, taken over after their TTL.
//
// For spans (WithTracer), give the Metrics to sleeplock.WithNotifier too:
// spans are made from events.
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

// ElectionKey is the attribute that names an election (WithElections).
const ElectionKey = attribute.Key("sleeplock.election")

// Other is the label of locks that came after the label limit was reached.
const Other = labels.Other

// Option configures Metrics.
type Option func(*config)

type config struct {
	labels.Config
	tracer trace.Tracer
}

// WithMapper sets the function that turns a lock name into its
// sleeplock.lock attribute (default: "chat/42" → "chat/*"). It must return
// few distinct values: the label limit (WithMaxLabels) applies to them.
func WithMapper(f func(name string) string) Option {
	return func(c *config) { c.SetMapper(f) }
}

// WithMaxLabels sets how many distinct sleeplock.lock values are kept
// (default 1000); the locks of further values are counted as "(other)".
func WithMaxLabels(n int) Option { return func(c *config) { c.MaxLabels = n } }

// WithTracer records a span named "sleeplock.wait" for each grant that
// waited and each refusal, from the events: give the Metrics to
// sleeplock.WithNotifier as well. The Notifier learns of a wait only when it ends,
// so the span is made from the event: it starts at the grant's time minus
// the time waited and ends at the grant (or the refusal, an error status);
// it has no parent, as events carry no caller context. Its attributes are
// the full lock name, the ref, the kind and the fencing token.
func WithTracer(t trace.Tracer) Option { return func(c *config) { c.tracer = t } }

// WithElections reports the elections of these names (package election;
// each is the name of its lock) with the election counters: terms and
// takeovers, 0 until the election's first campaign.
func WithElections(names ...string) Option {
	return func(c *config) { c.Elections = append(c.Elections, names...) }
}

// WithObserveTimeout bounds the store read of a collection (default 5 s).
func WithObserveTimeout(d time.Duration) Option { return func(c *config) { c.Timeout = d } }

// Metrics observes a Locks' Stats with OpenTelemetry instruments, and is
// a sleeplock.Notifier that makes spans (WithTracer).
type Metrics struct {
	cfg   config
	locks *sleeplock.Locks
	set   *labels.Set[attrs]
	reg   metric.Registration

	acq, ref, rel, exp, lost, timed metric.Int64ObservableCounter
	wait, hold                      metric.Float64ObservableCounter
	slots, running, expired         metric.Int64ObservableGauge
	waiting, count, late            metric.Int64ObservableGauge
	oldest                          metric.Float64ObservableGauge
	terms, takeovers                metric.Int64ObservableCounter
	elections                       []election
}

// election is one election's name and measurement options, made once.
type election struct {
	name string
	obs  []metric.ObserveOption
}

// attrs are one label's measurement options, made once.
type attrs struct {
	obs []metric.ObserveOption
}

// New makes the instruments with meter and observes locks' Stats at each
// collection; Close stops it. A failed store read fails the collection
// with the error.
func New(meter metric.Meter, locks *sleeplock.Locks, opts ...Option) (*Metrics, error) {
	c := config{Config: labels.DefaultConfig()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if meter == nil || locks == nil {
		return nil, errors.New("otelevents: New needs a Meter and Locks")
	}
	m := &Metrics{cfg: c, locks: locks}
	m.set = labels.NewSet(c.Mapper, c.MaxLabels, func(label string) *attrs {
		return &attrs{obs: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(LockKey.String(label)))}}
	})
	var err, e error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		var c metric.Int64ObservableCounter
		c, e = meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	seconds := func(name, desc string) metric.Float64ObservableCounter {
		var c metric.Float64ObservableCounter
		c, e = meter.Float64ObservableCounter(name, metric.WithUnit("s"), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		var g metric.Int64ObservableGauge
		g, e = meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	m.acq = counter("sleeplock.acquisitions", "{acquisition}", "Slots granted (re-entrant acquisitions not counted).")
	m.ref = counter("sleeplock.refusals", "{refusal}", "Tries and no-wait acquisitions turned down.")
	m.rel = counter("sleeplock.releases", "{release}", "Holds ended by a release (by the holder or someone else).")
	m.exp = counter("sleeplock.expirations", "{expiration}", "Leases taken over after their TTL.")
	m.lost = counter("sleeplock.lost", "{lease}", "Holds ended by someone other than their holder.")
	m.timed = counter("sleeplock.holds.timed", "{hold}", "Holds whose time sleeplock.hold.time sums (sampled on the memory and PostgreSQL stores).")
	m.wait = seconds("sleeplock.wait.time", "Time grants spent in the queue, summed (on the memory store, from the first collection on).")
	m.hold = seconds("sleeplock.hold.time", "Time the timed holds lasted, summed.")
	m.slots = gauge("sleeplock.slots", "{slot}", "Slots of the locks under the label.")
	m.running = gauge("sleeplock.running", "{holder}", "Live holders of the locks under the label.")
	m.expired = gauge("sleeplock.expired", "{holder}", "Holders past their expiry that nobody has taken over yet.")
	m.waiting = gauge("sleeplock.waiting", "{waiter}", "Callers waiting for the locks under the label.")
	m.count = gauge("sleeplock.locks", "{lock}", "Locks under the label (defined, or family members in use).")
	m.late = gauge("sleeplock.holders.late", "{holder}", "Holders that missed a renewal they owed: more than half their lease (hold, or TTL) since they last renewed; most likely dead, blocking their slots until their expiry.")
	m.oldest, e = meter.Float64ObservableGauge("sleeplock.hold.oldest", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest live hold of the locks under the label; a hold past its expiry is left out (0: none)."))
	err = errors.Join(err, e)
	m.terms = counter("sleeplock.election.terms", "{term}", "Terms begun: grants of the election's lock, each a change of leader (a candidate that campaigns again counts again).")
	m.takeovers = counter("sleeplock.election.takeovers", "{term}", "Terms that ended without their leader resigning, taken over after their TTL.")
	if err != nil {
		return nil, err
	}
	for _, n := range labels.Distinct(c.Elections) {
		m.elections = append(m.elections, election{name: n,
			obs: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(ElectionKey.String(n)))}})
	}
	m.reg, err = meter.RegisterCallback(m.observe, m.acq, m.ref, m.rel, m.exp, m.lost, m.timed, m.wait, m.hold,
		m.slots, m.running, m.expired, m.waiting, m.count, m.late, m.oldest, m.terms, m.takeovers)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Close stops observing the Locks.
func (m *Metrics) Close() error {
	if m == nil || m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}

// observe reads the Stats once and observes every instrument.
func (m *Metrics) observe(ctx context.Context, o metric.Observer) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	all, err := m.locks.Stats(ctx)
	if err != nil {
		return err
	}
	sums := m.set.Sums(all) // first: the Stats' order gives the labels
	states, err := m.locks.List(ctx)
	if err != nil {
		return err
	}
	holds := m.set.Holds(states)
	for _, sum := range sums {
		a, s := sum.Label, &sum.Stats
		o.ObserveInt64(m.acq, int64(s.Acquisitions), a.obs...)
		o.ObserveInt64(m.ref, int64(s.Refusals), a.obs...)
		o.ObserveInt64(m.rel, int64(s.Releases), a.obs...)
		o.ObserveInt64(m.exp, int64(s.Expiries), a.obs...)
		o.ObserveInt64(m.lost, int64(s.Losses), a.obs...)
		o.ObserveInt64(m.timed, int64(s.Holds.Count), a.obs...)
		o.ObserveFloat64(m.wait, s.Waits.Sum.Seconds(), a.obs...)
		o.ObserveFloat64(m.hold, s.Holds.Sum.Seconds(), a.obs...)
		o.ObserveInt64(m.slots, int64(s.Slots), a.obs...)
		o.ObserveInt64(m.running, int64(s.Running), a.obs...)
		o.ObserveInt64(m.expired, int64(s.Expired), a.obs...)
		o.ObserveInt64(m.waiting, int64(s.Waiting), a.obs...)
		o.ObserveInt64(m.count, int64(s.Locks), a.obs...)
		h := holds[a]
		o.ObserveFloat64(m.oldest, h.Oldest.Seconds(), a.obs...)
		o.ObserveInt64(m.late, int64(h.Late), a.obs...)
	}
	if len(m.elections) > 0 {
		names := make([]string, len(m.elections))
		for i, e := range m.elections {
			names[i] = e.name
		}
		for i, e := range labels.Elections(all, names) {
			o.ObserveInt64(m.terms, int64(e.Terms), m.elections[i].obs...)
			o.ObserveInt64(m.takeovers, int64(e.Takeovers), m.elections[i].obs...)
		}
	}
	return nil
}

// Notify makes the span of e when WithTracer was given (a grant that
// waited, a refusal); it implements sleeplock.Notifier. The counts do not
// need it.
func (m *Metrics) Notify(e sleeplock.Event) {
	if m.cfg.tracer == nil {
		return
	}
	ctx := context.Background()
	switch e.Type {
	case sleeplock.EventAcquired:
		if e.Waited > 0 {
			m.span(ctx, e, nil)
		}
	case sleeplock.EventRefused:
		m.span(ctx, e, errors.New("refused: held by "+holder(e.Holder)))
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
