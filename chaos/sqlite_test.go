package chaos_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/chaos"
)

// TestChaosSQLite runs the workers against one SQLite file shared by their
// processes (sqlitestore; the run's records in PostgreSQL) while the driver
// kills them (-9, in the middle of their commits), pauses them past their
// TTL and makes the file read-only under them: no lock ever has more
// holders than slots, no write of a holder whose lease was taken over is
// accepted, no token is granted to two refs (a grant acknowledged and not
// in the file), every slot is grantable TTL + 1s after the last kill, and
// every error sleeplock returned to them is typed (chaos.Typed). With
// SLEEPLOCK_CHAOS_SQLITE_LONG=1 it runs for two minutes instead of 15 s.
func TestChaosSQLite(t *testing.T) {
	d := 15 * time.Second
	if os.Getenv("SLEEPLOCK_CHAOS_SQLITE_LONG") == "1" {
		d = 2 * time.Minute
	}
	rep := run(t, chaos.Config{
		SQLite:  filepath.Join(t.TempDir(), "locks.db"),
		Workers: 3, Goroutines: 3, Members: 4,
		Duration: d, TTL: 2 * time.Second, WaiterTTL: time.Second,
		FaultEvery: 1500 * time.Millisecond,
		Faults:     []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultReadOnly},
	})
	f := rep.Findings
	if v := rep.Violations(); v != 0 {
		t.Errorf("%d safety violations (overlaps %d, late writes %d, writes by a lost lease %d, tokens granted to two refs %d), want 0",
			v, f.Overlaps, f.LateWrites, f.Unheld, f.TokensTwice)
	}
	if rep.LostSlots != 0 {
		t.Errorf("%d slots not grantable after the last kill, want 0: %s", rep.LostSlots, strings.Join(rep.Stuck, "; "))
	}
	if len(rep.Untyped) != 0 {
		t.Errorf("%d untyped errors, want 0: %s", len(rep.Untyped), strings.Join(rep.Untyped[:min(5, len(rep.Untyped))], "; "))
	}
	for _, k := range []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultReadOnly} {
		skipped := slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.HasPrefix(s, "fault "+k) })
		if f.Faults[k] == 0 && !skipped {
			t.Errorf("no %s fault was injected", k)
		}
	}
	if f.Writes == 0 || f.Holdings == 0 {
		t.Errorf("%d holdings, %d writes: the workers did nothing", f.Holdings, f.Writes)
	}
}
