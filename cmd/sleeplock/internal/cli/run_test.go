package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// The test binary doubles as the sleeplock command and as the commands it
// runs, chosen by its first argument.
func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "test-main":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	case "test-child-exit": // exit with the status given
		n, _ := strconv.Atoi(os.Args[2])
		os.Exit(n)
	case "test-child-selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "test-child-env": // write the lease's environment to a file
		_ = os.WriteFile(os.Args[2], []byte(os.Getenv("SLEEPLOCK_TOKEN")+" "+os.Getenv("SLEEPLOCK_REF")+" "+os.Getenv("SLEEPLOCK_LOCK")), 0o600)
		os.Exit(0)
	case "test-child-counter":
		os.Exit(counterChild(os.Args[2], os.Args[3]))
	case "test-child-wait": // say "ready" with our pid, then wait for signals
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
		_ = os.WriteFile(os.Args[2]+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600)
		_ = os.Rename(os.Args[2]+".tmp", os.Args[2])
		for sig := range sigs {
			f, _ := os.OpenFile(os.Args[2]+".signals", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			fmt.Fprintln(f, sig)
			_ = f.Close()
			if sig == syscall.SIGTERM {
				os.Exit(3)
			}
		}
	}
}

// counterChild counts itself in and out of the counter file (under flock),
// and records in the violations file if more than max were inside.
func counterChild(counter, maxText string) int {
	limit, _ := strconv.Atoi(maxText)
	add := func(d int) error {
		f, err := os.OpenFile(counter, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return err
		}
		b := make([]byte, 64)
		n, _ := f.ReadAt(b, 0)
		cur, peak := 0, 0
		fmt.Sscan(string(b[:n]), &cur, &peak)
		cur += d
		peak = max(peak, cur)
		if cur > limit {
			v, _ := os.OpenFile(counter+".violations", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			fmt.Fprintf(v, "%d inside with token %s\n", cur, os.Getenv("SLEEPLOCK_TOKEN"))
			_ = v.Close()
		}
		_ = f.Truncate(0)
		_, err = f.WriteAt([]byte(fmt.Sprintf("%d %d\n", cur, peak)), 0)
		return err
	}
	if err := add(1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 99
	}
	time.Sleep(time.Millisecond)
	if err := add(-1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 99
	}
	return 0
}

// runEnv is a fresh SQLite store for run tests.
type runEnv struct {
	dir, db string
}

func newRunEnv(t *testing.T) *runEnv {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir) // never the user's own store
	t.Setenv("SLEEPLOCK_STORE", "")
	t.Setenv("GORACE", "atexit_sleep_ms=0") // a -race child would sleep 1s as it exits
	return &runEnv{dir: dir, db: filepath.Join(dir, "locks.db")}
}

func (e *runEnv) store() string { return "sqlite:" + e.db }

// sleeplock returns the command that runs `sleeplock args…` in a process.
func (e *runEnv) sleeplock(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"test-main"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+e.dir)
	return cmd
}

