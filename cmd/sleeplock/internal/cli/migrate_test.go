package cli

import (
	"strings"
	"testing"
)

// TestMigrateLoggedUnlogged: migrate says which way the lease and queue
// tables are, --unlogged makes them UNLOGGED, a plain migrate leaves them
// so, --logged undoes it, and state shows the mode under its table.
func TestMigrateLoggedUnlogged(t *testing.T) {
	pg := newPG(t)
	migrate := func(want string, flags ...string) {
		t.Helper()
		out, errOut, code := pg.run(t, append([]string{"migrate"}, flags...)...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("migrate %v: exit %d %q %q, want %q", flags, code, out, errOut, want)
		}
	}
	state := func(want string) {
		t.Helper()
		out, errOut, code := pg.run(t, "state")
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("state: exit %d %q %q, want %q", code, out, errOut, want)
		}
		if out, _, _ := pg.run(t, "state", "--json"); strings.Contains(out, "tables") {
			t.Fatalf("state --json carries the mode line: %q", out)
		}
	}
	migrate("tables logged")
	state("tables logged")
	migrate("tables UNLOGGED", "--unlogged")
	state("tables UNLOGGED: leases and waiters vanish")
	migrate("tables UNLOGGED")
	migrate("tables logged", "--logged")
	state("tables logged")
	if _, errOut, code := pg.run(t, "migrate", "--logged", "--unlogged"); code != 2 || !strings.Contains(errOut, "contradict") {
		t.Fatalf("migrate --logged --unlogged: exit %d %q", code, errOut)
	}
}
