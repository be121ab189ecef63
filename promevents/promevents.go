// Package promevents exports sleeplock's events and lock states as
// Prometheus metrics.
//
//	m := promevents.New()
//	locks := sleeplock.New(s, sleeplock.WithInlineNotifier(m))
//	prometheus.MustRegister(m.Track(locks))
//
// Notify is cheap and never blocks (a label lookup and an atomic add), so
// Metrics is best given to sleeplock.WithInlineNotifier, which calls it on
// the lock path with no queue; give it to sleeplock.WithNotifier instead
// when a mapper of your own (WithMapper) is slow.
//
// Counters and histograms come from the events; the gauges (slots,
// running, waiting) are read from the store at scrape time, so they are
// right even for changes made by other processes.
//
// Label cardinality is bounded: every metric has one label, "lock", and a
// family member ("chat/42") is reported under its family ("chat/*") by
// default (see WithMapper); at most 1000 distinct labels are kept (see
// WithMaxLabels), later ones are reported as "(other)".
package promevents

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/labels"
)

// Other is the label of locks that came after the label limit was reached.
const Other = labels.Other

// Family is the default mapper: "chat/42" and "chat/7/x" → "chat/*";
// a name without "/" is its own label.
func Family(name string) string { return labels.Family(name) }

// Option configures Metrics.
type Option func(*config)

type config struct {
	namespace string
	mapper    func(string) string
	maxLabels int
	wait      []float64
	hold      []float64
	timeout   time.Duration
}

// WithMapper sets the function that turns a lock name into its "lock"
// label (default Family). It must return few distinct values: the label
// limit (WithMaxLabels) applies to its results.
func WithMapper(f func(name string) string) Option {
	return func(c *config) {
		if f != nil {
			c.mapper = f
		}
	}
}

// WithMaxLabels sets how many distinct "lock" labels are kept (default
// 1000); the locks of further labels are counted under "(other)".
func WithMaxLabels(n int) Option { return func(c *config) { c.maxLabels = n } }

// WithNamespace sets the metric name prefix (default "sleeplock").
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithBuckets sets the histogram buckets, in seconds, of wait and hold
// times (nil keeps the default: 1 ms to about 10 min).
func WithBuckets(wait, hold []float64) Option {
	return func(c *config) {
		if wait != nil {
			c.wait = wait
		}
		if hold != nil {
			c.hold = hold
		}
	}
}

// WithScrapeTimeout bounds the store query of a scrape (default 5 s).
func WithScrapeTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Metrics is a sleeplock.Notifier that counts events, and a
// prometheus.Collector of those counts. Track adds the gauges.
type Metrics struct {
	cfg    config
	set    *labels.Set[series]
	acq    *prometheus.CounterVec
	ref    *prometheus.CounterVec
	rel    *prometheus.CounterVec
	exp    *prometheus.CounterVec
	lost   *prometheus.CounterVec
	wait   *prometheus.HistogramVec
	hold   *prometheus.HistogramVec
	slots  *prometheus.Desc
	run    *prometheus.Desc
	queued *prometheus.Desc
	count  *prometheus.Desc
}

// series are one label's instruments, resolved once.
type series struct {
	label                    string
	acq, ref, rel, exp, lost prometheus.Counter
	wait, hold               prometheus.Observer
}

// New returns Metrics; give it to sleeplock.WithInlineNotifier (or
// WithNotifier) and register it
// (or what Track returns) with a prometheus.Registerer.
func New(opts ...Option) *Metrics {
	c := config{namespace: "sleeplock", timeout: 5 * time.Second,
		wait: prometheus.ExponentialBuckets(0.001, 4, 11), hold: prometheus.ExponentialBuckets(0.001, 4, 11)}
	for _, o := range opts {
		o(&c)
	}
	ns := c.namespace
	lbl := []string{"lock"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, lbl)
	}
	m := &Metrics{
		cfg:  c,
		acq:  counter("acquisitions_total", "Slots granted (re-entrant acquisitions not counted)."),
		ref:  counter("refusals_total", "Tries and no-wait acquisitions turned down."),
		rel:  counter("releases_total", "Slots released."),
		exp:  counter("expirations_total", "Leases taken over after their TTL."),
		lost: counter("lost_total", "Holders that learned they no longer hold their lease."),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "wait_seconds",
			Help: "Time spent in the queue before a grant.", Buckets: c.wait}, lbl),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "hold_seconds",
			Help: "Time a slot was held, observed at release or expiry.", Buckets: c.hold}, lbl),
	}
	m.slots = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "slots"), "Slots of the locks under the label, read from the store at scrape time.", lbl, nil)
	m.run = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "running"), "Holders of the locks under the label, read from the store at scrape time.", lbl, nil)
	m.queued = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "waiting"), "Callers waiting for the locks under the label, read from the store at scrape time.", lbl, nil)
	m.count = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "locks"), "Locks under the label (defined, or family members in use), read from the store at scrape time.", lbl, nil)
	m.set = labels.NewSet(c.mapper, c.maxLabels, func(label string) *series {
		return &series{
			label: label,
			acq:   m.acq.WithLabelValues(label), ref: m.ref.WithLabelValues(label),
			rel: m.rel.WithLabelValues(label), exp: m.exp.WithLabelValues(label),
			lost: m.lost.WithLabelValues(label),
			wait: m.wait.WithLabelValues(label), hold: m.hold.WithLabelValues(label),
		}
	})
	return m
}

