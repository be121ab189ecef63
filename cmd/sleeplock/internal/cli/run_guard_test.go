//go:build linux

package cli

import (
	"bytes"
	"context"
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
)

// pidChild is the command "test-child-pid FILE [ignore-term]": it appends
// its pid to FILE and waits to be killed; with ignore-term SIGTERM does
// not end it.
func pidChild(args []string) int {
	if len(args) > 1 && args[1] == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	f, err := os.OpenFile(args[0], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 1
	}
	fmt.Fprintln(f, os.Getpid())
	_ = f.Close()
	select {}
}

func init() {
	if len(os.Args) > 2 && os.Args[1] == "test-child-pid" {
		os.Exit(pidChild(os.Args[2:]))
	}
}

// treeCommands are commands whose trees go beyond the process that run
// starts, each process of which appends its pid to $PIDS, with the number
// of processes.
func treeCommands() []struct {
	name  string
	shell string
	procs int
} {
	child := os.Args[0] + " test-child-pid $PIDS"
	return []struct {
		name  string
		shell string
		procs int
	}{
		{"pipeline", "echo $$ >> $PIDS; " + child + " | " + child, 3},
		{"background child", "echo $$ >> $PIDS; " + child + " & " + child, 3},
		{"grandchild ignoring SIGTERM", `echo $$ >> $PIDS; sh -c 'echo $$ >> $PIDS; ` + child + ` ignore-term; :' & wait`, 3},
	}
}

// alive reports whether process pid lives (a zombie is dead: it waits to
// be reaped, by an init that may never do it in a container).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && len(stat) > i+2 && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// processGroup is the process group of pid (0 when it is gone).
func processGroup(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	g, _ := strconv.Atoi(f[2])
	return g
}

// groupMembers are the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && processGroup(pid) == pgid && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readPids are the pids in file, once it has n.
func readPids(t *testing.T, file string, n int) []int {
	t.Helper()
	var pids []int
	waitUntil(t, fmt.Sprintf("%d processes of the command to start", n), func() bool {
		b, _ := os.ReadFile(file)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return len(pids) >= n
	})
	return pids
}

// killedTreeEnds runs "sleeplock args… -- sh -c SHELL" whose command
// writes procs pids to a file, kills it with SIGKILL once they all run,
// and checks that every process of the command's tree ends, and its
// guard with them.
func killedTreeEnds(t *testing.T, e *runEnv, shell string, procs int, args ...string) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pids")
	cmd := e.sleeplock(context.Background(), append(args, "--", "sh", "-c", shell)...)
	cmd.Env = append(cmd.Env, "PIDS="+pidFile)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	cmd.WaitDelay = 5 * time.Second // a process left holding stderr must fail the test, not hang it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	pids = readPids(t, pidFile, procs)
	pgid := processGroup(pids[0])
	if pgid == 0 || pgid == pids[0] {
		t.Fatalf("the command's group is %d: want the group of a guard, not of the command (%d)", pgid, pids[0])
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitUntil(t, "every process of the command's tree to end after kill -9 of sleeplock", func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return len(groupMembers(pgid)) == 0 // the guard too
	})
	if t.Failed() {
		t.Logf("stderr: %s", errOut.String())
	}
}

// TestRunKilledEndsCommandTree: kill -9 of `sleeplock run` ends every
// process of its command's tree (a pipeline, a background child, a
// grandchild that ignores SIGTERM), and the guard that did it; the next
// holder gets the lock.
func TestRunKilledEndsCommandTree(t *testing.T) {
	e := newRunEnv(t)
	for _, st := range []string{"sqlite", "postgres", "redis"} {
		t.Run(st, func(t *testing.T) {
			t.Parallel() // most of it is waiting for a killed holder's lease to expire
			storeArgs := []string{"--store", "sqlite:" + filepath.Join(t.TempDir(), "locks.db")}
			switch st {
			case "postgres":
				pg := newPG(t)
				storeArgs = []string{"--store", pg.dsn, "--schema", pg.schema}
			case "redis":
				dsn, schema, _ := newRedis(t)
				storeArgs = []string{"--store", dsn, "--schema", schema}
			}
			for i, tc := range treeCommands() {
				t.Run(tc.name, func(t *testing.T) {
					name := "tree" + strconv.Itoa(i)
					killedTreeEnds(t, e, tc.shell, tc.procs, append([]string{"run", "--ttl", "4s", name}, storeArgs...)...)
					next := e.sleeplock(t.Context(), append([]string{"run", "-q", "--wait", "30s", name}, append(storeArgs, "--", "true")...)...)
					if out, err := next.CombinedOutput(); err != nil {
						t.Fatalf("the next holder: %v: %s", err, out)
					}
				})
			}
		})
	}
}

// TestElectKilledEndsCommandTree: kill -9 of `sleeplock elect` ends every
// process of its command's tree, as run's, and the next candidate leads.
func TestElectKilledEndsCommandTree(t *testing.T) {
	e := newRunEnv(t)
	for _, st := range []string{"sqlite", "postgres", "redis"} {
		t.Run(st, func(t *testing.T) {
			t.Parallel() // most of it is waiting for a killed holder's lease to expire
			storeArgs := []string{"--store", "sqlite:" + filepath.Join(t.TempDir(), "locks.db")}
			switch st {
			case "postgres":
				pg := newPG(t)
				storeArgs = []string{"--store", pg.dsn, "--schema", pg.schema}
			case "redis":
				dsn, schema, _ := newRedis(t)
				storeArgs = []string{"--store", dsn, "--schema", schema}
			}
			for i, tc := range treeCommands() {
				t.Run(tc.name, func(t *testing.T) {
					name := "lead" + strconv.Itoa(i)
					killedTreeEnds(t, e, tc.shell, tc.procs, append([]string{"elect", "--ttl", "4s", name}, storeArgs...)...)
					next := e.sleeplock(t.Context(), append([]string{"elect", name}, append(storeArgs, "--", "true")...)...)
					if out, err := next.CombinedOutput(); err != nil {
						t.Fatalf("the next candidate: %v: %s", err, out)
					}
				})
			}
		})
	}
}