// locks opens the env's store in this process.
func (e *runEnv) locks(t *testing.T) *sleeplock.Locks {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), e.db)
	if err != nil {
		t.Fatal(err)
	}
	l := sleeplock.New(s)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func (e *runEnv) wantState(t *testing.T, name string, running, waiting int) {
	t.Helper()
	st, err := e.locks(t).State(t.Context(), name)
	if err != nil || st.Running != running || st.Waiting != waiting {
		t.Fatalf("state of %q: %+v %v; want running %d, waiting %d", name, st, err, running, waiting)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for d := time.Millisecond; !cond(); d = min(2*d, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(d)
	}
}

func TestRunExitStatuses(t *testing.T) {
	e := newRunEnv(t)
	exe := os.Args[0]
	envFile := filepath.Join(e.dir, "env")
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"child's status", []string{"--slots", "1", "x", "--", exe, "test-child-exit", "7"}, 7, ""},
		{"success", []string{"x", "--", exe, "test-child-exit", "0"}, 0, ""},
		{"killed child: 128+signal", []string{"x", "--", exe, "test-child-selfkill"}, 128 + 9, ""},
		{"no such command", []string{"x", "--", filepath.Join(e.dir, "no-such-command")}, 127, "command not found"},
		{"not executable", []string{"x", "--", e.dir}, 126, "cannot run"},
		{"no command", []string{"x"}, 2, "no command"},
		{"no command after --", []string{"x", "--"}, 2, "no command"},
		{"no name", nil, 2, "no lock name"},
		{"-- before the name: no name", []string{"--", "x", exe, "test-child-exit", "0"}, 2, "no lock name"},
		{"a second word is the command", []string{"x", "y", "--", "true"}, 127, "y: command not found"},
		{"slots mismatch: not busy", []string{"--slots", "2", "x", "--", exe, "test-child-exit", "0"}, 125, "lock \"x\" has 1 slot, not 2: drop --slots"},
		{"a new lock is defined", []string{"new", "--", exe, "test-child-exit", "0"}, 0, ""},
		{"a new lock with --slots", []string{"--slots", "3", "new3", "--", exe, "test-child-exit", "0"}, 0, ""},
		{"bad slots", []string{"--slots", "-1", "x", "--", "true"}, 2, "slots"},
		{"zero slots", []string{"--slots", "0", "x", "--", "true"}, 2, "at least 1 slot"},
		{"bad name: not busy", []string{"bad\x01name", "--", "true"}, 2, "invalid lock name"},
		{"store fails: not busy", []string{"--store", "sqlite:" + filepath.Join(e.dir, "no-such-dir", "x.db"), "x", "--", "true"}, 125, ""},
		{"wait and no-wait", []string{"--wait", "1s", "-n", "x", "--", "true"}, 2, "exclude"},
		{"bad wait", []string{"--wait", "soon", "x", "--", "true"}, 2, "seconds"},
		{"bad conflict code", []string{"--conflict-exit-code", "300", "x", "--", "true"}, 2, "0 to 255"},
		{"-c and a command", []string{"x", "-c", "true", "false"}, 2, "not both"},
		{"flags after the name, before --", []string{"x", "-q", "--ref", "after", "--", exe, "test-child-env", envFile}, 0, ""},
		{"no --: the command's flags are its own", []string{"x", exe, "test-child-exit", "-5"}, 251, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := run(t, append([]string{"run", "--store", e.store()}, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.err) || strings.Contains(errOut, "sleeplock: ") || strings.Contains(errOut, "Resize") || strings.Count(errOut, "\n") > 1 {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, c.code, c.err)
			}
		})
	}
	e.wantState(t, "x", 0, 0) // nothing left held
	for name, slots := range map[string]int{"new": 1, "new3": 3} {
		if st, err := e.locks(t).State(t.Context(), name); err != nil || st.Slots != slots {
			t.Errorf("%s: %+v %v; want it defined with %d slots", name, st, err, slots)
		}
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || f[1] != "after" || f[2] != "x" {
		t.Fatalf("child's environment %q: want a token, ref \"after\" and lock x", b)
	}
	if tok, err := strconv.ParseInt(f[0], 10, 64); err != nil || tok <= 0 {
		t.Fatalf("SLEEPLOCK_TOKEN %q", f[0])
	}
}

