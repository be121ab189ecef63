package promevents_test

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/promevents"
)

// The three lines that get a Prometheus scrape going: every metric is
// read from the store's counters at each scrape, nothing runs on the lock
// path.
func Example() {
	// readme:begin
	locks := sleeplock.New(nil) // your store; nil is the memory store
	prometheus.MustRegister(promevents.New(locks))
	http.Handle("/metrics", promhttp.Handler())
	// readme:end

	_ = locks.Close()
}
