package cli

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// newRedis returns the test Redis's URL, a key prefix of the test's own
// (the --schema to give) and a store on it; the test's end deletes the
// prefix's keys, through a client of its own (the store may have been
// closed by then), and TestMain fails if any is left. It fails under CI,
// and skips elsewhere, when Redis does not answer.
func newRedis(t *testing.T) (dsn, schema string, s *redisstore.Store) {
	t.Helper()
	dsn = redistest.URL()
	c := redistest.Client(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "clitest" + hex.EncodeToString(b[:])
	redistest.Own(t, c, schema+":")
	s, err := redisstore.Open(t.Context(), dsn, redisstore.WithPrefix(schema+":"), redisstore.WithoutSafetyChecks())
	if err != nil {
		redistest.Unreachable(t, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return dsn, schema, s
}

// TestRedisStoreEveryCommand: --store redis://… works in every command
// that takes a store, with --schema as the key prefix.
func TestRedisStoreEveryCommand(t *testing.T) {
	ctx := t.Context()
	dsn, schema, s := newRedis(t)
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	r := func(args ...string) (string, string) {
		t.Helper()
		out, errOut, code := run(t, append(args, "--store", dsn, "--schema", schema)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %q %q", args, code, out, errOut)
		}
		return out, errOut
	}
	out, errOut := r("migrate")
	if !strings.Contains(out, "nothing to migrate") {
		t.Fatalf("migrate: %q", out)
	}
	// What Open warns about the server (here: it keeps nothing on disk)
	// is on the command's error output.
	warnings, err := redisstore.Check(ctx, s.Client())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if !strings.Contains(errOut, "sleeplock: warning: "+w) {
			t.Fatalf("migrate's error output %q lacks the warning %q", errOut, w)
		}
	}
	r("define", "jobs", "2")
	good := filepath.Join(t.TempDir(), "locks.yaml")
	if err := os.WriteFile(good, []byte("locks:\n  - name: reports\n    slots: 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r("apply", good)
	if _, err := locks.Acquire(ctx, "jobs", sleeplock.Ref("worker-1"), sleeplock.Kind("job"), sleeplock.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if out, _ := r("state"); !strings.Contains(out, "jobs") || !strings.Contains(out, "reports") {
		t.Fatalf("state: %q", out)
	}
	if out, _ := r("state", "--json"); !strings.Contains(out, `"worker-1"`) {
		t.Fatalf("state --json: %q", out)
	}
	// The store flags go before the command: after it they are its own.
	if _, errOut, code := run(t, "--store", dsn, "--schema", schema, "run", "reports", "--", os.Args[0], "test-child-exit", "0"); code != 0 {
		t.Fatalf("run: exit %d %q", code, errOut)
	}
	if out, _ := r("release", "jobs", "--ref", "worker-1"); !strings.Contains(out, "released") {
		t.Fatalf("release: %q", out)
	}
	st, err := locks.State(ctx, "jobs")
	if err != nil || st.Running != 0 {
		t.Fatalf("jobs after release: %+v %v", st, err)
	}
	if _, errOut, code := run(t, "state", "--store", "redis://127.0.0.1:1/0"); code == 0 || errOut == "" {
		t.Fatalf("an unreachable Redis: exit %d %q", code, errOut)
	}
}