func TestRunRefusedAndTimeout(t *testing.T) {
	e := newRunEnv(t)
	l := e.locks(t)
	if err := l.Define(t.Context(), "busy", 1); err != nil {
		t.Fatal(err)
	}
	held, err := l.TryAcquire(t.Context(), "busy", sleeplock.Kind("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	exe := os.Args[0]
	_, errOut, code := run(t, "run", "--store", e.store(), "--no-wait", "busy", "--", exe, "test-child-exit", "0")
	if code != 1 || !strings.Contains(errOut, "held by a deploy") {
		t.Fatalf("refused: exit %d %q; want 1 naming the holder's kind", code, errOut)
	}
	_, errOut, code = run(t, "run", "--store", e.store(), "-n", "-q", "--conflict-exit-code", "75", "busy", "--", exe, "test-child-exit", "0")
	if code != 75 || errOut != "" {
		t.Fatalf("refused with -q: exit %d %q; want 75 and nothing said", code, errOut)
	}
	_, errOut, code = run(t, "run", "--store", e.store(), "--wait", "20ms", "busy", "--", exe, "test-child-exit", "0")
	if code != 124 || !strings.Contains(errOut, "gave up waiting") {
		t.Fatalf("timeout: exit %d %q; want 124", code, errOut)
	}
	e.wantState(t, "busy", 1, 0) // the waiter left the queue
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestRunSixteenProcesses: 16 processes each run the command a few times on
// a 2-slot lock; the commands count themselves in and out of a shared file
// and record if ever more than 2 were inside.
func TestRunSixteenProcesses(t *testing.T) {
	e := newRunEnv(t)
	const procs = 16
	runs := 2
	if n, err := strconv.Atoi(os.Getenv("SLEEPLOCK_RUN_TEST_RUNS")); err == nil && n > 0 {
		runs = n
	}
	counter := filepath.Join(e.dir, "counter")
	if _, _, code := run(t, "run", "--store", e.store(), "--slots", "2", "pool", "--", os.Args[0], "test-child-exit", "0"); code != 0 {
		t.Fatalf("define: exit %d", code)
	}
	var wg sync.WaitGroup
	errs := make(chan error, procs*runs)
	for range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range runs {
				cmd := e.sleeplock(t.Context(), "run", "--store", e.store(), "-q", "--slots", "2", "pool", "--", os.Args[0], "test-child-counter", counter, "2")
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("%w: %s", err, out)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v, err := os.ReadFile(counter + ".violations"); err == nil {
		t.Fatalf("more than 2 inside at once:\n%s", v)
	}
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	var cur, peak int
	fmt.Sscan(string(b), &cur, &peak)
	if cur != 0 || peak < 1 || peak > 2 {
		t.Fatalf("counter %q: want 0 inside at the end, at most 2 at once", b)
	}
	e.wantState(t, "pool", 0, 0)
}

// startHolder starts `sleeplock run` holding name with a command that
// waits for signals, and returns it with the command's ready file once
// the command runs.
func startHolder(t *testing.T, e *runEnv, name string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	ready := filepath.Join(e.dir, name+".ready")
	args := append([]string{"run", "--store", e.store(), "--slots", "1", "--ttl", "10m"}, extra...)
	cmd := e.sleeplock(context.Background(), append(args, name, "--", os.Args[0], "test-child-wait", ready)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if b, err := os.ReadFile(ready); err == nil { // the command, if it outlived us
			if pid, err := strconv.Atoi(string(b)); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	waitUntil(t, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
	return cmd, ready
}

func TestRunForwardsSignals(t *testing.T) {
	e := newRunEnv(t)
	cmd, ready := startHolder(t, e, "sig")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "SIGHUP to reach the command", func() bool {
		b, _ := os.ReadFile(ready + ".signals")
		return strings.Contains(string(b), "hangup")
	})
	e.wantState(t, "sig", 1, 0) // sleeplock lives on: the command did
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("sleeplock run exited with %v; want the command's status 3 (it exits 3 on SIGTERM)", err)
	}
	e.wantState(t, "sig", 0, 0)
}

// TestRunKill9HolderHandsOver: a `sleeplock run` killed with SIGKILL while
// holding a slot (TTL 10 minutes) gives it to the next waiter at once,
// through the pid check.
func TestRunKill9HolderHandsOver(t *testing.T) {
	e := newRunEnv(t)
	holder, ready := startHolder(t, e, "k9")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // far below the TTL
	defer cancel()
	next := e.sleeplock(ctx, "run", "--store", e.store(), "k9", "--", os.Args[0], "test-child-exit", "0")
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	l := e.locks(t)
	waitUntil(t, "the second run to queue", func() bool {
		st, err := l.State(t.Context(), "k9")
		return err == nil && st.Waiting == 1
	})
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	if err := next.Wait(); err != nil {
		t.Fatalf("the waiter did not get the dead holder's slot: %v", err)
	}
	e.wantState(t, "k9", 0, 0)
	b, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	waitUntil(t, "the killed sleeplock's command to die with it", func() bool { return procGone(pid) })
}

// procGone reports whether pid has exited (a zombie counts as exited).
func procGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// A signal while waiting ends the wait with 128+signal and leaves the
// queue; nothing is held.
func TestRunSignalWhileWaiting(t *testing.T) {
	e := newRunEnv(t)
	startHolder(t, e, "sw")
	waiter := e.sleeplock(context.Background(), "run", "--store", e.store(), "sw", "--", os.Args[0], "test-child-exit", "0")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	l := e.locks(t)
	waitUntil(t, "the waiter to queue", func() bool {
		st, err := l.State(t.Context(), "sw")
		return err == nil && st.Waiting == 1
	})
	if err := waiter.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := waiter.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v; want 130", err)
	}
	e.wantState(t, "sw", 1, 0)
}

func TestDefaultStore(t *testing.T) {
	e := newRunEnv(t)
	exe := os.Args[0]
	if _, errOut, code := run(t, "run", "--slots", "1", "d", "--", exe, "test-child-exit", "0"); code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "sleeplock", "locks.db")); err != nil {
		t.Fatalf("no database in $XDG_STATE_HOME/sleeplock: %v", err)
	}
	home := t.TempDir()
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", home)
	if out, errOut, code := run(t, "migrate"); code != 0 || !strings.Contains(out, "schema version") {
		t.Fatalf("migrate: exit %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "state", "sleeplock", "locks.db")); err != nil {
		t.Fatalf("no database in ~/.local/state/sleeplock: %v", err)
	}
	t.Setenv("SLEEPLOCK_STORE", "sqlite:"+filepath.Join(e.dir, "sleeplock", "locks.db"))
	if out, _, code := run(t, "state"); code != 0 || !strings.Contains(out, "d ") {
		t.Fatalf("state with SLEEPLOCK_STORE: exit %d %q", code, out)
	}
}

func TestStoreTargets(t *testing.T) {
	newRunEnv(t)
	for dsn, want := range map[string]storeKind{
		"sqlite:/tmp/x.db":                    sqliteStore,
		"sqlite:///tmp/x.db":                  sqliteStore,
		"postgres://u@h/db":                   postgresStore,
		"postgresql://u@h/db":                 postgresStore,
		"host=127.0.0.1 dbname=test":          postgresStore,
		"  dbname=test user=postgres":         postgresStore,
		"user=postgres password='a b' dbname": postgresStore,
		"redis://h:6379/0":                    redisStore,
		"rediss://u:p@h":                      redisStore,
	} {
		sf := storeFlags{dsn: &dsn}
		kind, _, err := sf.target()
		if err != nil || kind != want {
			t.Errorf("%q: %v %v, want %v", dsn, kind, err, want)
		}
	}
	for _, dsn := range []string{"sqlite:", "mysql://x", "/tmp/x.db", "memcached://h"} {
		_, errOut, code := run(t, "state", "--store", dsn)
		if code != 2 || errOut == "" {
			t.Errorf("%q: exit %d %q; want a usage error", dsn, code, errOut)
		}
	}
	if got := redactDSN("host=h password=secret dbname=x"); strings.Contains(got, "secret") {
		t.Errorf("redact: %q", got)
	}
	if _, errOut, code := run(t, "migrate", "--store", "sqlite:"+filepath.Join(t.TempDir(), "m.db"), "--unlogged"); code != 2 || !strings.Contains(errOut, "PostgreSQL") {
		t.Errorf("migrate --unlogged on SQLite: exit %d %q", code, errOut)
	}
}
