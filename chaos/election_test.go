package chaos_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/chaos"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
)

// ownClusterOrSkip decides whether a test that makes a PostgreSQL cluster
// of its own runs: it needs root and Debian's pg_createcluster. Without
// them it skips loudly, except under CI, where it fails.
func ownClusterOrSkip(t *testing.T) {
	t.Helper()
	why := pgtest.ClusterTools()
	if why == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%v: CI must run the election chaos test on a cluster of its own", why)
	}
	t.Skip("SKIPPING THE ELECTION CHAOS TEST: " + why.Error())
}

// TestElectionChaos: five `sleeplock elect --again` processes on a
// PostgreSQL cluster of the test's own (a free port), each running a command
// that writes its term's token under Guard while it leads; the leader is
// killed (-9), paused past the TTL, cut off (pg_terminate_backend) and the
// server restarted, in turn. No write of a leader whose term had ended is
// accepted (tokens never go down in commit order), and no two leaders'
// commands run at once while both their elect processes live, and every
// candidate not killed stays one (elect --again campaigns again when the
// server cannot be reached). The run is
// short (each fault once or twice); SLEEPLOCK_ELECTION_CHAOS=DURATION
// (e.g. 10m) makes a long one (bench/README).
func TestElectionChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: not with -short")
	}
	ownClusterOrSkip(t)
	cfg := chaos.ElectionConfig{Duration: 8 * time.Second, FaultEvery: 1500 * time.Millisecond, Log: logWriter{t}}
	if v := os.Getenv("SLEEPLOCK_ELECTION_CHAOS"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SLEEPLOCK_ELECTION_CHAOS=%q: %v", v, err)
		}
		cfg.Duration, cfg.FaultEvery = d, 3*time.Second
	}
	rep, err := chaos.RunElection(context.Background(), cfg)
	if rep != nil {
		var b strings.Builder
		rep.Write(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.StaleWrites != 0 {
		t.Errorf("%d writes of a leader whose term had ended were accepted, want 0", rep.StaleWrites)
	}
	if len(rep.Overlaps) != 0 {
		t.Errorf("%d overlaps of two leaders' commands, want 0: %s", len(rep.Overlaps), strings.Join(rep.Overlaps, "; "))
	}
	if rep.Exited != 0 {
		t.Errorf("%d candidates exited by themselves, want 0: elect --again rides out the faults", rep.Exited)
	}
	if rep.Terms < 2 || rep.Writes == 0 {
		t.Errorf("%d terms, %d writes: the candidates did nothing", rep.Terms, rep.Writes)
	}
	for _, k := range []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultTerminate, chaos.FaultRestart} {
		if rep.Faults[k] == 0 {
			t.Errorf("no %s fault was injected", k)
		}
	}
}

// TestElectionChaosNegativeControl pauses the leader's elect but not its
// command, which writes on past its term: Guard must refuse its writes
// (none accepted), and the checker must find its command running while
// the next leader's ran. If it found no overlap, it could not be trusted
// to find one in TestElectionChaos.
func TestElectionChaosNegativeControl(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: not with -short")
	}
	ownClusterOrSkip(t)
	rep, err := chaos.RunElection(context.Background(), chaos.ElectionConfig{
		Duration: time.Nanosecond, FaultEvery: time.Second, Faults: []string{chaos.FaultPause},
		PauseElectOnly: true, Writes: 5000, Every: 20 * time.Millisecond, Log: logWriter{t},
	})
	if rep != nil {
		var b strings.Builder
		rep.Write(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Overlaps) == 0 {
		t.Errorf("no overlap found with the leader's command left running past its term: the checker misses them")
	}
	if rep.Refused == 0 || rep.StaleWrites != 0 {
		t.Errorf("%d writes refused, %d stale writes accepted: want Guard to refuse the ended term's writes", rep.Refused, rep.StaleWrites)
	}
}
