package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the command itself when the test re-executes its own
// binary as sleeplock (SLEEPLOCK_TEST_MAIN=1).
func TestMain(m *testing.M) {
	if os.Getenv("SLEEPLOCK_TEST_MAIN") == "1" {
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
