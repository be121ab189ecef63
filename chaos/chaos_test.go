package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/chaos"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
)

var (
	workerDir  string
	workerOnce sync.Once
	workerBin  string
	workerErr  error

	cliDir string // the binaries of TestCLIChaos (Linux)
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		for _, dir := range []string{workerDir, cliDir} {
			if dir != "" {
				_ = os.RemoveAll(dir)
			}
		}
	}))
}

// worker builds the worker command once per test run.
func worker(t *testing.T) string {
	t.Helper()
	workerOnce.Do(func() {
		workerDir, workerErr = os.MkdirTemp("", "sleeplock-chaos-test-")
		if workerErr == nil {
			workerBin, workerErr = chaos.BuildWorker(context.Background(), workerDir)
		}
	})
	if workerErr != nil {
		t.Fatal(workerErr)
	}
	return workerBin
}

// dbURL is the test database: SLEEPLOCK_TEST_DATABASE_URL or the local one.
func dbURL() string { return pgtest.URL() }

// newPool connects to the test database, or skips (fails under CI) when it
// is unreachable.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return pgtest.Pool(t, nil)
}

// logWriter sends each line to t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func run(t *testing.T, cfg chaos.Config) *chaos.Report {
	t.Helper()
	if testing.Short() {
		t.Skip("chaos run: not with -short")
	}
	pool := newPool(t)
	cfg.DSN = dbURL()
	cfg.WorkerBin = worker(t)
	cfg.Log = logWriter{t}
	rep, err := chaos.Run(context.Background(), cfg)
	if rep != nil {
		var b strings.Builder
		rep.Write(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", rep.Schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %s left behind", rep.Schema)
	}
	return rep
}

// TestChaosShort kills (-9), pauses past the TTL and disconnects workers
// that take a one-slot family and a three-slot lock and write through
// Guard: no lock ever has more holders than slots, no write of a holder
// whose lease was taken over is accepted, and once every worker is killed
// every slot is grantable again TTL + 1s later on the database's clock.
// The first worker is a spare: never killed, it lives the whole run.
func TestChaosShort(t *testing.T) {
	rep := run(t, chaos.Config{
		Workers: 3, Goroutines: 4, Members: 4, Spare: 1,
		Duration: 18 * time.Second, TTL: 2 * time.Second, WaiterTTL: time.Second,
		FaultEvery: 1500 * time.Millisecond, ProgressEvery: 5 * time.Second,
		Faults: []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultTerminate},
	})
	if !slices.ContainsFunc(rep.RSS, func(m chaos.WorkerRSS) bool { return m.Worker == "w1" }) {
		t.Errorf("the spare worker w1 was not running at the end: %+v", rep.RSS)
	}
	f := rep.Findings
	if v := f.Violations(); v != 0 {
		t.Errorf("%d safety violations (overlaps %d, late writes %d, writes by a lost lease %d), want 0", v, f.Overlaps, f.LateWrites, f.Unheld)
	}
	if rep.LostSlots != 0 {
		t.Errorf("%d slots not grantable %v after the last kill, want 0: %s", rep.LostSlots, rep.Config.TTL+time.Second, strings.Join(rep.Stuck, "; "))
	}
	for _, k := range []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultTerminate} {
		if f.Faults[k] == 0 {
			t.Errorf("no %s fault was injected", k)
		}
	}
	if f.Writes == 0 || f.Holdings == 0 {
		t.Errorf("%d holdings, %d writes: the workers did nothing", f.Holdings, f.Writes)
	}
	if f.MaxHolders[chaos.Pool] > chaos.PoolSlots {
		t.Errorf("%s had %d holders at once", chaos.Pool, f.MaxHolders[chaos.Pool])
	}
}

// TestChaosNegativeControl runs workers that write without Guard while the
// driver pauses them past their TTL: the checker must find the writes of
// holders whose leases were taken over. If it found none, it could not be
// trusted to find them in TestChaosShort.
func TestChaosNegativeControl(t *testing.T) {
	rep := run(t, chaos.Config{
		Workers: 4, Goroutines: 6, Members: 4,
		Duration: 10 * time.Second, TTL: 2 * time.Second, WaiterTTL: time.Second,
		Hold: 300 * time.Millisecond, Writes: 6, NoGuard: true, NoAcquireAll: true,
		FaultEvery: 2 * time.Second, PauseFor: 4 * time.Second, Faults: []string{chaos.FaultPause},
	})
	if rep.Findings.Violations() == 0 {
		t.Errorf("no violation found without Guard and with paused holders: the checker misses them")
	}
	if rep.Findings.Faults[chaos.FaultPause] == 0 {
		t.Errorf("no pause was injected")
	}
}

// TestChaosRestart adds immediate restarts of PostgreSQL to the faults,
// on a cluster of the test's own (pg_createcluster, a free port): never the
// shared one. It creates a cluster, so it runs only when
// SLEEPLOCK_CHAOS_RESTART=1; without pg_createcluster or root it skips the
// restarts loudly and runs the rest.
func TestChaosRestart(t *testing.T) {
	if os.Getenv("SLEEPLOCK_CHAOS_RESTART") != "1" {
		t.Skip("set SLEEPLOCK_CHAOS_RESTART=1 to restart PostgreSQL on a cluster of the test's own")
	}
	rep := run(t, chaos.Config{
		Workers: 3, Goroutines: 4, Members: 4,
		Duration: 30 * time.Second, TTL: 2 * time.Second, WaiterTTL: time.Second,
		FaultEvery: 1500 * time.Millisecond,
		Faults:     []string{chaos.FaultKill, chaos.FaultRestart, chaos.FaultPause, chaos.FaultTerminate},
	})
	for _, s := range rep.Skipped {
		t.Log("SKIPPED: " + s)
	}
	f := rep.Findings
	if v := f.Violations(); v != 0 {
		t.Errorf("%d safety violations (overlaps %d, late writes %d, writes by a lost lease %d), want 0", v, f.Overlaps, f.LateWrites, f.Unheld)
	}
	if rep.LostSlots != 0 {
		t.Errorf("%d slots not grantable after the last kill, want 0: %s", rep.LostSlots, strings.Join(rep.Stuck, "; "))
	}
}

// randomSchema returns a fresh schema name, dropped when the test ends.
func randomSchema(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "chaos_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if err := chaos.DropSchema(context.Background(), pool, name); err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return name
}
