// Package promevents exports sleeplock's locks as Prometheus metrics, read
// from the store at scrape time:
//
//	locks := sleeplock.New(store)
//	prometheus.MustRegister(promevents.New(locks))
//	http.Handle("/metrics", promhttp.Handler())
//
// Nothing runs on the lock path: the store counts grants, releases,
// refusals, expiries, losses, wait and hold times in its lock records, and
// each scrape reads them with one Locks.Stats (one query on a database
// store, counting every process's grants), and the holders with one
// Locks.List for the gauges of a stuck lock: sleeplock_oldest_hold_seconds,
// the age of the oldest live hold, and sleeplock_late_holders, the holders that
// missed a renewal they owed (sleeplock.Holder.Late), most likely dead
// while their lease runs out. No notifier is needed; events (WithNotifier)
// stay for logs and streams.
//
// Label cardinality is bounded: every metric has one label, "lock"; a
// family's members are counted under the family ("chat/*"), and the
// store's entries are mapped by WithMapper (default Family) to at most
// 1000 distinct labels (see WithMaxLabels), later ones reported as
// "(other)".
//
// Elections (package election) named by WithElections have two counters
// more, labelled "election": sleeplock_election_terms_total, the terms
// begun (the grants of the election's lock: each term is a change of
// leader, a candidate that campaigns again counting again), and
// sleeplock_election_takeovers_total, the terms that ended without their
// leader resigning, taken over after their TTL. Both come from the same
// read, every process's terms included.
package promevents

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/labels"
	"github.com/sleeplock/sleeplock/store"
)

// Other is the label of locks that came after the label limit was reached.
const Other = labels.Other

// Family is the default mapper: "chat/42" and "chat/7/x" → "chat/*";
// a name without "/" is its own label.
func Family(name string) string { return labels.Family(name) }

// Option configures Metrics.
type Option func(*config)

type config struct {
	labels.Config
	namespace string
}

// WithMapper sets the function that turns a lock or family name of
// Locks.Stats into its "lock" label (default Family). It must return few
// distinct values: the label limit (WithMaxLabels) applies to its
// results.
func WithMapper(f func(name string) string) Option {
	return func(c *config) { c.SetMapper(f) }
}

// WithMaxLabels sets how many distinct "lock" labels are kept (default
// 1000); the locks of further labels are counted under "(other)".
func WithMaxLabels(n int) Option { return func(c *config) { c.MaxLabels = n } }

// WithElections reports the elections of these names (package election;
// each is the name of its lock) with the election metrics: terms and
// takeovers, 0 until the election's first campaign.
func WithElections(names ...string) Option {
	return func(c *config) { c.Elections = append(c.Elections, names...) }
}

// WithNamespace sets the metric name prefix (default "sleeplock").
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithScrapeTimeout bounds the store read of a scrape (default 5 s).
func WithScrapeTimeout(d time.Duration) Option { return func(c *config) { c.Timeout = d } }

// Metrics is a prometheus.Collector of a Locks' Stats.
type Metrics struct {
	cfg   config
	locks *sleeplock.Locks
	set   *labels.Set[string]
	descs [kinds]*prometheus.Desc
}

const (
	acquisitions = iota
	releases
	refusals
	expirations
	lost
	waitSeconds
	holdSeconds
	slots
	running
	expired
	waiting
	count
	oldestHold
	lateHolders
	terms
	takeovers
	kinds
)

