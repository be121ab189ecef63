package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver of package sqlitestore
)

// markChild is the command "test-child-mark FILE TAG [now]": it appends
// "start TAG" to FILE and writes its pid to FILE.TAG.ready; then, with
// "now", appends "end TAG" and exits 0, and without it waits for SIGTERM,
// appends "end TAG" and exits 3. Every command of a test appends to one
// file, so the file's order is the order in which they ran.
func markChild(args []string) int {
	file, tag := args[0], args[1]
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	mark := func(what string) {
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, what, tag)
			_ = f.Close()
		}
	}
	mark("start")
	ready := file + "." + tag + ".ready"
	_ = os.WriteFile(ready+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600)
	_ = os.Rename(ready+".tmp", ready)
	if len(args) < 3 {
		<-sigs
	}
	mark("end")
	if len(args) < 3 {
		return 3
	}
	return 0
}

func init() {
	if len(os.Args) > 3 && os.Args[1] == "test-child-mark" {
		os.Exit(markChild(os.Args[2:]))
	}
}

// startMarked starts `sleeplock run` with a test-child-mark command tagged
// tag, and returns it with the command's pid once the command runs.
func startMarked(t *testing.T, e *runEnv, marks, tag string, args ...string) (*exec.Cmd, int) {
	t.Helper()
	cmd := e.sleeplock(context.Background(), append(args, "--", os.Args[0], "test-child-mark", marks, tag)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := marks + "." + tag + ".ready"
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if b, err := os.ReadFile(ready); err == nil { // the command, if it outlived us
			if pid, err := strconv.Atoi(string(b)); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return cmd, waitPid(t, "the command to start", ready)
}

// waitPid waits for a process to write its pid to file, and returns it.
func waitPid(t *testing.T, what, file string) int {
	t.Helper()
	var pid int
	waitUntil(t, what, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(b))
		return err == nil
	})
	return pid
}

// wantMarks checks that the commands ran one after the other, in order:
// each ended before the next started.
func wantMarks(t *testing.T, marks string, tags ...string) {
	t.Helper()
	b, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tag := range tags {
		if tag, killed := strings.CutSuffix(tag, "_killed"); killed {
			want = append(want, "start "+tag) // killed: no end
			continue
		}
		want = append(want, "start "+tag, "end "+tag)
	}
	if got := strings.TrimSpace(string(b)); got != strings.Join(want, "\n") {
		t.Fatalf("the commands ran as\n%s\nwant one after the other:\n%s", got, strings.Join(want, "\n"))
	}
}

// wantExit checks that cmd exits with code.
func wantExit(t *testing.T, cmd *exec.Cmd, code int) {
	t.Helper()
	err := cmd.Wait()
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if got != code {
		t.Fatalf("sleeplock run exited %d; want %d", got, code)
	}
}

// TestRunEndsCommandBeforeLeaseCanBeTaken: the store becomes unreachable
// for the holder (another process keeps SQLite's write lock), so its
// renewals fail. The store is given back at the very moment the lease
// expires on the store's clock, and a second run takes the lock at once:
// the first command has been ended before (SIGTERM, within the grace),
// never two inside. The first run exits with the lost status.
func TestRunEndsCommandBeforeLeaseCanBeTaken(t *testing.T) {
	e := newRunEnv(t)
	marks := filepath.Join(e.dir, "marks")
	holder, pid := startMarked(t, e, marks, "first", "run", "--store", e.store(), "--ttl", "3s", "lk")

	db, err := sql.Open("sqlite", "file:"+e.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// No renewal can succeed from here on: this is the holder's last expiry.
	var expires int64
	if err := conn.QueryRowContext(t.Context(), "SELECT expires FROM holders WHERE lock = 'lk'").Scan(&expires); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.UnixMicro(expires))) // the store's expiry is the event awaited
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	second := e.sleeplock(t.Context(), "run", "--store", e.store(), "--wait", "20s", "lk", "--", os.Args[0], "test-child-mark", marks, "second", "now")
	second.Stderr = os.Stderr
	if err := second.Run(); err != nil {
		t.Fatalf("the second run: %v", err)
	}
	if !procGone(pid) { // it ran beside the second: end it, the marks tell
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	wantExit(t, holder, exitLost)
	wantMarks(t, marks, "first", "second")
}

