package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

func TestMain(m *testing.M) {
	checkTestDatabase()
	// A test that forgets --store (or gives it after the command, where it
	// is the command's argument) must not reach this user's own store.
	state, err := os.MkdirTemp("", "sleeplock-cli-test-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for k, v := range map[string]string{"XDG_STATE_HOME": state, "SLEEPLOCK_STORE": ""} {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	// No test leaves keys behind on the shared Redis (newRedis).
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(state)
		redistest.Exit(code)
	}))
}

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestDemo(t *testing.T) {
	out, errOut, code := run(t, "demo", "-work", "2ms", "-jitter", "1ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The demo says what it shows before and after the task lines.
	if !strings.Contains(lines[0], `"test_sleepwalk"`) || !strings.Contains(lines[1], "FIFO") ||
		!strings.Contains(lines[len(lines)-3], "returned its number") {
		t.Fatalf("the demo does not explain test_sleepwalk and the results:\n%s", out)
	}
	stamp := regexp.MustCompile(`^(Queued |Lock   |Release) \[(\d)\] at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z\.$`)
	running, most := 0, 0
	counts := map[string]int{}
	for _, l := range lines[2 : len(lines)-3] {
		m := stamp.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not a Queued/Lock/Release line", l)
		}
		counts[strings.TrimSpace(m[1])]++
		switch strings.TrimSpace(m[1]) {
		case "Lock":
			running++
			most = max(most, running)
		case "Release":
			running--
		}
	}
	if counts["Queued"] != 6 || counts["Lock"] != 6 || counts["Release"] != 6 {
		t.Fatalf("counts %v", counts)
	}
	if most != 2 {
		t.Fatalf("at most %d tasks held the lock at once, want 2", most)
	}
	if lines[len(lines)-2] != "[1 2 3 4 5 6]" || lines[len(lines)-1] != "test_sleepwalk: slots 2, running 0, waiting 0" {
		t.Fatalf("tail %q", lines[len(lines)-2:])
	}
}

func TestDemoFlags(t *testing.T) {
	out, _, code := run(t, "demo", "-tasks", "3", "-slots", "1", "-work", "0s", "-jitter", "0s", "-events")
	if code != 0 || !strings.Contains(out, "[1 2 3]") || !strings.Contains(out, "acquired task-1") {
		t.Fatalf("exit %d, output %s", code, out)
	}
}

// demo -events prints the events sorted by Seq, each Seq once.
func TestDemoEventsInSeqOrder(t *testing.T) {
	for range 5 {
		out, errOut, code := run(t, "demo", "--tasks", "8", "--slots", "3", "--work", "0s", "--jitter", "1ms", "--events")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var seqs []int
		for _, l := range strings.Split(out, "\n") {
			var seq int
			if _, err := fmt.Sscanf(strings.TrimSpace(l), "event %d", &seq); err == nil {
				seqs = append(seqs, seq)
			}
		}
		// created, and per task acquired + released, plus waiting for some.
		if len(seqs) < 1+2*8 {
			t.Fatalf("%d event lines:\n%s", len(seqs), out)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Fatalf("event lines not in Seq order (%v):\n%s", seqs, out)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"demo", "-tasks", "0"},
		{"demo", "-slots", "x"},
		{"demo", "-slots", "0"},
		{"demo", "--tasks", "-1"},
		{"define", "foo", "-1"},
		{"define", "foo", "0"},
		{"state", "--every", "2s"},
		{"state", "--json", "--every", "2s"},
		{"demo", "extra"},
		{"state", "--store", "ftp://x"},
		{"release", "x"},
		{"migrate", "--store", "mysql://x"},
	} {
		_, errOut, code := run(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	if _, _, code := run(t, "help"); code != 0 {
		t.Errorf("help: exit %d", code)
	}
	if _, errOut, code := run(t, "state", "--store", "sqlite:/nonexistent-dir/x.db"); code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("sqlite: exit %d %q", code, errOut)
	}
}

// testDSN is the test database, or skips the test (fails it under CI)
// when PostgreSQL does not answer.
func testDSN(t *testing.T) string {
	t.Helper()
	if pgSkip != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable in CI: %s", pgSkip)
		}
		t.Skipf("PostgreSQL unreachable: %s", pgSkip)
	}
	return testDatabaseURL()
}

func TestMigrateStateRelease(t *testing.T) {
	dsn := testDSN(t)
	schema := fmt.Sprintf("cli_test_%d", os.Getpid())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	if _, errOut, code := run(t, "state", "--store", dsn, "--schema", schema); code != 1 || !strings.Contains(errOut, "sleeplock migrate") {
		t.Fatalf("state before migrate: exit %d, %q", code, errOut)
	}
	for range 2 { // idempotent
		if out, errOut, code := run(t, "migrate", "--store", dsn, "--schema", schema); code != 0 || !strings.Contains(out, "version") {
			t.Fatalf("migrate: exit %d %s %s", code, out, errOut)
		}
	}
	t.Setenv("SLEEPLOCK_STORE", dsn)
	out, errOut, code := run(t, "state", "--schema", schema, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("state of an empty store: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := run(t, "release", "--schema", schema, "--ref", "r1", "nope"); code != 1 || !strings.Contains(errOut, "not") {
		t.Fatalf("release of nothing: exit %d %q", code, errOut)
	}
}
