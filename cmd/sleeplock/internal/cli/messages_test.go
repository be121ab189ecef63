package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A flag is spelled one way everywhere (issue 29 E15): errors about a
// flag name it as help does (--wait, -n), never as the flag package does
// (-wait).
func TestFlagErrorsSpellFlagsAsHelp(t *testing.T) {
	singleDash := regexp.MustCompile(`(^|[\s"])-[a-z][a-z-]+`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--wait=x", "L", "true"}, `invalid value "x" for flag --wait`},
		{[]string{"run", "-wait", "x", "L", "true"}, `invalid value "x" for flag --wait`},
		{[]string{"run", "--wiat", "L", "true"}, "flag provided but not defined: --wiat"},
		{[]string{"run", "L", "--wait"}, "flag needs an argument: --wait"},
		{[]string{"state", "--every=x"}, `invalid value "x" for flag --every`},
		{[]string{"state", "--nope"}, "flag provided but not defined: --nope"},
		{[]string{"release", "--ref"}, "flag needs an argument: --ref"},
		{[]string{"define", "-x", "a", "1"}, "flag provided but not defined: -x"},
	} {
		_, errOut, code := run(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
		if m := singleDash.FindString(errOut); m != "" {
			t.Errorf("%q: stderr %q spells a flag %q", c.args, errOut, m)
		}
	}
}

// A bad config file exits 2 whatever is wrong in it: a bad value, an
// unknown key, bad YAML (issue 29 E17), each reported with its file and
// line (E16: the line that breaks the YAML, not its collection's).
func TestApplyBadFileStatus(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "locks.db")
	for name, c := range map[string]struct {
		yaml string
		line string
	}{
		"bad value":    {"locks:\n  - name: a\n    slots: x\n", "line 3"},
		"unknown key":  {"locks:\n  - name: a\n    slot: 2\n", "line 3"},
		"indentation":  {"locks:\n  - name: a\n   slots: 2\n", "line 3"},
		"no such file": {"", ""},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if c.yaml != "" {
			if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, errOut, code := run(t, "apply", "--store", db, file)
		if code != 2 || !strings.Contains(errOut, strings.TrimSpace(file+" "+c.line)) {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming %s %s", name, code, errOut, file, c.line)
		}
	}
}

// A store of a scheme this build does not know is named as such, with the
// stores it knows (issue 29 E19), the password hidden.
func TestUnknownStoreScheme(t *testing.T) {
	_, errOut, code := run(t, "state", "--store", "mysql://x:secret@y/z")
	if code != 2 || !strings.Contains(errOut, `scheme "mysql" is not a store this build knows; it knows sqlite:PATH, postgres://`) ||
		strings.Contains(errOut, "secret") || strings.Contains(errOut, "cannot parse") {
		t.Fatalf("mysql store: exit %d, stderr %q; want 2, the scheme named and the known stores", code, errOut)
	}
	_, errOut, code = run(t, "state", "--store", "nonsense")
	if code != 2 || !strings.Contains(errOut, `unknown store "nonsense": want sqlite:PATH, postgres://`) {
		t.Fatalf("store without a scheme: exit %d, stderr %q", code, errOut)
	}
}

// "ex_sleeplock" is never named without saying what it is (issue 29 E20):
// in help, only where "Elixir" says it too; in README, its first mention.
func TestExSleeplockExplained(t *testing.T) {
	out, _, _ := run(t, "help")
	if strings.Contains(out, "ex_sleeplock") {
		t.Errorf("help names ex_sleeplock in the command list:\n%s", out)
	}
	for name := range commands {
		out, _, _ := run(t, "help", name)
		if strings.Contains(out, "ex_sleeplock") && !strings.Contains(out, "the Elixir library") {
			t.Errorf("help %s names ex_sleeplock without saying what it is:\n%s", name, out)
		}
	}
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(readme), "ex_sleeplock")
	if i < 0 {
		return
	}
	if first := string(readme[i:min(len(readme), i+80)]); !strings.Contains(strings.ReplaceAll(first, "\n", " "), "an Elixir library") {
		t.Errorf("README's first ex_sleeplock is not explained: %q", first)
	}
}