// New returns the Metrics of locks; register it with a
// prometheus.Registerer.
func New(locks *sleeplock.Locks, opts ...Option) *Metrics {
	c := config{Config: labels.DefaultConfig(), namespace: "sleeplock"}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	m := &Metrics{cfg: c, locks: locks}
	m.cfg.Elections = labels.Distinct(c.Elections)
	m.set = labels.NewSet(c.Mapper, c.MaxLabels, func(label string) *string { return &label })
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(c.namespace, "", name), help, []string{"lock"}, nil)
	}
	m.descs = [kinds]*prometheus.Desc{
		acquisitions: desc("acquisitions_total", "Slots granted (re-entrant acquisitions not counted)."),
		releases:     desc("releases_total", "Holds ended by a release (by the holder or someone else)."),
		refusals:     desc("refusals_total", "Tries and no-wait acquisitions turned down."),
		expirations:  desc("expirations_total", "Leases taken over after their TTL."),
		lost:         desc("lost_total", "Holds ended by someone other than their holder (taken over, or released by another)."),
		waitSeconds:  desc("wait_seconds", "Time grants spent in the queue (grants that did not wait, and on the memory store those before the first scrape: 0)."),
		holdSeconds:  desc("hold_seconds", "Time a hold lasted, of sampled holds (memory and PostgreSQL stores: 1 in Stats.HoldSampling, by fencing token, and one every 30 s, so a lock taken seldom has figures; releases_total+expirations_total count them all)."),
		slots:        desc("slots", "Slots of the locks under the label."),
		running:      desc("running", "Live holders of the locks under the label."),
		expired:      desc("expired", "Holders past their expiry that nobody has taken over yet."),
		waiting:      desc("waiting", "Callers waiting for the locks under the label."),
		count:        desc("locks", "Locks under the label (defined, or family members in use)."),
		oldestHold:   desc("oldest_hold_seconds", "Age of the oldest live hold of the locks under the label; a hold past its expiry is left out (0: none)."),
		lateHolders:  desc("late_holders", "Holders that missed a renewal they owed: more than half their lease (hold, or TTL) since they last renewed; most likely dead, blocking their slots until their expiry."),
		terms: prometheus.NewDesc(prometheus.BuildFQName(c.namespace, "election", "terms_total"),
			"Terms begun: grants of the election's lock, each a change of leader (a candidate that campaigns again counts again).", []string{"election"}, nil),
		takeovers: prometheus.NewDesc(prometheus.BuildFQName(c.namespace, "election", "takeovers_total"),
			"Terms that ended without their leader resigning, taken over after their TTL.", []string{"election"}, nil),
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Locks.Stats. A failed
// store read fails the scrape with the error.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
	defer cancel()
	all, err := m.locks.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(m.descs[acquisitions], err)
		return
	}
	sums := m.set.Sums(all) // first: the Stats' order gives the labels
	states, err := m.locks.List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(m.descs[oldestHold], err)
		return
	}
	holds := m.set.Holds(states)
	for _, sum := range sums {
		l, a := sum.Label, &sum.Stats
		counter := func(k int, v uint64) {
			ch <- prometheus.MustNewConstMetric(m.descs[k], prometheus.CounterValue, float64(v), *l)
		}
		gauge := func(k, v int) {
			ch <- prometheus.MustNewConstMetric(m.descs[k], prometheus.GaugeValue, float64(v), *l)
		}
		counter(acquisitions, a.Acquisitions)
		counter(releases, a.Releases)
		counter(refusals, a.Refusals)
		counter(expirations, a.Expiries)
		counter(lost, a.Losses)
		ch <- histogram(m.descs[waitSeconds], &a.Waits, *l)
		ch <- histogram(m.descs[holdSeconds], &a.Holds, *l)
		gauge(slots, a.Slots)
		gauge(running, a.Running)
		gauge(expired, a.Expired)
		gauge(waiting, a.Waiting)
		gauge(count, a.Locks)
		h := holds[l]
		ch <- prometheus.MustNewConstMetric(m.descs[oldestHold], prometheus.GaugeValue, h.Oldest.Seconds(), *l)
		gauge(lateHolders, h.Late)
	}
	for _, e := range labels.Elections(all, m.cfg.Elections) {
		ch <- prometheus.MustNewConstMetric(m.descs[terms], prometheus.CounterValue, float64(e.Terms), e.Name)
		ch <- prometheus.MustNewConstMetric(m.descs[takeovers], prometheus.CounterValue, float64(e.Takeovers), e.Name)
	}
}

func histogram(d *prometheus.Desc, h *sleeplock.Histogram, label string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(store.HistogramBounds))
	var n uint64
	for i, b := range store.HistogramBounds {
		n += h.Buckets[i]
		buckets[b.Seconds()] = n
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets, label)
}
