package sleeplock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxMemoryOnlyModules is the most modules a program that imports only the
// root package may list in `go list -m all`, itself and sleeplock included.
// The stores, telemetry adapters and the command are modules of their own
// so that they stay out of this count.
const maxMemoryOnlyModules = 8

// TestMemoryOnlyModuleGraph builds the module graph of a program that uses
// the memory store alone and counts its modules. It fails when a
// dependency of an optional part (a database driver, a telemetry SDK, a
// browser driver) creeps into the root module's go.mod.
func TestMemoryOnlyModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list modules: %v", err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/memoryonly\n\ngo 1.26\n\n"+
		"require github.com/sleeplock/sleeplock v0.1.0\n\n"+
		"replace github.com/sleeplock/sleeplock => "+root+"\n")
	write("main.go", `package main

import (
	"context"

	"github.com/sleeplock/sleeplock"
)

func main() {
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(context.Background(), "payments", 3)
}
`)
	cmd := exec.Command(goCmd, "list", "-mod=mod", "-m", "all")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	if len(names) == 0 || len(names) > maxMemoryOnlyModules {
		t.Fatalf("a memory-only program lists %d modules, want at most %d:\n%s",
			len(names), maxMemoryOnlyModules, out)
	}
	for _, heavy := range []string{"github.com/jackc/pgx/v5", "modernc.org/sqlite", "go.opentelemetry.io/otel",
		"github.com/prometheus/client_golang", "github.com/chromedp/chromedp"} {
		for _, n := range names {
			if n == heavy {
				t.Errorf("a memory-only program pulls %s", heavy)
			}
		}
	}
	t.Logf("a memory-only program lists %d modules:\n%s", len(names), out)
}
