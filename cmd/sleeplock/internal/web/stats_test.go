package web

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/promevents"
)

// TestStatsJSON: GET /api/stats answers lockview's form of Locks.Stats,
// and /metrics (promevents on the same Locks) shows the same counts.
func TestStatsJSON(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	locks := sleeplock.New(st)
	defer locks.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(promevents.New(locks))
	e := newEnvOn(t, st, Config{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	must(t, e.locks.Define(ctx, "pay", 1))
	must(t, e.locks.Define(ctx, "chat/*", 1))
	for range 5 {
		l, err := e.locks.TryAcquire(ctx, "pay")
		must(t, err)
		must(t, l.Release(ctx))
	}
	_, err := e.locks.TryAcquire(ctx, "chat/1")
	must(t, err)
	if _, err := e.locks.TryAcquire(ctx, "chat/1"); err == nil {
		t.Fatal("a held one-slot lock granted twice")
	}

	code, _, body := e.do(t, "GET", "/api/stats", "")
	if code != 200 {
		t.Fatalf("GET /api/stats: %d %s", code, body)
	}
	var got []lockview.Stats
	must(t, json.Unmarshal(body, &got))
	all, err := e.locks.Stats(ctx)
	must(t, err)
	if want := lockview.StatsOf(all); !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /api/stats\n got %+v\nwant %+v", got, want)
	}
	if len(got) != 2 || got[0].Name != "chat/*" || got[0].Acquisitions != 1 || got[0].Refusals != 1 || got[1].Acquisitions != 5 || got[1].Releases != 5 {
		t.Fatalf("stats %+v", got)
	}
	_, _, metrics := e.do(t, "GET", "/metrics", "")
	for _, line := range []string{`sleeplock_acquisitions_total{lock="pay"} 5`, `sleeplock_refusals_total{lock="chat/*"} 1`, `sleeplock_running{lock="chat/*"} 1`} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("no %q in /metrics:\n%s", line, metrics)
		}
	}
	if code, _, _ := e.do(t, "GET", "/api/stats?x=1", ""); code != 400 {
		t.Fatalf("GET /api/stats?x=1: %d", code)
	}
}
