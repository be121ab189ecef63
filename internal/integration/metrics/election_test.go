package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/internal/integration/stores"
	"github.com/sleeplock/sleeplock/otelevents"
	"github.com/sleeplock/sleeplock/promevents"
)

// TestElectionMetrics: on every store, three terms of an election, the
// first taken over after its TTL: both adapters count 3 terms and 1
// takeover under the election's name, and 0 and 0 for an election nobody
// campaigned in yet.
func TestElectionMetrics(t *testing.T) {
	for _, st := range stores.All {
		t.Run(st.Name, func(t *testing.T) {
			ctx := context.Background()
			locks := st.Open(t)
			prom := promevents.New(locks, promevents.WithElections("sched", "idle", "sched"))
			r := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			_, err := otelevents.New(mp.Meter("test"), locks, otelevents.WithElections("sched", "idle"))
			must(t, err)

			el, err := election.New(locks, "sched", election.WithTTL(time.Hour))
			must(t, err)
			// Term 1: a leader that stops renewing (a lease of the
			// election's lock under a candidate's ref, never kept alive).
			must(t, locks.Define(ctx, "sched", 1))
			_, err = locks.Acquire(ctx, "sched", sleeplock.Ref("host-a#0123456789abcdef"), sleeplock.TTL(300*time.Millisecond), sleeplock.NoKeepAlive())
			must(t, err)
			// Term 2 takes over once term 1's lease has expired; term 3
			// follows a resignation.
			for _, id := range []string{"host-b", "host-c"} {
				term, err := el.Campaign(ctx, election.Candidate{ID: id})
				must(t, err)
				must(t, term.Resign(ctx))
			}

			text, err := testutil.CollectAndFormat(prom, expfmt.TypeTextPlain, "sleeplock_election_terms_total", "sleeplock_election_takeovers_total")
			must(t, err)
			for _, line := range []string{
				`sleeplock_election_terms_total{election="sched"} 3`,
				`sleeplock_election_takeovers_total{election="sched"} 1`,
				`sleeplock_election_terms_total{election="idle"} 0`,
				`sleeplock_election_takeovers_total{election="idle"} 0`,
			} {
				if !strings.Contains(string(text), line+"\n") {
					t.Errorf("no %q in\n%s", line, text)
				}
			}

			var rm metricdata.ResourceMetrics
			must(t, r.Collect(ctx, &rm))
			got := map[string]int64{}
			for _, sm := range rm.ScopeMetrics {
				for _, mt := range sm.Metrics {
					if d, ok := mt.Data.(metricdata.Sum[int64]); ok && strings.HasPrefix(mt.Name, "sleeplock.election.") {
						for _, p := range d.DataPoints {
							v, _ := p.Attributes.Value(otelevents.ElectionKey)
							got[mt.Name+"{"+v.AsString()+"}"] = p.Value
						}
					}
				}
			}
			for k, want := range map[string]int64{
				"sleeplock.election.terms{sched}": 3, "sleeplock.election.takeovers{sched}": 1,
				"sleeplock.election.terms{idle}": 0, "sleeplock.election.takeovers{idle}": 0,
			} {
				if v, ok := got[k]; !ok || v != want {
					t.Errorf("%s = %d (%v), want %d; all: %v", k, v, ok, want, got)
				}
			}
		})
	}
}
