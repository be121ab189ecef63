//go:build unix

package release_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/mod/module"

	"github.com/sleeplock/sleeplock/internal/integration/modproxy"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// A program of a stranger: the modules it imports (ours at their
// declared version, others at the version given), its imports, and the
// functions open (its Locks) and check (a few lines against the module it
// tries, after a pair on "payments").
type program struct {
	name    string
	modules []string
	imports string
	code    string
}

// programs are the strangers' programs, one per importer; README's table
// of module counts has a row for each.
var programs = []program{{
	name:    "memory",
	modules: []string{ours},
	code: `func open(ctx context.Context) (*sleeplock.Locks, error) { return sleeplock.New(nil), nil }

func check(ctx context.Context, locks *sleeplock.Locks) (string, error) { return "memory", nil }`,
}, {
	name:    "sqlitestore",
	modules: []string{ours, ours + "/sqlitestore"},
	imports: `"os"
	"path/filepath"

	"github.com/sleeplock/sleeplock/sqlitestore"`,
	code: `func open(ctx context.Context) (*sleeplock.Locks, error) {
	s, err := sqlitestore.Open(ctx, filepath.Join(os.Getenv("DIR"), "locks.db"))
	return sleeplock.New(s), err
}

func check(ctx context.Context, locks *sleeplock.Locks) (string, error) { return "sqlite", nil }`,
}, {
	name:    "pgstore",
	modules: []string{ours, ours + "/pgstore"},
	imports: `"os"

	"github.com/sleeplock/sleeplock/pgstore"`,
	code: `func open(ctx context.Context) (*sleeplock.Locks, error) {
	url, schema := os.Getenv("SLEEPLOCK_TEST_DATABASE_URL"), pgstore.WithSchema(os.Getenv("SCHEMA"))
	if err := pgstore.MigrateDSN(ctx, url, schema); err != nil {
		return nil, err
	}
	s, err := pgstore.Open(ctx, url, schema)
	return sleeplock.New(s), err
}

func check(ctx context.Context, locks *sleeplock.Locks) (string, error) { return "postgres", nil }`,
}, {
	name:    "redisstore",
	modules: []string{ours, ours + "/redisstore"},
	imports: `"os"

	"github.com/sleeplock/sleeplock/redisstore"`,
	code: `func open(ctx context.Context) (*sleeplock.Locks, error) {
	s, err := redisstore.Open(ctx, os.Getenv("SLEEPLOCK_TEST_REDIS_URL"), redisstore.WithPrefix(os.Getenv("PREFIX")))
	return sleeplock.New(s), err
}

func check(ctx context.Context, locks *sleeplock.Locks) (string, error) {
	l, err := locks.Acquire(ctx, "payments")
	if err != nil {
		return "", err
	}
	var tx redisstore.Tx
	tx.Set(os.Getenv("PREFIX")+redisstore.KeyTag("payments")+":body", fmt.Sprint(l.Token()), 0)
	if err := l.Guard(ctx, &tx); err != nil {
		return "", err
	}
	return fmt.Sprintf("redis: a fenced write (%v)", tx.Results[0]), l.Release(ctx)
}`,
}, {
	name:    "turns",
	modules: []string{ours, ours + "/turns"},
	imports: `"errors"

	"github.com/sleeplock/sleeplock/turns"`,
	code: `func open(ctx context.Context) (*sleeplock.Locks, error) { return sleeplock.New(nil), nil }

func check(ctx context.Context, locks *sleeplock.Locks) (string, error) {
	t := turns.New(locks)
	if err := t.Define(ctx); err != nil {
		return "", err
	}
	l, err := t.Acquire(ctx, "42", "7", "turn-1")
	if err != nil {
		return "", err
	}
	if _, err := t.Acquire(ctx, "42", "8", "turn-2"); !errors.Is(err, turns.ErrConversationBusy) {
		return "", fmt.Errorf("a second turn in chat 42: %v", err)
	}
	return "turns: a second turn is refused", l.Release(ctx)
}`,
}, {
	name:    "promevents",
	modules: []string{ours, ours + "/promevents", "github.com/prometheus/client_golang"},
	imports: `"github.com/prometheus/client_golang/prometheus"

	"github.com/sleeplock/sleeplock/promevents"`,
	code: `func open(ctx context.Context) (*sleeplock.Locks, error) { return sleeplock.New(nil), nil }

func check(ctx context.Context, locks *sleeplock.Locks) (string, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(promevents.New(locks)); err != nil {
		return "", err
	}
	mfs, err := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "sleeplock_acquisitions_total" {
			return fmt.Sprintf("promevents: %v acquisitions", mf.GetMetric()[0].GetCounter().GetValue()), err
		}
	}
	return "", fmt.Errorf("no sleeplock_acquisitions_total (%v)", err)
}`,
}, {
	name:    "otelevents",
	modules: []string{ours, ours + "/otelevents", "go.opentelemetry.io/otel/sdk/metric"},
	imports: `sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sleeplock/sleeplock/otelevents"`,
	code: `func open(ctx context.Context) (*sleeplock.Locks, error) { return sleeplock.New(nil), nil }

func check(ctx context.Context, locks *sleeplock.Locks) (string, error) {
	r := sdkmetric.NewManualReader()
	m, err := otelevents.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)).Meter("stranger"), locks)
	if err != nil {
		return "", err
	}
	defer m.Close()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		return "", err
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if s, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == "sleeplock.acquisitions" {
				return fmt.Sprintf("otelevents: %d acquisitions", s.DataPoints[0].Value), nil
			}
		}
	}
	return "", fmt.Errorf("no sleeplock.acquisitions")
}`,
}}