// Notify counts e. It implements sleeplock.Notifier.
func (m *Metrics) Notify(e sleeplock.Event) {
	switch e.Type {
	case sleeplock.EventAcquired:
		s := m.set.Get(e.Lock)
		s.acq.Inc()
		s.wait.Observe(e.Waited.Seconds())
	case sleeplock.EventRefused:
		m.set.Get(e.Lock).ref.Inc()
	case sleeplock.EventReleased:
		s := m.set.Get(e.Lock)
		s.rel.Inc()
		s.hold.Observe(e.Held.Seconds())
	case sleeplock.EventExpired:
		s := m.set.Get(e.Lock)
		s.exp.Inc()
		s.hold.Observe(e.Held.Seconds())
	case sleeplock.EventLost:
		// The hold's end is observed by the expiry or release that caused
		// the loss; counting it here too would observe it twice.
		m.set.Get(e.Lock).lost.Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.acq.Describe(ch)
	m.ref.Describe(ch)
	m.rel.Describe(ch)
	m.exp.Describe(ch)
	m.lost.Describe(ch)
	m.wait.Describe(ch)
	m.hold.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.acq.Collect(ch)
	m.ref.Collect(ch)
	m.rel.Collect(ch)
	m.exp.Collect(ch)
	m.lost.Collect(ch)
	m.wait.Collect(ch)
	m.hold.Collect(ch)
}

// Track returns a Collector of m's metrics plus the gauges slots,
// running, waiting and locks per label, read from locks' store at each
// scrape (one List without holder detail). A failed store read fails the
// scrape with the error.
func (m *Metrics) Track(locks *sleeplock.Locks) prometheus.Collector {
	return &tracked{m: m, locks: locks}
}

type tracked struct {
	m     *Metrics
	locks *sleeplock.Locks
}

func (t *tracked) Describe(ch chan<- *prometheus.Desc) {
	t.m.Describe(ch)
	ch <- t.m.slots
	ch <- t.m.run
	ch <- t.m.queued
	ch <- t.m.count
}

type gauges struct{ slots, running, waiting, locks int }

func (t *tracked) Collect(ch chan<- prometheus.Metric) {
	t.m.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), t.m.cfg.timeout)
	defer cancel()
	states, err := t.locks.Store().List(ctx, false)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(t.m.slots, err)
		return
	}
	agg := make(map[*series]*gauges)
	var order []*series
	for i := range states {
		st := &states[i]
		s := t.m.set.Get(st.Name)
		g := agg[s]
		if g == nil {
			g = &gauges{}
			agg[s] = g
			order = append(order, s)
		}
		if st.Family {
			continue // a definition: its members in use are listed on their own
		}
		g.slots += st.Slots
		g.running += st.Running
		g.waiting += st.Waiting
		g.locks++
	}
	for _, s := range order {
		g := agg[s]
		ch <- prometheus.MustNewConstMetric(t.m.slots, prometheus.GaugeValue, float64(g.slots), s.label)
		ch <- prometheus.MustNewConstMetric(t.m.run, prometheus.GaugeValue, float64(g.running), s.label)
		ch <- prometheus.MustNewConstMetric(t.m.queued, prometheus.GaugeValue, float64(g.waiting), s.label)
		ch <- prometheus.MustNewConstMetric(t.m.count, prometheus.GaugeValue, float64(g.locks), s.label)
	}
}
