package chaos_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/chaos"
)

// TestConfigErrors: a run or a worker configured with something unusable
// is an error matching ErrInvalidConfig that names it, before anything
// starts.
func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  chaos.Config
		want string
	}{
		{chaos.Config{DSN: "postgres://x", Faults: []string{"flood"}}, `"flood"`},
		{chaos.Config{DSN: "postgres://x", Workers: -1}, "Workers"},
		{chaos.Config{DSN: "postgres://x", TTL: -time.Second}, "negative"},
		{chaos.Config{DSN: "postgres://x", Workers: 2, Spare: 2}, "Spare"},
		{chaos.Config{DSN: "postgres://x", Ops: -1}, "Ops"},
		{chaos.Config{}, "DSN"},
	} {
		rep, err := chaos.Run(ctx, c.cfg)
		if !errors.Is(err, sleeplock.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidConfig naming %s", c.cfg, err, c.want)
		}
		if rep != nil {
			t.Errorf("Run(%+v) made a report", c.cfg)
		}
	}
	for _, c := range []struct {
		cfg  chaos.FailoverConfig
		want string
	}{
		{chaos.FailoverConfig{}, "DSN"},
		{chaos.FailoverConfig{Chaos: chaos.Config{DSN: "postgres://x", Faults: []string{chaos.FaultRestart}}}, "restart"},
		{chaos.FailoverConfig{Chaos: chaos.Config{DSN: "postgres://x"}, Stall: -time.Second}, "Stall"},
		{chaos.FailoverConfig{Chaos: chaos.Config{DSN: "postgres://x", SQLite: "/tmp/x.db"}}, "SQLite"},
	} {
		rep, err := chaos.RunFailover(ctx, c.cfg)
		if !errors.Is(err, sleeplock.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RunFailover(%+v) = %v, want ErrInvalidConfig naming %s", c.cfg, err, c.want)
		}
		if rep != nil {
			t.Errorf("RunFailover(%+v) made a report", c.cfg)
		}
	}
	for _, c := range []struct {
		cfg  chaos.Config
		want string
	}{
		{chaos.Config{DSN: "postgres://x", Faults: []string{chaos.FaultReadOnly}}, "readonly"},
		{chaos.Config{DSN: "postgres://x", SQLite: "/tmp/x.db", Faults: []string{chaos.FaultTerminate}}, "terminate"},
		{chaos.Config{DSN: "postgres://x", SQLite: "/tmp/x.db", NoGuard: true}, "NoGuard"},
		{chaos.Config{DSN: "postgres://x", Faults: []string{chaos.FaultClientPause}}, "client-pause"},
		{chaos.Config{DSN: "postgres://x", Redis: "redis://x", Faults: []string{chaos.FaultRestart}}, "RestartRedis"},
		{chaos.Config{DSN: "postgres://x", Redis: "redis://x", SQLite: "/tmp/x.db"}, "Redis"},
		{chaos.Config{DSN: "postgres://x", Redis: "redis://x", NoGuard: true}, "NoGuard"},
		{chaos.Config{Redis: "redis://x", Faults: []string{chaos.FaultRestart}}, "DSN"},
	} {
		if _, err := chaos.Run(ctx, c.cfg); !errors.Is(err, sleeplock.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidConfig naming %s", c.cfg, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-dsn", "x", "-schema", "s", "-store", "mysql"}, "-store"},
		{[]string{"-dsn", "x", "-schema", "s", "-store", "sqlite"}, "-ledger"},
		{[]string{"-dsn", "x", "-schema", "s", "-store", "redis"}, "-ledger"},
		{[]string{"-schema", "s"}, "-dsn"},
		{[]string{"-dsn", "x", "-schema", "s", "-ttl", "soon"}, "-ttl"},
		{[]string{"-dsn", "x", "-schema", "s", "-goroutines", "0"}, "-goroutines"},
		{[]string{"-dsn", "x", "-schema", "s", "extra"}, "extra"},
	} {
		_, err := chaos.ParseWorkerArgs(c.args, io.Discard)
		if !errors.Is(err, sleeplock.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseWorkerArgs(%q) = %v, want ErrInvalidConfig naming %s", c.args, err, c.want)
		}
	}
}

// TestWorkerArgs: the driver's command line for a worker parses back into
// the same configuration.
func TestWorkerArgs(t *testing.T) {
	want := chaos.WorkerConfig{
		DSN: "postgres://u@h/db?x=1", Schema: "s", Name: "w7", AppName: "app w7", Goroutines: 3, Members: 5,
		TTL: 2 * time.Second, WaiterTTL: time.Second, Poll: 5 * time.Millisecond, Hold: 30 * time.Millisecond,
		Writes: 4, AcquireTimeout: 5 * time.Second, NoGuard: false, NoAcquireAll: true, Seed: 42,
		Ledger: "postgres://l@h/ledger", Store: chaos.StoreSQLite,
	}
	got, err := chaos.ParseWorkerArgs(want.Args(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
}
