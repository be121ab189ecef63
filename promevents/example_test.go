package promevents_test

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/promevents"
)

// The three lines that get a Prometheus scrape going: counters and
// histograms from the events, gauges read from the store at each scrape.
func Example() {
	m := promevents.New()
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
	prometheus.MustRegister(m.Track(locks))

	http.Handle("/metrics", promhttp.Handler())
	_ = locks.Close()
}