// endedTree runs "sleeplock run … -- sh -c SHELL" (SHELL writes procs pids
// to $PIDS), calls signal once they all run, and checks that run exits
// with code, having ended every process of the command's tree (it waits
// for them: no polling) and said so on stderr.
func endedTree(t *testing.T, shell string, procs int, signal func(*exec.Cmd), code int) {
	t.Helper()
	e := newRunEnv(t)
	pidFile := filepath.Join(t.TempDir(), "pids")
	cmd := e.sleeplock(context.Background(), "run", "--store", e.store(), "--ttl", "3s", "--grace", "500ms", "L", "--", "sh", "-c", shell)
	cmd.Env = append(cmd.Env, "PIDS="+pidFile)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	cmd.WaitDelay = 5 * time.Second // a process left holding stderr must fail the test, not hang it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	pids = readPids(t, pidFile, procs)
	signal(cmd)
	wantExit(t, cmd, code)
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d of the command's tree outlived sleeplock run", pid)
		}
	}
	if want := "the command left processes running in its group: ending them (SIGTERM, then SIGKILL after 500ms)"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	e.wantState(t, "L", 0, 0)
}

// TestRunEndsWhatItsCommandLeft: a command that exits and leaves
// processes in its group (one that ignores SIGTERM) has them ended,
// SIGTERM then SIGKILL after --grace, before run gives the slot back and
// exits with the command's status.
func TestRunEndsWhatItsCommandLeft(t *testing.T) {
	child := os.Args[0] + " test-child-pid $PIDS"
	endedTree(t, "echo $$ >> $PIDS; "+child+" & "+child+` ignore-term & until [ "$(wc -l < $PIDS)" -ge 3 ]; do sleep 0.01; done; exit 3`,
		3, func(*exec.Cmd) {}, 3)
}

// TestRunInterruptEndsTheGroup: SIGINT passed on to the command (^C)
// ends it; what it leaves, which ignores SIGINT and SIGTERM, is killed
// after --grace, before run exits.
func TestRunInterruptEndsTheGroup(t *testing.T) {
	child := os.Args[0] + " test-child-pid $PIDS ignore-term"
	endedTree(t, "echo $$ >> $PIDS; "+child+" & "+child+" & wait", 3, func(cmd *exec.Cmd) {
		_ = cmd.Process.Signal(os.Interrupt)
	}, 130)
}

// TestKilledRunKeepsSlotWhileCommandLives: SQLite gives the slot of a
// process that died back at once, but kill -9 of `sleeplock run` must not
// let the next holder in while the command it ran still lives. Here the
// guard is kept from ending the group: the test holds the write end of
// its orders pipe open, as if the guard had not yet run. The command keeps
// the slot (sqlitestore.WithProcessGroup) until the guard has ended the
// group, and then frees it, far before the 10-minute TTL.
func TestKilledRunKeepsSlotWhileCommandLives(t *testing.T) {
	e := newRunEnv(t)
	storeArgs := []string{"--store", "sqlite:" + filepath.Join(t.TempDir(), "locks.db")}
	pidFile := filepath.Join(t.TempDir(), "pids")
	cmd := e.sleeplock(context.Background(), append(append([]string{"run", "--ttl", "10m", "-q", "k"}, storeArgs...),
		"--", os.Args[0], "test-child-pid", pidFile)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child := readPids(t, pidFile, 1)[0]
	guard := processGroup(child)
	t.Cleanup(func() { _ = syscall.Kill(-guard, syscall.SIGKILL) })
	if guard == 0 || guard == child {
		t.Fatalf("the command's group is %d: want the group of a guard, not of the command (%d)", guard, child)
	}
	orders := openPeerPipe(t, cmd.Process.Pid, guard, 3)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	try := func() (int, string) {
		next := e.sleeplock(t.Context(), append(append([]string{"run", "-n", "k"}, storeArgs...), "--", "true")...)
		out, err := next.CombinedOutput()
		if err != nil && next.ProcessState == nil {
			t.Fatal(err)
		}
		return next.ProcessState.ExitCode(), string(out)
	}
	if code, out := try(); code != exitRefused {
		t.Fatalf("run -n while the killed run's command lives: exit %d, want %d (refused): %s", code, exitRefused, out)
	}
	if !alive(child) {
		t.Fatal("the command ended before its guard could act: the test shows nothing")
	}
	_ = orders.Close() // the guard reads the end of its orders: sleeplock died
	waitUntil(t, "the guard to end the command's group", func() bool { return len(groupMembers(guard)) == 0 })
	if code, out := try(); code != 0 {
		t.Fatalf("run -n once the killed run's command is gone: exit %d, want 0: %s", code, out)
	}
}

// openPeerPipe opens, for writing, the pipe that process pid holds open
// whose read end is fd of process reader (through /proc), so that the
// pipe stays open when pid dies.
func openPeerPipe(t *testing.T, pid, reader, fd int) *os.File {
	t.Helper()
	want, err := os.Readlink("/proc/" + strconv.Itoa(reader) + "/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(want, "pipe:") {
		t.Fatalf("fd %d of the guard: %q, %v: want a pipe", fd, want, err)
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if link, _ := os.Readlink(dir + e.Name()); link == want {
			f, err := os.OpenFile(dir+e.Name(), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = f.Close() })
			return f
		}
	}
	t.Fatalf("sleeplock (pid %d) holds no end of the guard's %s", pid, want)
	return nil
}
