package cli

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// Flags may follow positional arguments; "--" ends the flags, even when a
// flag's value is "--".
func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		ref       string
		stale     bool
		positions []string
	}{
		{[]string{"--ref", "w", "a", "--stale"}, "w", true, []string{"a"}},
		{[]string{"a", "--ref", "w", "b", "-stale"}, "w", true, []string{"a", "b"}},
		{[]string{"a", "--", "--stale", "b"}, "", false, []string{"a", "--stale", "b"}},
		{[]string{"--ref", "--", "a", "--stale"}, "--", true, []string{"a"}},
		{[]string{"--ref", "--", "--", "--stale"}, "--", false, []string{"--stale"}},
		{[]string{"--stale", "--", "-"}, "", true, []string{"-"}},
		{[]string{"-", "--ref=w"}, "w", false, []string{"-"}},
		{nil, "", false, nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		ref := fs.String("ref", "", "")
		stale := fs.Bool("stale", false, "")
		if err := parse(fs, tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if *ref != tc.ref || *stale != tc.stale || !slices.Equal(fs.Args(), tc.positions) {
			t.Errorf("%q: ref %q stale %v args %q; want %q %v %q", tc.args, *ref, *stale, fs.Args(), tc.ref, tc.stale, tc.positions)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	var ue *usageError
	if err := parse(fs, []string{"a", "--nope"}); !errors.As(err, &ue) {
		t.Errorf("an unknown flag after an argument: %v, want a usage error", err)
	}
}

// The reproduction: "release --ref worker-2 payments --stale" on a
// live lease must honour --stale and release nothing.
func TestReleaseStaleFlagAfterName(t *testing.T) {
	pg := newPG(t)
	ctx := t.Context()
	if err := pg.locks.Define(ctx, "payments", 2); err != nil {
		t.Fatal(err)
	}
	lease, err := pg.locks.Acquire(ctx, "payments", sleeplock.Ref("worker-2"), sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(ctx) }()

	// As the operator typed it, the store coming from the environment.
	t.Setenv("SLEEPLOCK_STORE", pg.dsn)
	out, errOut, code := run(t, "release", "--schema", pg.schema, "--ref", "worker-2", "payments", "--stale")
	if code != 1 || !strings.Contains(errOut, "has not expired: nothing released") || out != "" {
		t.Errorf("release --stale of a live lease: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if held, err := lease.Held(ctx); err != nil || !held {
		t.Fatalf("the live lease was released: held %v, %v", held, err)
	}
	st, err := pg.locks.State(ctx, "payments")
	if err != nil || st.Running != 1 {
		t.Fatalf("payments: %+v, %v", st, err)
	}

	// A flag after the name works the other way too.
	out, errOut, code = pg.run(t, "release", "payments", "--ref", "worker-2")
	if code != 0 || out != "released \"worker-2\" on payments\n" {
		t.Fatalf("release payments --ref worker-2: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if held, err := lease.Held(ctx); err != nil || held {
		t.Fatalf("after the release: held %v, %v", held, err)
	}
}

// With --stale after the name, an expired lease is released.
func TestReleaseStaleExpired(t *testing.T) {
	pg := newPG(t)
	ctx := t.Context()
	if err := pg.locks.Define(ctx, "payments", 1); err != nil {
		t.Fatal(err)
	}
	lease, err := pg.locks.Acquire(ctx, "payments", sleeplock.Ref("dead-node"), sleeplock.TTL(50*time.Millisecond), sleeplock.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	// Wait, on the store's clock, for the lease to expire.
	for {
		st, err := lease.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Now.Before(st.Expires) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(st.Expires.Sub(st.Now)):
		}
	}
	out, errOut, code := pg.run(t, "release", "--ref", "dead-node", "payments", "--stale")
	if code != 0 || out != "released the stale lease of \"dead-node\" on payments\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if st, err := pg.locks.State(ctx, "payments"); err != nil || st.Running != 0 {
		t.Fatalf("payments: %+v, %v", st, err)
	}
}

// A release of several names is all or nothing, and says what it released.
func TestReleaseAllOrNothing(t *testing.T) {
	pg := newPG(t)
	ctx := t.Context()
	for _, n := range []string{"a", "b"} {
		if err := pg.locks.Define(ctx, n, 1); err != nil {
			t.Fatal(err)
		}
	}
	la, err := pg.locks.Acquire(ctx, "a", sleeplock.Ref("w"), sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := pg.run(t, "release", "a", "b", "--ref", "w")
	if code != 1 || out != "" || !strings.Contains(errOut, `"w" does not hold b: nothing released`) {
		t.Errorf("release of a held and an unheld lock: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if held, err := la.Held(ctx); err != nil || !held {
		t.Fatalf("a was released by a refused release: held %v, %v", held, err)
	}
	out, errOut, code = pg.run(t, "release", "a", "ghost", "--ref", "w")
	if code != 1 || out != "" || !strings.Contains(errOut, "ghost") {
		t.Errorf("release naming an undefined lock: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if held, err := la.Held(ctx); err != nil || !held {
		t.Fatalf("a was released by a release naming an undefined lock: held %v, %v", held, err)
	}
	if _, err := pg.locks.Acquire(ctx, "b", sleeplock.Ref("w"), sleeplock.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = pg.run(t, "release", "a", "b", "--ref", "w")
	if code != 0 || out != "released \"w\" on a, b\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, n := range []string{"a", "b"} {
		if st, err := pg.locks.State(ctx, n); err != nil || st.Running != 0 {
			t.Fatalf("%s: %+v, %v", n, st, err)
		}
	}
	if _, errOut, code := pg.run(t, "release", "a", "a", "--ref", "w"); code != 2 {
		t.Errorf("a name twice: exit %d, %q", code, errOut)
	}
}
