package cli

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
)

// sqliteDSN is a --store of a SQLite file of the test's own.
func sqliteDSN(t *testing.T) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "locks.db")
}

// A warning about the store's configuration is shown where the operator
// can act on it (migrate, state, serve), never on every run from cron,
// and -q silences it (issue 42 B2). The shared Redis keeps nothing on
// disk, which Open warns about.
func TestConfigWarningsWhereActionable(t *testing.T) {
	dsn, schema, s := newRedis(t)
	warnings, err := redisstore.Check(t.Context(), s.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) == 0 {
		t.Skip("this Redis keeps its data on disk: nothing to warn about")
	}
	store := []string{"--store", dsn, "--schema", schema}
	cmd := func(args ...string) (string, string) {
		t.Helper()
		out, errOut, code := run(t, append(slices.Clone(store), args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		return out, errOut
	}
	for _, args := range [][]string{
		{"run", "jobs", "--", os.Args[0], "test-child-exit", "0"},
		{"define", "reports", "2"},
		{"release", "jobs", "--ref", "nobody", "--stale"},
		{"elect", "e", "--", os.Args[0], "test-child-exit", "0"},
		{"leader", "e"},
		{"delete", "reports"},
	} {
		if args[0] == "release" || args[0] == "leader" {
			// Their status is not the point: only what they print.
			_, errOut, _ := run(t, append(slices.Clone(store), args...)...)
			if strings.Contains(errOut, "warning") {
				t.Errorf("%q warns: %q", args, errOut)
			}
			continue
		}
		if _, errOut := cmd(args...); strings.Contains(errOut, "warning") {
			t.Errorf("%q warns: %q", args, errOut)
		}
	}
	for _, args := range [][]string{{"state"}, {"migrate"}} {
		if _, errOut := cmd(args...); !strings.Contains(errOut, "sleeplock: warning: "+warnings[0]) {
			t.Errorf("%q: stderr %q; want the warning %q", args, errOut, warnings[0])
		}
		if out, errOut := cmd(append(args, "-q")...); errOut != "" || args[0] == "migrate" && out != "" {
			t.Errorf("%q -q: stdout %q, stderr %q; want nothing but errors", args, out, errOut)
		}
	}
	// run -q refused prints nothing at all.
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	held, err := locks.Acquire(t.Context(), "jobs", sleeplock.Ref("other"), sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(t.Context()) }()
	out, errOut, code := run(t, append(slices.Clone(store), "run", "-q", "-n", "jobs", "--", os.Args[0], "test-child-exit", "0")...)
	if code != 1 || out != "" || errOut != "" {
		t.Errorf("run -q -n on a held lock: exit %d, stdout %q, stderr %q; want 1 and nothing", code, out, errOut)
	}
}

// Every duration flag takes seconds, as flock does, and Go durations,
// through one parser (issue 42 B5).
func TestDurationFlagsTakeSeconds(t *testing.T) {
	db := sqliteDSN(t)
	// Each command line parses, and then fails for a reason of its own:
	// never "invalid value" for the duration.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--ttl", "5", "--grace", "2", "--wait", "5", "-n", "L", "true"}, "--wait and --no-wait exclude each other"},
		{[]string{"run", "--ttl", "5s", "--grace", "2s", "--wait", "5s", "-n", "L", "true"}, "--wait and --no-wait exclude each other"},
		{[]string{"run", "--ttl", "4", "--grace", "3", "L", "true"}, "--grace 3s: want more than 0 and at most half of --ttl 4s"},
		{[]string{"elect", "--ttl", "5", "e"}, "give an election NAME and a COMMAND"},
		{[]string{"state", "--every", "1"}, "--every is for --watch"},
		{[]string{"state", "--every", "1.5s"}, "--every is for --watch"},
		{[]string{"serve", "--poll", "1", "extra"}, "unexpected arguments"},
		{[]string{"demo", "--work", "1", "--jitter", "0.1", "--tasks", "0"}, "tasks"},
	} {
		args := c.args
		if !storeless[args[0]] {
			args = append([]string{"--store", db}, args...)
		}
		_, errOut, code := run(t, args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "invalid value") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	out, errOut, code := run(t, "run", "--store", db, "--ttl", "5", "--grace", "1", "--wait", "5", "L", "--", os.Args[0], "test-child-exit", "0")
	if code != 0 {
		t.Errorf("run --ttl 5 --grace 1 --wait 5: exit %d %q %q", code, out, errOut)
	}
	for _, c := range []struct {
		in   string
		want time.Duration
	}{{"5", 5 * time.Second}, {".5", 500 * time.Millisecond}, {"1m", time.Minute}, {"1m30s", 90 * time.Second}, {"-1", -time.Second}} {
		if got, err := parseDuration(c.in); err != nil || got != c.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "x", "5 s", "NaN", "Inf", "1e300"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) took it", bad)
		}
	}
	if _, errOut, code := run(t, "run", "--ttl", "x", "L", "true"); code != 2 || !strings.Contains(errOut, "want a duration (10m, 1.5s) or seconds (5, 0.5)") {
		t.Errorf("--ttl x: exit %d, stderr %q", code, errOut)
	}
}

