package cli

import (
	"os"
	"strings"
	"testing"
)

// testStores gives the --store (and --schema) flags of a fresh store of
// each kind: SQLite, PostgreSQL and Redis (skipped, or failed under CI,
// when unreachable), each removed when the test ends.
var testStores = map[string]func(t *testing.T) []string{
	"sqlite": func(t *testing.T) []string { return []string{"--store", newRunEnv(t).store()} },
	"postgres": func(t *testing.T) []string {
		newRunEnv(t) // never the user's own store
		pg := newPG(t)
		return []string{"--store", pg.dsn, "--schema", pg.schema}
	},
	"redis": func(t *testing.T) []string {
		newRunEnv(t) // never the user's own store
		dsn, schema, _ := newRedis(t)
		return []string{"--store", dsn, "--schema", schema}
	},
}

// TestRunSlotsOtherThanFamilys: run --slots N of a name that a family of
// other slots covers is an error (125) naming the family and its slots,
// and defines nothing; --slots equal to the family's runs in the family.
func TestRunSlotsOtherThanFamilys(t *testing.T) {
	for kind, storeArgs := range testStores {
		t.Run(kind, func(t *testing.T) {
			sa := storeArgs(t)
			r := func(verb string, args ...string) (string, string, int) {
				t.Helper()
				return run(t, append(append([]string{verb}, sa...), args...)...)
			}
			if out, errOut, code := r("define", "grp/*", "1"); code != 0 {
				t.Fatalf("define: exit %d %q %q", code, out, errOut)
			}
			_, errOut, code := r("run", "--slots", "3", "grp/5", "--", os.Args[0], "test-child-exit", "0")
			if code != exitFailed || !strings.Contains(errOut, `family "grp/*" of 1 slot, not 3`) {
				t.Fatalf("run --slots 3 in a 1-slot family: exit %d %q; want %d naming the family", code, errOut, exitFailed)
			}
			if _, errOut, code := r("run", "--slots", "1", "grp/5", "--", os.Args[0], "test-child-exit", "0"); code != 0 {
				t.Fatalf("run --slots 1 in a 1-slot family: exit %d %q", code, errOut)
			}
			out, errOut, code := r("state", "--json")
			if code != 0 {
				t.Fatalf("state: exit %d %q", code, errOut)
			}
			if strings.Contains(out, `"grp/5"`) {
				t.Fatalf("grp/5 was defined apart from its family:\n%s", out)
			}
		})
	}
}