// mainGo is the part every program shares: a pair on "payments", then check.
const mainGo = `package main

import (
	"context"
	"fmt"
	"log"
	%s

	"github.com/sleeplock/sleeplock"
)

func main() {
	ctx := context.Background()
	locks, err := open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	if err := locks.Define(ctx, "payments", 2); err != nil {
		log.Fatal(err)
	}
	l, err := locks.Acquire(ctx, "payments")
	if err != nil {
		log.Fatal(err)
	}
	st, err := locks.State(ctx, "payments")
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	said, err := check(ctx, locks)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ok: %%d of %%d slots were taken; %%s\n", st.Running, st.Slots, said)
}

%s
`

// The most modules a program that imports only the root package may list
// in go list -m all, itself included, and the modules that some importers
// must not list.
const maxMemoryOnly = 7

var forbidden = map[string][]string{
	"memory":     {"github.com/jackc/pgx/v5", "modernc.org/sqlite", "go.opentelemetry.io/otel", "github.com/prometheus/client_golang", "github.com/chromedp/chromedp"},
	"promevents": {"github.com/jackc/pgx/v5", "modernc.org/sqlite"},
	"pgstore":    {"modernc.org/sqlite", "github.com/prometheus/", "go.opentelemetry.io/"},
	"redisstore": {"github.com/jackc/pgx/v5", "modernc.org/sqlite", "github.com/prometheus/", "go.opentelemetry.io/"},
}

// TestStranger: every released module, fetched from a proxy of the
// checkout at its declared version by programs outside the repository
// (no go.work, no replace), gets, tidies, builds and runs; the command
// installs with go install …@version. Each program's module count is the
// one README gives, within the bounds above.
func TestStranger(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs from a module proxy")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	mods, err := modproxy.Build(root, proxy)
	if err != nil {
		t.Fatal(err)
	}
	version := map[string]string{}
	for _, m := range mods {
		version[m.Path] = m.Version
	}
	env := strangerEnv(t, proxy, mods)
	sums := checkoutSums(t, root)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			dir := filepath.Join(tmp, p.name)
			write(t, dir, "go.mod", "module example.com/"+p.name+"\n\ngo 1.26\n")
			write(t, dir, "go.sum", sums)
			write(t, dir, "main.go", fmt.Sprintf(mainGo, p.imports, p.code))
			args := []string{"get"}
			for _, m := range p.modules {
				v := version[m]
				if v == "" {
					v = dependencyVersion(t, root, m)
				}
				args = append(args, m+"@"+v)
			}
			goCmd(t, dir, env, args...)
			goCmd(t, dir, env, "mod", "tidy")
			if gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod")); bytes.Contains(gomod, []byte("replace")) {
				t.Fatalf("go.mod has a replace:\n%s", gomod)
			}
			goCmd(t, dir, env, "build", "-race", "-o", "prog", ".")
			run := exec.Command(filepath.Join(dir, "prog"))
			run.Dir = dir
			run.Env = append(os.Environ(), "DIR="+dir)
			var rc *redis.Client
			var prefix string
			switch p.name {
			case "pgstore":
				_, schema := pgtest.Schema(t, "release_test_")
				run.Env = append(run.Env, "SCHEMA="+schema, "SLEEPLOCK_TEST_DATABASE_URL="+pgtest.URL())
			case "redisstore":
				rc = redistest.Client(t)
				prefix = redistest.Prefix(t, rc)
				run.Env = append(run.Env, "PREFIX="+prefix, "SLEEPLOCK_TEST_REDIS_URL="+redistest.URL())
			}
			out, err := run.CombinedOutput()
			if err != nil || !bytes.HasPrefix(out, []byte("ok: 1 of 2 slots were taken; ")) {
				t.Fatalf("the program: %v\n%s", err, out)
			}
			if rc != nil {
				if v, err := rc.Get(t.Context(), prefix+redisstore.KeyTag("payments")+":body").Result(); err != nil || v == "" {
					t.Errorf("the program's fenced write: %q, %v", v, err)
				}
			}
			t.Logf("%s", out)
			names := strings.Fields(goCmd(t, dir, env, "list", "-m", "-f", "{{.Path}}", "all"))
			for _, f := range forbidden[p.name] {
				for _, n := range names {
					if strings.HasPrefix(n, f) {
						t.Errorf("a program that imports %s lists %s", p.name, n)
					}
				}
			}
			if p.name == "memory" && len(names) > maxMemoryOnly {
				t.Errorf("a memory-only program lists %d modules, want at most %d: %v", len(names), maxMemoryOnly, names)
			}
			row := fmt.Sprintf("| `%s` | %d |", p.name, len(names))
			if !bytes.Contains(readme, []byte(row)) {
				t.Errorf("README has no row %q in its table of module counts: update it", row)
			}
			t.Logf("%s lists %d modules: %v", p.name, len(names), names)
		})
	}
	t.Run("cmd", func(t *testing.T) {
		cmd := ours + "/cmd/sleeplock"
		bin := filepath.Join(tmp, "bin")
		goCmd(t, tmp, append(env, "GOBIN="+bin), "install", "-race", cmd+"@"+version[cmd])
		out, err := exec.Command(filepath.Join(bin, "sleeplock"), "version").CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("sleeplock "+strings.TrimPrefix(version[cmd], "v")+" ")) {
			t.Fatalf("sleeplock version: %v\n%s", err, out)
		}
	})
}