// A TTL below the floor is refused with the floor named, before the store
// is touched (issue 42 B5: --ttl 1ms used to end in an instant 122).
func TestTTLFloor(t *testing.T) {
	db := sqliteDSN(t)
	for _, args := range [][]string{
		{"run", "--ttl", "1ms", "L", "--", os.Args[0], "test-child-exit", "0"},
		{"run", "--ttl", "0.5", "L", "--", os.Args[0], "test-child-exit", "0"},
		{"elect", "--ttl", "999ms", "E", "--", os.Args[0], "test-child-exit", "0"},
	} {
		_, errOut, code := run(t, append([]string{"--store", db}, args...)...)
		if code != 2 || !strings.Contains(errOut, "a TTL is at least 1s") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming the floor 1s", args, code, errOut)
		}
	}
	if out, _, _ := run(t, "state", "--store", db, "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("a refused TTL left locks: %s", out)
	}
	if _, errOut, code := run(t, "run", "--store", db, "--ttl", "1", "L", "--", os.Args[0], "test-child-exit", "0"); code != 0 {
		t.Errorf("--ttl 1 (the floor): exit %d, stderr %q", code, errOut)
	}
	for _, cmd := range []string{"run", "elect"} {
		if out, _, _ := run(t, "help", cmd); !strings.Contains(out, "at least 1s") {
			t.Errorf("help %s does not name the TTL's floor", cmd)
		}
	}
}

// Each command names itself in its errors: elect's command that does not
// exist is elect's error, not run's (issue 42 B5).
func TestCommandNamesItself(t *testing.T) {
	_, errOut, code := run(t, "elect", "--store", sqliteDSN(t), "e", "--", "/nonexistent")
	if code != exitNotFound || !strings.HasPrefix(errOut, "sleeplock elect: /nonexistent: command not found") || strings.Contains(errOut, "sleeplock run") {
		t.Errorf("elect of a missing command: exit %d, stderr %q", code, errOut)
	}
}

// leader and state of a name that does not exist say so (issue 42 B5):
// not "vacant: no leader".
func TestNoSuchElectionOrLock(t *testing.T) {
	db := sqliteDSN(t)
	out, errOut, code := run(t, "leader", "--store", db, "nosuch")
	if code != 2 || strings.Contains(out, "vacant") || !strings.Contains(errOut, `no election "nosuch"`) {
		t.Errorf("leader nosuch: exit %d, stdout %q, stderr %q; want 2 and no election", code, out, errOut)
	}
	out, errOut, code = run(t, "state", "--store", db, "nosuch")
	if code != 1 || out != "" || !strings.Contains(errOut, `no lock "nosuch"`) {
		t.Errorf("state nosuch: exit %d, stdout %q, stderr %q; want 1 and no lock", code, out, errOut)
	}
	// An election that exists and has nobody leading is vacant, status 1.
	if _, errOut, code := run(t, "elect", "--store", db, "e", "--", os.Args[0], "test-child-exit", "0"); code != 0 {
		t.Fatalf("elect: exit %d %q", code, errOut)
	}
	if out, errOut, code := run(t, "leader", "--store", db, "e"); code != 1 || out != "vacant: no leader\n" {
		t.Errorf("leader of a vacant election: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// help --help and help -h print help's help (issue 42 B5).
func TestHelpOfHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}, {"help", "help"}, {"--help", "--help"}} {
		out, errOut, code := run(t, args...)
		if code != 0 || !strings.HasPrefix(out, "usage: sleeplock help [COMMAND]") || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// An unknown command suggests the one meant (issue 42 B5).
func TestUnknownCommandSuggests(t *testing.T) {
	for in, want := range map[string]string{"status": "state", "list": "state", "ls": "state", "show": "state",
		"stat": "state", "elcet": "elect", "relase": "release", "Leader": "leader"} {
		_, errOut, code := run(t, in)
		if code != 2 || !strings.Contains(errOut, "did you mean "+want+"?") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and a hint of %s", in, code, errOut, want)
		}
		if _, errOut, _ := run(t, "help", in); !strings.Contains(errOut, "did you mean "+want+"?") {
			t.Errorf("help %s: stderr %q; want a hint of %s", in, errOut, want)
		}
	}
	for _, in := range []string{"xyzzy", "a", "go"} {
		if _, errOut, code := run(t, in); code != 2 || strings.Contains(errOut, "did you mean") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and no hint", in, code, errOut)
		}
	}
}

