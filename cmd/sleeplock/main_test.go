package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the command itself when the test re-executes its own
// binary as sleeplock (SLEEPLOCK_TEST_MAIN=1).
func TestMain(m *testing.M) {
	if os.Getenv("SLEEPLOCK_TEST_MAIN") == "1" {
		if len(os.Args) > 1 && os.Args[1] == "test-child-trap" {
			trapChild()
		}
		os.Exit(run(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// sleeplock starts this test binary as the sleeplock command.
func sleeplock(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SLEEPLOCK_TEST_MAIN=1")
	return cmd
}

// exitCode is the exit status of a finished command (-1 when killed).
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		t.Fatal(err)
		return -1
	}
}

// SIGINT during a command exits 130 (SIGTERM 143), after the command has
// cleaned up (the demo's tasks end).
func TestSignalStatus(t *testing.T) {
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		cmd := sleeplock(t, "demo", "-work", "1h")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		for lines.Scan() && !strings.HasPrefix(lines.Text(), "Lock") {
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
		}
		if got := exitCode(t, cmd.Wait()); got != want {
			t.Errorf("%v: exit %d, want %d; stderr %q", sig, got, want, stderr.String())
		}
	}
}

// trapChild is a command for sleeplock run that traps SIGTERM and SIGINT
// and exits 0 on either, after saying "ready" once it has trapped them.
func trapChild() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("ready")
	<-sigs
	os.Exit(0)
}

// startUntil starts cmd and reads its stdout until a line starts with
// prefix; it returns the rest of stdout's reader.
func startUntil(t *testing.T, cmd *exec.Cmd, prefix string) *bufio.Scanner {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), prefix) {
			return lines
		}
	}
	t.Fatalf("%q never printed %q", cmd.Args, prefix)
	return nil
}

// A signal that the command survives or handles as it should ends with a
// success: run exits with its command's status after forwarding the
// signal (the command traps it and exits 0), serve and state --watch
// stop and exit 0, quietly.
func TestSignalEndsWell(t *testing.T) {
	store := "sqlite:" + filepath.Join(t.TempDir(), "locks.db")
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		for _, c := range []struct {
			name   string
			args   []string
			prefix string
		}{
			{"run", []string{"run", "--store", store, "-q", "--slots", "1", "trap", "--", os.Args[0], "test-child-trap"}, "ready"},
			{"serve", []string{"serve", "--store", store, "--addr", "127.0.0.1:0"}, "serving the locks on"},
			{"state --watch", []string{"state", "--store", store, "--watch"}, "--"},
		} {
			cmd := sleeplock(t, c.args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			lines := startUntil(t, cmd, c.prefix)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for lines.Scan() {
			}
			got := exitCode(t, cmd.Wait())
			if got != 0 || (c.name != "serve" && stderr.String() != "") {
				t.Errorf("%s ended by %v: exit %d, stderr %q; want 0", c.name, sig, got, stderr.String())
			}
		}
	}
}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"help"}, 0},
		{[]string{"version"}, 0},
		{[]string{"state", "--nope"}, 2},
		{[]string{"demo", "-tasks", "2", "-work", "0s", "-jitter", "0s"}, 0},
	} {
		if got := exitCode(t, sleeplock(t, tc.args...).Run()); got != tc.want {
			t.Errorf("%q: exit %d, want %d", tc.args, got, tc.want)
		}
	}
}
