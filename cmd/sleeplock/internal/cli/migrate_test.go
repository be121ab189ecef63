package cli

import (
	"strings"
	"testing"
)

// TestMigrateLoggedUnlogged: migrate says which way the lease and queue
// tables are, --unlogged makes them UNLOGGED, a plain migrate leaves them
// so, --logged undoes it, and state notes the mode on stderr, not on
// stdout, which is the table alone for a script to read (issue 42), and
// not at all with -q.
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
		if code != 0 || !strings.Contains(errOut, want) || strings.Contains(out, "tables") || strings.Contains(out, "schema") {
			t.Fatalf("state: exit %d, stdout %q, stderr %q; want %q on stderr alone", code, out, errOut, want)
		}
		for _, args := range [][]string{{"state", "-q"}, {"state", "--stats", "-q"}, {"state", "--json"}} {
			out, errOut, code := pg.run(t, args...)
			if code != 0 || strings.Contains(out+errOut, "tables") {
				t.Fatalf("%v: exit %d, stdout %q, stderr %q: carries the mode line", args, code, out, errOut)
			}
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
