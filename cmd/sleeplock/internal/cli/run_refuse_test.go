package cli

import (
	"regexp"
	"strings"
	"testing"
)

// stateNow is the time of reading in state --json, which differs from
// one listing to the next.
var stateNow = regexp.MustCompile(`"now": "[^"]*"`)

// TestRefusedRunChangesNothing: a run or elect that refuses (a bad
// name, no name before "--", a weight above the slots it would define or
// that the lock has, a bad ref or kind) exits with its status, runs
// nothing and leaves the store as it found it, on every store: the state
// listing (--json, but for the time of reading) is the same, byte for
// byte, before and after.
func TestRefusedRunChangesNothing(t *testing.T) {
	cases := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"run", "z/*", "--", "echo", "RAN"}, 2, `invalid lock name "z/*"`},
		{[]string{"run", "--weight", "4", "gpu", "--", "echo", "RAN"}, exitFailed, `run would define it with 1 slot, fewer than --weight 4`},
		{[]string{"run", "-s", "--weight", "4", "gpu", "--", "echo", "RAN"}, 2, "exclude each other"},
		{[]string{"run", "-n", "--", "echo", "RAN"}, 2, "no lock name"},
		{[]string{"run", "-q", "--", "echo", "RAN"}, 2, "no lock name"},
		{[]string{"run", "--ref", "a\x01", "fresh", "--", "echo", "RAN"}, 2, "--ref"},
		{[]string{"run", "--kind", "a\nb", "fresh", "--", "echo", "RAN"}, 2, "--kind"},
		{[]string{"run", "--weight", "1000001", "fresh", "--", "echo", "RAN"}, 2, "--weight 1000001"},
		{[]string{"run", "--slots", "1000001", "fresh", "--", "echo", "RAN"}, 2, "--slots 1000001"},
		{[]string{"run", "--weight", "2", "one", "--", "echo", "RAN"}, exitFailed, `lock "one" has 1 slot, fewer than the 2 asked`},
		{[]string{"run", "--weight", "3", "fam/x", "--", "echo", "RAN"}, exitFailed, `lock "fam/x" has 1 slot, fewer than the 3 asked`},
		{[]string{"run", "--slots", "3", "fam/y", "--", "echo", "RAN"}, exitFailed, `family "fam/*" of 1 slot, not 3`},
		{[]string{"elect", "--", "echo", "RAN"}, 2, "no election name"},
		{[]string{"elect", "e/*", "--", "echo", "RAN"}, 2, `invalid lock name "e/*"`},
		{[]string{"elect", "--id", "a\x01", "e", "--", "echo", "RAN"}, 2, "candidate's ID"},
		{[]string{"elect", "--value", "a\x01", "e", "--", "echo", "RAN"}, 2, "candidate's value"},
		{[]string{"elect", "two", "--", "echo", "RAN"}, exitFailed, `election "two"`},
	}
	for kind, storeArgs := range testStores {
		t.Run(kind, func(t *testing.T) {
			sa := storeArgs(t)
			r := func(args ...string) (string, string, int) {
				t.Helper()
				// The store's flags after the verb: before "--" and NAME.
				return run(t, append(append([]string{args[0]}, sa...), args[1:]...)...)
			}
			for _, def := range [][]string{{"fam/*", "1"}, {"one", "1"}, {"two", "2"}} {
				if out, errOut, code := r("define", def[0], def[1]); code != 0 {
					t.Fatalf("define %v: exit %d %q %q", def, code, out, errOut)
				}
			}
			listing := func() string {
				t.Helper()
				out, errOut, code := r("state", "--json")
				if code != 0 {
					t.Fatalf("state: exit %d %q", code, errOut)
				}
				return stateNow.ReplaceAllString(out, `"now": …`)
			}
			before := listing()
			for _, c := range cases {
				out, errOut, code := r(c.args...)
				if code != c.code || !strings.Contains(errOut, c.says) || strings.Contains(out, "RAN") {
					t.Errorf("%q: exit %d, out %q, err %q; want %d saying %q, nothing run", c.args, code, out, errOut, c.code, c.says)
				}
				if after := listing(); after != before {
					t.Fatalf("%q changed the store:\nbefore %s\nafter  %s", c.args, before, after)
				}
			}
		})
	}
}
