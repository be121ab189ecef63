package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// state --stats prints the counters of Locks.Stats, a family's members
// folded in, as a table and as lockview's JSON, and rejects a name it has
// no entry for.
func TestStateStats(t *testing.T) {
	db := filepath.Join(t.TempDir(), "locks.db")
	s, err := sqlitestore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	locks := sleeplock.New(s)
	defer locks.Close()
	ctx := t.Context()
	for _, d := range []struct {
		name  string
		slots int
	}{{"pay", 1}, {"chat/*", 1}} {
		if err := locks.Define(ctx, d.name, d.slots); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"pay", "pay", "pay", "chat/1", "chat/2"} {
		l, err := locks.TryAcquire(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held, err := locks.TryAcquire(ctx, "pay")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx) //nolint:errcheck // the test's end
	if _, err := locks.TryAcquire(ctx, "pay"); err == nil {
		t.Fatal("a held one-slot lock granted twice")
	}
	st := "sqlite:" + db
	out, errOut, code := run(t, "state", "--store", st, "--stats", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []lockview.Stats
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != 2 || got[0].Name != "chat/*" || got[0].Acquisitions != 2 || got[0].Releases != 2 ||
		got[1].Name != "pay" || got[1].Acquisitions != 4 || got[1].Releases != 3 || got[1].Refusals != 1 || got[1].Running != 1 {
		t.Fatalf("state --stats --json:\n%s", out)
	}
	out, errOut, code = run(t, "state", "--store", st, "--stats", "pay")
	if code != 0 || !strings.Contains(out, "ACQUIRED") || !strings.Contains(out, "pay") || strings.Contains(out, "chat/*") {
		t.Fatalf("state --stats pay: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := run(t, "state", "--store", st, "--stats", "chat/1"); code != 2 || !strings.Contains(errOut, "family") {
		t.Fatalf("state --stats chat/1: exit %d %q", code, errOut)
	}
}

// TestMeanDurations: state --stats prints MEAN WAIT and MEAN HOLD as
// durations of 3 significant digits, never in scientific notation.
func TestMeanDurations(t *testing.T) {
	for _, c := range []struct {
		totalMS float64
		n       uint64
		want    string
	}{
		{3000, 1, "3s"},
		{2520, 2, "1.26s"},
		{1263.4, 1, "1.26s"},
		{45.67, 1, "45.7ms"},
		{0.1234, 1, "123µs"},
		{123456, 1, "2m3s"},
		{0, 1, "0s"},
		{5, 0, "-"},
	} {
		if got := meanMS(c.totalMS, c.n); got != c.want {
			t.Errorf("meanMS(%v, %d) = %q; want %q", c.totalMS, c.n, got, c.want)
		}
	}
}