// strangerEnv is the environment of a stranger's go commands: no
// workspace, our modules from the proxy (and not checked against the
// checksum database, which has never seen them), the others from the
// module cache or else the usual proxy. The module cache is the user's,
// so that nothing is fetched or compiled twice (packages are compiled
// with -race, as go test -race compiled them); the proxy's versions of our
// modules are not published, so they are taken out of it before and
// after the test (forget), one test at a time (a lock file).
func strangerEnv(t *testing.T, proxy string, mods []modproxy.Module) []string {
	t.Helper()
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	modcache := goEnv("GOMODCACHE")
	lockCache(t, filepath.Join(os.TempDir(), "sleeplock-release-test.lock"))
	forget(t, modcache, mods)
	t.Cleanup(func() { forget(t, modcache, mods) })
	proxies := "file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(modcache, "cache", "download"))
	if p := goEnv("GOPROXY"); p != "" {
		proxies += "," + p
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GO") {
			env = append(env, kv)
		}
	}
	// goindex=0: the go command indexes the packages of the module cache
	// by directory, as if a version's files never changed; ours change
	// from run to run.
	return append(env, "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GODEBUG=goindex=0",
		"GOPROXY="+proxies, "GONOSUMDB="+ours, "GONOSUMCHECK=1", "GOSUMDB="+goEnv("GOSUMDB"),
		"GOMODCACHE="+modcache, "GOCACHE="+goEnv("GOCACHE"), "GOPATH="+goEnv("GOPATH"))
}

// forget takes the versions of mods out of the module cache at modcache:
// their extracted trees and their downloads.
func forget(t *testing.T, modcache string, mods []modproxy.Module) {
	t.Helper()
	for _, m := range mods {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		dl := filepath.Join(modcache, "cache", "download", filepath.FromSlash(escaped), "@v")
		paths, _ := filepath.Glob(filepath.Join(dl, m.Version+".*"))
		paths = append(paths, filepath.Join(modcache, filepath.FromSlash(escaped)+"@"+m.Version), filepath.Join(dl, "list"))
		for _, p := range paths {
			_ = filepath.WalkDir(p, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					_ = os.Chmod(p, 0o755) //nolint:gosec // the module cache's directories are read-only
				}
				return nil
			})
			if err := os.RemoveAll(p); err != nil {
				t.Errorf("taking %s out of the module cache: %v", p, err)
			}
		}
	}
}

// checkoutSums are the lines of the checkout's go.sum and go.work.sum
// files: the hashes of the modules the checkout uses, already checked, so
// that a stranger's go.sum starts with them and the checksum database is
// asked only about the others.
func checkoutSums(t *testing.T, root string) string {
	t.Helper()
	seen := map[string]bool{}
	var b strings.Builder
	for _, dir := range append(goModDirs(t, root), ".") {
		for _, name := range []string{"go.sum", "go.work.sum"} {
			data, err := os.ReadFile(filepath.Join(root, dir, name))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				if line != "" && !seen[line] && !strings.HasPrefix(line, ours) {
					seen[line] = true
					b.WriteString(line + "\n")
				}
			}
		}
	}
	return b.String()
}

// dependencyVersion is the version at which the checkout requires module
// m (the one version of the tree, TestModules checks).
func dependencyVersion(t *testing.T, root, m string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(m) + `\s+(v\S+)`)
	for _, dir := range goModDirs(t, root) {
		data, err := os.ReadFile(filepath.Join(root, dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if v := re.FindSubmatch(data); v != nil {
			return string(v[1])
		}
	}
	t.Fatalf("no go.mod of the checkout requires %s", m)
	return ""
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil { //nolint:gosec // a test program
		t.Fatal(err)
	}
}

// goCmd runs the go command in dir and returns its standard output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return stdout.String()
}
