package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
)

// ownCluster creates, starts and (when the test ends, however it ends)
// drops a PostgreSQL cluster of its own, on a free port
// (pgtest.OwnCluster): a test that pauses its server must never pause the
// shared one. It runs when SLEEPLOCK_TEST_OWN_CLUSTER=1, and skips
// otherwise (it needs root and Debian's postgresql-common, without which it
// then skips, or fails under CI; it takes seconds). It returns the DSN and
// the postmaster's pid.
func ownCluster(t *testing.T) (string, int) {
	t.Helper()
	if os.Getenv("SLEEPLOCK_TEST_OWN_CLUSTER") != "1" {
		t.Skip("set SLEEPLOCK_TEST_OWN_CLUSTER=1 to run the tests that pause a PostgreSQL cluster of their own")
	}
	c := pgtest.OwnCluster(t, "15")
	pid, err := c.Postmaster()
	if err != nil {
		t.Fatal(err)
	}
	return c.DSN("postgres"), pid
}

// signalCluster sends sig to the postmaster pid and every process it started.
func signalCluster(pid int, sig syscall.Signal) {
	_ = syscall.Kill(pid, sig)
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			_ = syscall.Kill(child, sig)
		}
	}
}

// TestRunEndsCommandBeforeLeaseCanBeTakenPG: the holder's PostgreSQL
// server is paused (every process of it stopped), so its renewals hang;
// the server resumes once the lease has expired on its clock and a second
// run takes the lock at once: the first command has ended before, never
// two inside.
func TestRunEndsCommandBeforeLeaseCanBeTakenPG(t *testing.T) {
	dsn, pm := ownCluster(t)
	e := newRunEnv(t)
	if out, errOut, code := run(t, "migrate", "--store", dsn); code != 0 {
		t.Fatalf("migrate: exit %d %s %s", code, out, errOut)
	}
	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	marks := filepath.Join(e.dir, "marks")
	holder, pid := startMarked(t, e, marks, "first", "run", "--store", dsn, "--ttl", "3s", "pg")
	st, err := s.State(t.Context(), "pg", true)
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("state: %+v %v", st, err)
	}
	signalCluster(pm, syscall.SIGSTOP)
	t.Cleanup(func() { signalCluster(pm, syscall.SIGCONT) })
	// A renewal may have been made since: its expiry is later, never earlier.
	time.Sleep(time.Until(st.Holders[0].Expires))
	signalCluster(pm, syscall.SIGCONT)
	second := e.sleeplock(t.Context(), "run", "--store", dsn, "--wait", "30s", "pg", "--", os.Args[0], "test-child-mark", marks, "second", "now")
	second.Stderr = os.Stderr
	if err := second.Run(); err != nil {
		t.Fatalf("the second run: %v", err)
	}
	if !procGone(pid) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	wantExit(t, holder, exitLost)
	wantMarks(t, marks, "first", "second")
}