// TestRunPausedPastDeadlineKillsAtOnce: a `sleeplock run` stopped past its
// lease's deadline kills its command as soon as it resumes, and exits with
// the lost status.
func TestRunPausedPastDeadlineKillsAtOnce(t *testing.T) {
	e := newRunEnv(t)
	marks := filepath.Join(e.dir, "marks")
	holder, pid := startMarked(t, e, marks, "paused", "run", "--store", e.store(), "--ttl", "3s", "lp")
	l := e.locks(t)
	if err := holder.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	st, err := l.StateDetail(t.Context(), "lp")
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("state: %+v %v", st, err)
	}
	time.Sleep(time.Until(st.Holders[0].Expires)) // past the deadline, on the store's clock
	if procGone(pid) {
		t.Fatal("the command ended while sleeplock run was stopped")
	}
	resumed := time.Now()
	if err := holder.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for !procGone(pid) {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(resumed)
	t.Logf("the command was killed %v after sleeplock run resumed", took)
	// The bound is the scheduler's as much as ours: checked on demand, on
	// a machine that is not loaded.
	if os.Getenv("SLEEPLOCK_TEST_TIMING") != "" && took > 100*time.Millisecond {
		t.Errorf("the command was killed %v after sleeplock run resumed; want within 100ms", took)
	}
	wantExit(t, holder, exitLost)
	// At once: SIGKILL, with no SIGTERM and grace first.
	wantMarks(t, marks, "paused_killed")
}

// TestRunEndsCommandWhenLeaseLost: an operator releases the holder's ref;
// the holder learns it (at once, or at its next renewal) and kills its
// command at once.
func TestRunEndsCommandWhenLeaseLost(t *testing.T) {
	e := newRunEnv(t)
	marks := filepath.Join(e.dir, "marks")
	holder, pid := startMarked(t, e, marks, "victim", "run", "--store", e.store(), "--ttl", "2s", "--ref", "victim", "loss")
	if _, errOut, code := run(t, "release", "--store", e.store(), "--ref", "victim", "loss"); code != 0 {
		t.Fatalf("release: exit %d %s", code, errOut)
	}
	wantExit(t, holder, exitLost)
	if !procGone(pid) {
		t.Fatal("the command outlived its sleeplock run")
	}
}

// TestRunKeepOnLoss: with --keep-on-loss the command runs on after the
// loss, and run still exits with the lost status once it ends.
func TestRunKeepOnLoss(t *testing.T) {
	e := newRunEnv(t)
	marks := filepath.Join(e.dir, "marks")
	holder, pid := startMarked(t, e, marks, "kept", "run", "--store", e.store(), "--ttl", "2s", "--ref", "kept", "--keep-on-loss", "keep")
	if _, errOut, code := run(t, "release", "--store", e.store(), "--ref", "kept", "keep"); code != 0 {
		t.Fatalf("release: exit %d %s", code, errOut)
	}
	// The holder learns of the loss at its next renewal and says so; the
	// command runs on until told to stop.
	second, _ := startMarked(t, e, marks, "second", "run", "--store", e.store(), "keep")
	if procGone(pid) {
		t.Fatal("--keep-on-loss: the command was ended")
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	wantExit(t, holder, exitLost)
	_ = second.Process.Signal(syscall.SIGTERM)
	wantExit(t, second, 3)
}

func TestRunGraceAndLostStatusFlags(t *testing.T) {
	e := newRunEnv(t)
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--grace", "0s"}, "--grace 0s"},
		{[]string{"--ttl", "10s", "--grace", "6s"}, "at most half of --ttl"},
		{[]string{"-E", "122"}, "lease lost"},
	} {
		_, errOut, code := run(t, append(append([]string{"run", "--store", e.store()}, c.args...), "x", "--", "true")...)
		if code != 2 || !strings.Contains(errOut, c.err) {
			t.Errorf("%v: exit %d %q; want 2 and %q", c.args, code, errOut, c.err)
		}
	}
}