// The default store is said to be this user's, with the way to share one
// among users (issue 29 E21).
func TestDefaultStoreIsThisUsers(t *testing.T) {
	out, _, _ := run(t, "help")
	if !strings.Contains(out, "SQLite file of this user") || !strings.Contains(out, "for every user of the host") {
		t.Errorf("help does not say whose the default store is:\n%s", out)
	}
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a SQLite file of this user", "### A store shared by the users of a host", "-wal", "umask"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README does not say %q", want)
		}
	}
}

// An apply that clashes with the store names the file and the entry's
// line, FILE:LINE (issue 29 C11, "every error names file:line").
func TestApplyConflictNamesFileLine(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "locks.db")
	if _, errOut, code := run(t, "define", "--store", db, "gpu", "4"); code != 0 {
		t.Fatalf("define: exit %d %q", code, errOut)
	}
	file := filepath.Join(dir, "locks.yaml")
	if err := os.WriteFile(file, []byte("locks:\n  - name: a\n    slots: 1\n  - name: gpu\n    slots: 6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "apply", "--store", db, file)
	if code != 1 || !strings.Contains(errOut, file+`:4: lock "gpu" has 4 slots, not 6`) {
		t.Fatalf("apply of a clashing file: exit %d, stderr %q; want 1 and %s:4", code, errOut, file)
	}
}

// TestApplyPruneEmptyFile: apply --prune of a file that names no locks by
// mistake (0 bytes, only a comment, "locks:" with nothing after it) is a
// bad file (2) that says so and deletes nothing; "locks: []" prunes every
// lock on purpose.
func TestApplyPruneEmptyFile(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "locks.db")
	if _, errOut, code := run(t, "define", "--store", db, "keep", "1"); code != 0 {
		t.Fatalf("define: exit %d %q", code, errOut)
	}
	file := filepath.Join(dir, "locks.yaml")
	for _, yaml := range []string{"", "# nothing yet\n", "---\n", "locks:\n"} {
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := run(t, "apply", "--store", db, "--prune", file)
		if code != 2 || out != "" || !strings.Contains(errOut, file+": the file is empty") || !strings.Contains(errOut, `"locks: []"`) {
			t.Errorf("apply --prune of %q: exit %d %q %q; want 2, the file is empty, and \"locks: []\" named", yaml, code, out, errOut)
		}
		if out, _, _ := run(t, "state", "--store", db); !strings.Contains(out, "keep") {
			t.Fatalf("apply --prune of %q deleted keep:\n%s", yaml, out)
		}
	}
	if err := os.WriteFile(file, []byte("locks: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, "apply", "--store", db, "--prune", file); code != 0 || out != "deleted keep\n" {
		t.Fatalf("apply --prune of locks: []: exit %d %q %q; want keep deleted", code, out, errOut)
	}
}

// TestRunBadKindNamed: a --kind with a control character is a bad value
// (2) named as the kind, not as a ref, and nothing is defined or run.
func TestRunBadKindNamed(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "locks.db")
	_, errOut, code := run(t, "run", "--store", db, "--kind", "a\nb", "k", "--", os.Args[0], "test-child-exit", "0")
	if code != 2 || !strings.Contains(errOut, `--kind "a\nb": a kind must be`) || strings.Contains(errOut, "ref") {
		t.Fatalf("run --kind \"a\\nb\": exit %d %q; want 2 naming --kind, not a ref", code, errOut)
	}
	if out, _, _ := run(t, "state", "--store", db); !strings.Contains(out, "no locks") {
		t.Fatalf("run with a bad --kind defined a lock:\n%s", out)
	}
}

// The store's flags are described as they work: --store takes redis://…
// too, and --schema is also Redis's key prefix, in help and the README's
// "Command line" section alike.
func TestStoreFlagsDescribed(t *testing.T) {
	out, _, _ := run(t, "help")
	_, schema, _ := strings.Cut(out, "--schema NAME")
	if !strings.Contains(out, "redis://") || !strings.Contains(schema, "Redis: the keys'") {
		t.Errorf("help does not say that --store takes redis://… and --schema is Redis's key prefix:\n%s", out)
	}
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, cl, _ := strings.Cut(string(readme), "\n## Command line\n")
	_, storeItem, _ := strings.Cut(cl, "\n- The store:")
	storeItem, _, _ = strings.Cut(storeItem, "\n- ")
	for _, want := range []string{"`redis://…`", "on Redis the keys' prefix"} {
		if !strings.Contains(storeItem, want) {
			t.Errorf("README's \"The store:\" item does not say %q:\n%s", want, storeItem)
		}
	}
}