// A count of one is in the singular, in the CLI's words and the library's
// (issue 42 B5: "1 slots"), which the CLI prints as they are
// (store.TestErrorCountsSingularAndPlural).
func TestSingularCounts(t *testing.T) {
	db := sqliteDSN(t)
	if _, errOut, code := run(t, "define", "--store", db, "one", "1"); code != 0 {
		t.Fatal(errOut)
	}
	for _, args := range [][]string{
		{"run", "--weight", "2", "one", "true"},
		{"define", "one", "2"},
	} {
		_, errOut, code := run(t, append([]string{"--store", db}, args...)...)
		if code == 0 || !strings.Contains(errOut, "1 slot") || strings.Contains(errOut, "1 slots") {
			t.Errorf("%q: exit %d, stderr %q; want 1 slot, in the singular", args, code, errOut)
		}
	}
}

// version shows the commit of a build stamped by Go, with its time, and
// says how to stamp one that is not (issue 42 B5).
func TestVersionStamp(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "b1d1fde"}, {Key: "vcs.time", Value: "2026-12-07T14:48:29Z"}, {Key: "vcs.modified", Value: "false"}}}
	if got := versionLine(bi); !strings.HasPrefix(got, "sleeplock 0.2.0 (commit b1d1fde of 2026-12-07T14:48:29Z) go") {
		t.Errorf("stamped build: %q", got)
	}
	bi.Settings = nil
	if got := versionLine(bi); !strings.Contains(got, "-buildvcs=true") {
		t.Errorf("unstamped build from a clone: %q; want how to stamp it", got)
	}
	bi.Main.Version = "v0.2.1-0.20260101000000-0123abcd0123"
	if got := versionLine(bi); !strings.HasPrefix(got, "sleeplock 0.2.0 (commit 0123abcd0123) go") {
		t.Errorf("go install …@COMMIT: %q", got)
	}
}

// --prefix is Redis's key prefix beside --schema (issue 42 B5): the same
// setting, both given must agree, and it is for Redis only.
func TestRedisPrefixFlag(t *testing.T) {
	dsn, schema, _ := newRedis(t)
	if _, errOut, code := run(t, "define", "--store", dsn, "--schema", schema, "jobs", "2"); code != 0 {
		t.Fatal(errOut)
	}
	for _, args := range [][]string{
		{"state", "--store", dsn, "--prefix", schema, "jobs"},
		{"--store", dsn, "--prefix", schema, "state", "jobs"},
		{"state", "--store", dsn, "--prefix", schema, "--schema", schema, "jobs"},
	} {
		if out, errOut, code := run(t, args...); code != 0 || !strings.Contains(out, "jobs") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	_, errOut, code := run(t, "state", "--store", dsn, "--prefix", schema, "--schema", schema+"x")
	if code != 2 || !strings.Contains(errOut, "--prefix "+schema) || !strings.Contains(errOut, "--schema "+schema+"x") {
		t.Errorf("--prefix and --schema that differ: exit %d, stderr %q; want 2 naming both", code, errOut)
	}
	_, errOut, code = run(t, "state", "--store", sqliteDSN(t), "--prefix", "p")
	if code != 2 || !strings.Contains(errOut, "for Redis") || strings.Contains(errOut, "PostgreSQL") {
		t.Errorf("--prefix on SQLite: exit %d, stderr %q; want 2, naming Redis and not PostgreSQL", code, errOut)
	}
	// A schema means nothing to SQLite: given, it is a bad command line,
	// not a setting silently dropped.
	_, errOut, code = run(t, "state", "--store", sqliteDSN(t), "--schema", "x")
	if code != 2 || !strings.Contains(errOut, "--schema x") || !strings.Contains(errOut, "SQLite") {
		t.Errorf("--schema on SQLite: exit %d, stderr %q; want 2 naming --schema and SQLite", code, errOut)
	}
}
