package release_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installProgram is the stranger's program of TestInstallFromClone: a
// lock on SQLite, through the two modules README's block replaces.
const installProgram = `package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

func main() {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(os.Getenv("DIR"), "locks.db"))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	if err := locks.Define(ctx, "payments", 2); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	lease, err := locks.Acquire(ctx, "payments")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("ok: token", lease.Token(), "release:", lease.Release(ctx))
}
`

// TestInstallFromClone runs README's Install blocks as written, before the
// modules are published: "The command, from a clone" in a fresh git clone
// of the repository (the sleeplock it installs runs), and "The library,
// from a clone, before the release" in a new module beside that clone,
// whose program then builds and takes a lock. It uses the module cache
// and GOCACHE of the test run (so it is quick after the workspace was
// built), never a proxy of ours: nothing of ours is fetched.
func TestInstallFromClone(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and builds from it")
	}
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmdBlock := shBlockUnder(t, string(readme), "### The command, from a clone")
	libBlock := shBlockUnder(t, string(readme), "### The library, from a clone, before the release")

	tmp := t.TempDir()
	clone := filepath.Join(tmp, "sleeplock")
	if out, err := exec.Command("git", "clone", "-q", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") && !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOBIN=") {
			env = append(env, kv)
		}
	}
	bin := filepath.Join(tmp, "bin")
	sh(t, clone, append(env, "GOBIN="+bin), cmdBlock)
	if out, err := exec.Command(filepath.Join(bin, "sleeplock"), "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "sleeplock ") {
		t.Fatalf("the installed sleeplock version: %v\n%s", err, out)
	}

	app := filepath.Join(tmp, "app")
	write(t, app, "go.mod", "module example.com/app\n\ngo 1.26\n")
	// The checkout's hashes of the modules it uses, so that the checksum
	// database is asked about none of them.
	write(t, app, "go.sum", checkoutSums(t, root))
	write(t, app, "main.go", installProgram)
	appEnv := append(env, "GOWORK=off", "GOTOOLCHAIN=local")
	sh(t, app, appEnv, libBlock)
	goCmd(t, app, appEnv, "build", "-o", "prog", ".")
	run := exec.Command(filepath.Join(app, "prog"))
	run.Env = append(os.Environ(), "DIR="+app)
	out, err := run.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: token ") || !strings.HasSuffix(string(out), "release: <nil>\n") {
		t.Fatalf("the program: %v\n%s", err, out)
	}
	if gomod, _ := os.ReadFile(filepath.Join(app, "go.mod")); !strings.Contains(string(gomod), ours+"/sqlitestore v0.2.0") {
		t.Errorf("go.mod does not require sqlitestore v0.2.0:\n%s", gomod)
	}
}

// shBlockUnder is the first ```sh block after the line heading in md.
func shBlockUnder(t *testing.T, md, heading string) string {
	t.Helper()
	_, after, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	_, block, ok := strings.Cut(after, "\n```sh\n")
	if !ok {
		t.Fatalf("README's %q has no sh block", heading)
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatalf("README's %q: its sh block does not end", heading)
	}
	return block + "\n"
}

// sh runs a README block with bash -e in dir.
func sh(t *testing.T, dir string, env []string, block string) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("in %s:\n%s\n%v\n%s", dir, block, err, out)
	}
}
