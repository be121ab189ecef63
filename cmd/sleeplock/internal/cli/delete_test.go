package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// The typo locks, made by run on first use, can be deleted, and
// their names are shown as they are.
func TestDeleteTypoLocks(t *testing.T) {
	pg := newPG(t)
	for _, name := range []string{"-n", "../etc/passwd", "a;rm -rf /", "*"} {
		// The store's flags first: after "--" everything is an argument.
		store := []string{"--store", pg.dsn, "--schema", pg.schema}
		if _, errOut, code := run(t, append(append([]string{"run", "-q"}, store...), "--", name, "true")...); code != 0 {
			t.Fatalf("run %q: exit %d %q", name, code, errOut)
		}
		out, errOut, code := run(t, append(append([]string{"delete"}, store...), "--", name)...)
		if code != 0 || out != "deleted "+name+"\n" {
			t.Fatalf("delete %q: exit %d %q %q", name, code, out, errOut)
		}
		if _, err := pg.locks.State(t.Context(), name); !errors.Is(err, sleeplock.ErrNotFound) {
			t.Fatalf("%q after delete: %v", name, err)
		}
	}
	states, err := pg.locks.List(t.Context())
	if err != nil || len(states) != 0 {
		t.Fatalf("locks left: %+v %v", states, err)
	}
}

func TestDeleteInUseAndForce(t *testing.T) {
	pg := newPG(t)
	ctx := t.Context()
	if err := pg.locks.Define(ctx, "jobs", 1); err != nil {
		t.Fatal(err)
	}
	lease, err := pg.locks.Acquire(ctx, "jobs", sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := pg.locks.Acquire(ctx, "jobs", sleeplock.TTL(time.Minute))
		waited <- err
	}()
	for {
		st, err := pg.locks.State(ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiting == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond) // polls for a state, not for time
	}
	_, errOut, code := pg.run(t, "delete", "jobs")
	if code != 1 || errOut != "sleeplock delete: lock \"jobs\" is in use (1 holder, 1 waiter): nothing deleted; release them, or give --force to end them\n" {
		t.Fatalf("delete of a lock in use: exit %d %q", code, errOut)
	}
	if held, err := lease.Held(ctx); err != nil || !held {
		t.Fatalf("a refused delete ended the lease: %v %v", held, err)
	}
	out, errOut, code := pg.run(t, "delete", "jobs", "--force")
	if code != 0 || out != "deleted jobs: ended 1 hold and 1 waiter\n" {
		t.Fatalf("delete --force: exit %d %q %q", code, out, errOut)
	}
	if err := <-waited; !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("the waiter returned %v, want ErrNotFound", err)
	}
	_ = lease.Keep(ctx) // the holder learns it at its next renewal
	<-lease.Done()
	if cause := context.Cause(lease.Context()); !errors.Is(cause, sleeplock.ErrLeaseLost) || !strings.Contains(cause.Error(), "released by another") {
		t.Fatalf("the lease ended with %v", cause)
	}
	if _, errOut, code := pg.run(t, "delete", "jobs"); code != 1 || !strings.Contains(errOut, `no lock "jobs" to delete`) {
		t.Fatalf("delete of a deleted lock: exit %d %q", code, errOut)
	}
	for _, args := range [][]string{{"delete"}, {"delete", "a", "b"}} {
		if _, errOut, code := pg.run(t, args...); code != 2 {
			t.Errorf("%q: exit %d %q", args, code, errOut)
		}
	}
	if _, errOut, code := pg.run(t, "delete", "bad\x01name"); code != 2 || !strings.Contains(errOut, "invalid lock name") {
		t.Errorf("bad name: exit %d %q", code, errOut)
	}
}
