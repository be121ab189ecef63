package chaos_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/chaos"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// TestChaosRedis runs the workers against a Redis server of the test's
// own (redisstore; the run's ledger in PostgreSQL) while the driver kills
// them (-9), pauses them past their TTL (SIGSTOP), kills their
// connections (CLIENT KILL) and pauses every client of the server past
// the TTL (CLIENT PAUSE), with the AOF off, and with the AOF on
// (appendfsync always) and restarts of the server (SIGKILL) too. Each
// fenced write appends its token to its resource, a Redis list, through
// Guard, and reads the server's clock in the same script. No lock ever has
// more holders than slots, no write of a holder whose lease was taken
// over is accepted, no write of a one-slot resource goes back to an older
// token, no acknowledged write or grant is lost (no token is granted to two
// refs), every slot is grantable TTL + 1s after the last kill, and every
// error sleeplock returned is typed. With SLEEPLOCK_CHAOS_REDIS_LONG=1 each
// runs for five minutes instead of 15 s.
func TestChaosRedis(t *testing.T) {
	d := 15 * time.Second
	if os.Getenv("SLEEPLOCK_CHAOS_REDIS_LONG") == "1" {
		d = 5 * time.Minute
	}
	faults := []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultTerminate, chaos.FaultClientPause}
	for _, c := range []struct {
		name   string
		args   []string
		faults []string
	}{
		{"aof-off", nil, faults},
		{"aof-always", []string{"--appendonly", "yes", "--appendfsync", "always"}, append(slices.Clone(faults), chaos.FaultRestart)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("chaos run: not with -short")
			}
			srv := redistest.Start(t, 0, c.args...)
			rep := run(t, chaos.Config{
				Redis:   srv.URL(),
				Workers: 3, Goroutines: 3, Members: 4,
				Duration: d, TTL: 2 * time.Second, WaiterTTL: time.Second,
				FaultEvery: 1500 * time.Millisecond,
				Faults:     c.faults,
				RestartRedis: func(context.Context) error {
					return srv.Restart()
				},
			})
			f, rf := rep.Findings, rep.Redis
			if v := rep.Violations(); v != 0 {
				t.Errorf("%d safety violations (overlaps %d, late writes %d, tokens granted to two refs %d, writes back to an older token %d, acknowledged writes lost %d), want 0",
					v, f.Overlaps, f.LateWrites, f.TokensTwice, rf.Backwards, rf.Missing)
			}
			if rep.LostSlots != 0 {
				t.Errorf("%d slots not grantable after the last kill, want 0: %s", rep.LostSlots, strings.Join(rep.Stuck, "; "))
			}
			if len(rep.Untyped) != 0 {
				t.Errorf("%d untyped errors, want 0: %s", len(rep.Untyped), strings.Join(rep.Untyped[:min(5, len(rep.Untyped))], "; "))
			}
			for _, k := range c.faults {
				if f.Faults[k] == 0 {
					t.Errorf("no %s fault was injected", k)
				}
			}
			if f.Writes == 0 || f.Holdings == 0 || rf.Accepted < f.Writes {
				t.Errorf("%d holdings, %d writes in the ledger, %d in Redis: the workers did nothing, or Redis lost writes", f.Holdings, f.Writes, rf.Accepted)
			}
			if n := redisKeys(t, srv); n != 0 {
				t.Errorf("%d keys of the run left in Redis", n)
			}
		})
	}
}

// redisKeys is the number of keys on srv.
func redisKeys(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	c := srv.Client()
	defer func() { _ = c.Close() }()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