// TestRunRefusesARefHeldElsewhere (issue 29, A2): a second run given the
// --ref of a running one is refused, and changes nothing: the first's hold
// stays (a release by the second would have freed it). --reenter joins.
func TestRunRefusesARefHeldElsewhere(t *testing.T) {
	e := newRunEnv(t)
	marks := filepath.Join(e.dir, "marks")
	first, pid := startMarked(t, e, marks, "first", "run", "--store", e.store(), "--ttl", "1m", "--ref", "job", "--kind", "build", "rf")
	_, errOut, code := run(t, "run", "--store", e.store(), "--ref", "job", "rf", "--", os.Args[0], "test-child-exit", "0")
	if code != exitFailed || !strings.Contains(errOut, `ref "job" holds lock "rf" already`) || !strings.Contains(errOut, "kind build") || !strings.Contains(errOut, "--reenter") {
		t.Fatalf("a second run with the same --ref: exit %d %q; want %d naming the ref, the lock and the holder", code, errOut, exitFailed)
	}
	e.wantState(t, "rf", 1, 0) // the first still holds
	if _, errOut, code := run(t, "run", "--store", e.store(), "--ref", "job", "--reenter", "rf", "--", os.Args[0], "test-child-exit", "0"); code != 0 {
		t.Fatalf("--reenter: exit %d %q", code, errOut)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	_ = first.Wait()
}

// TestRunEndsCommandWhenLockDeleted: delete --force of the lock a run
// holds ends its command at once, and run exits with the lost status. The
// lease's TTL is an hour: no renewal comes during the test, only the
// store's word (on SQLite, the table ended that the holder's poller
// reads). A run not ended within 20 s is killed, and the test fails.
func TestRunEndsCommandWhenLockDeleted(t *testing.T) {
	e := newRunEnv(t)
	marks := filepath.Join(e.dir, "marks")
	holder, pid := startMarked(t, e, marks, "doomed", "run", "--store", e.store(), "--ttl", "1h", "gone")
	out, errOut, code := run(t, "delete", "--store", e.store(), "--force", "gone")
	if code != 0 || out != "deleted gone: ended 1 hold and 0 waiters\n" {
		t.Fatalf("delete --force: exit %d %q %q", code, out, errOut)
	}
	deleted := time.Now()
	stuck := time.AfterFunc(20*time.Second, func() { _ = holder.Process.Kill() })
	defer stuck.Stop()
	wantExit(t, holder, exitLost)
	// The bound is the scheduler's as much as ours: checked on demand, on
	// a machine that is not loaded.
	if took := time.Since(deleted); os.Getenv("SLEEPLOCK_TEST_TIMING") != "" && took > time.Second {
		t.Errorf("sleeplock run exited %v after the lock was deleted; want within 1s", took)
	}
	if !procGone(pid) {
		t.Fatal("the command outlived its sleeplock run")
	}
}

// TestLockDeletedBeforeRenewalIsLost: a lock deleted (delete --force)
// while run or elect holds it, whose command then ends before the next
// renewal could notice, still gives the lost status: the release at the
// command's end is the first to see that the hold was gone.
func TestLockDeletedBeforeRenewalIsLost(t *testing.T) {
	stores := map[string]func(t *testing.T, e *runEnv) []string{
		"sqlite": func(t *testing.T, e *runEnv) []string { return []string{"--store", e.store()} },
		"postgres": func(t *testing.T, e *runEnv) []string {
			pg := newPG(t)
			return []string{"--store", pg.dsn, "--schema", pg.schema}
		},
	}
	for storeName, storeArgs := range stores {
		for _, verb := range []string{"run", "elect"} {
			t.Run(storeName+"/"+verb, func(t *testing.T) {
				e := newRunEnv(t)
				sa := storeArgs(t, e)
				marks := filepath.Join(e.dir, "marks")
				// A TTL of an hour: no renewal comes before the command ends.
				holder, pid := startMarked(t, e, marks, "cmd", append(append([]string{verb}, sa...), "--ttl", "1h", "gone")...)
				out, errOut, code := run(t, append([]string{"delete", "--force", "gone"}, sa...)...)
				if code != 0 || out != "deleted gone: ended 1 hold and 0 waiters\n" {
					t.Fatalf("delete --force: exit %d %q %q", code, out, errOut)
				}
				// The command ends (status 3), unless the store has told the
				// holder of its loss already and it was killed (every store
				// tells it at once): 122 either way.
				if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
					t.Fatal(err)
				}
				wantExit(t, holder, exitLost)
			})
		}
	}
}
