package release_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/mod/modfile"

	"github.com/sleeplock/sleeplock/internal/integration/modproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ours is the path of the repository's modules.
const ours = "github.com/sleeplock/sleeplock"

// repoRoot is the root of the checkout, three levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestModules: scripts/modules is the one list of the modules. go.work is
// made from it; every go.mod of the tree is on it; siblings require each
// other at the listed versions and only released ones; no go.mod has a
// replace or a placeholder version; every dependency has one version in
// the whole tree; no go.sum has a line of ours (the hash of an
// unpublished version would be wrong once it is published).
func TestModules(t *testing.T) {
	root := repoRoot(t)
	mods, err := modproxy.Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	work, err := modproxy.WorkFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "go.work")); err != nil || string(got) != work {
		t.Errorf("go.work is not the one made from scripts/modules (run scripts/release work): %v", err)
	}
	listed := map[string]modproxy.Module{}
	for _, m := range mods {
		listed[m.Dir] = m
	}
	byPath := map[string]modproxy.Module{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	versions := map[string]map[string][]string{} // dependency → version → go.mod files
	for _, dir := range goModDirs(t, root) {
		m, ok := listed[dir]
		if !ok {
			t.Errorf("%s/go.mod is not in scripts/modules", dir)
			continue
		}
		file := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(file, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Replace) > 0 {
			t.Errorf("%s has a replace: a user's build ignores it (go.work ties the checkout together)", file)
		}
		for _, r := range f.Require {
			p, v := r.Mod.Path, r.Mod.Version
			if strings.HasPrefix(v, "v0.0.0-00010101000000") {
				t.Errorf("%s requires %s at the placeholder %s", file, p, v)
			}
			if sib, ok := byPath[p]; ok {
				switch {
				case !sib.Released():
					t.Errorf("%s requires %s, which is never released", file, p)
				case v != sib.Version:
					t.Errorf("%s requires %s %s; scripts/modules declares %s", file, p, v, sib.Version)
				}
				continue
			}
			if strings.HasPrefix(p, ours+"/") {
				t.Errorf("%s requires %s, which is not in scripts/modules", file, p)
			}
			if versions[p] == nil {
				versions[p] = map[string][]string{}
			}
			versions[p][v] = append(versions[p][v], file)
		}
		if m.Released() {
			if sum, err := os.ReadFile(filepath.Join(root, dir, "go.sum")); err == nil {
				for _, line := range strings.Split(string(sum), "\n") {
					if strings.HasPrefix(line, ours+" ") || strings.HasPrefix(line, ours+"/") {
						t.Errorf("%s/go.sum has %q: a hash of an unpublished version", dir, line)
					}
				}
			}
		}
	}
	for _, m := range mods {
		if _, err := os.Stat(filepath.Join(root, m.Dir, "go.mod")); err != nil {
			t.Errorf("scripts/modules lists %s: %v", m.Dir, err)
		}
	}
	if cli, err := os.ReadFile(filepath.Join(root, "cmd", "sleeplock", "internal", "cli", "cli.go")); err != nil {
		t.Error(err)
	} else if v := listed["cmd/sleeplock"].Version; !strings.Contains(string(cli), `const Version = "`+strings.TrimPrefix(v, "v")+`"`) {
		t.Errorf("cmd/sleeplock/internal/cli.Version is not %s, the version of cmd/sleeplock in scripts/modules", v)
	}
	for p, vs := range versions {
		if len(vs) > 1 {
			t.Errorf("%s is required at %d versions: %v", p, len(vs), vs)
		}
	}
}

// goModDirs are the directories of the tree that hold a go.mod, from the
// root (testdata and hidden directories left out).
func goModDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	return dirs
}
