package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// The typo locks (made by run on first use, before run refused a
// "--" before NAME) can be deleted, and their names are shown as they are.
func TestDeleteTypoLocks(t *testing.T) {
	pg := newPG(t)
	for _, name := range []string{"-n", "../etc/passwd", "a;rm -rf /", "*"} {
		// The store's flags first: after "--" everything is an argument.
		store := []string{"--store", pg.dsn, "--schema", pg.schema}
		if _, errOut, code := run(t, append(append([]string{"define"}, store...), "--", name, "1")...); code != 0 {
			t.Fatalf("define %q: exit %d %q", name, code, errOut)
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

// apply --resize reconciles the whole file in one step; --prune deletes
// what the file does not name, refused when in use unless --force; every
// error names the file (and the line, for an entry).
func TestApplyResizePrune(t *testing.T) {
	pg := newPG(t)
	ctx := t.Context()
	for name, slots := range map[string]int{"payments": 4, "old": 1, "stray/*": 2} {
		if err := pg.locks.Define(ctx, name, slots); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "locks.yaml")
	if err := os.WriteFile(file, []byte("locks:\n  - name: reports\n    slots: 1\n  - name: payments\n    slots: 6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := pg.run(t, "apply", file); code != 1 ||
		errOut != "sleeplock apply: "+file+":4: lock \"payments\" has 4 slots, not 6: change the file, or give --resize\n" {
		t.Fatalf("apply of changed slots: exit %d %q", code, errOut)
	}
	if out, errOut, code := pg.run(t, "apply", file, "--resize"); code != 0 || out != "reports has 1 slot\npayments resized to 6 slots\n" {
		t.Fatalf("apply --resize: exit %d %q %q", code, out, errOut)
	}
	lease, err := pg.locks.Acquire(ctx, "old", sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := pg.run(t, "apply", file, "--prune"); code != 1 ||
		errOut != "sleeplock apply: "+file+": lock \"old\" is not in the file and is in use (1 holder, 0 waiters): nothing changed; release them, or give --force to end them\n" {
		t.Fatalf("apply --prune of a lock in use: exit %d %q", code, errOut)
	}
	if _, err := pg.locks.State(ctx, "stray/*"); err != nil {
		t.Fatalf("a refused prune deleted stray/*: %v", err)
	}
	if _, errOut, code := pg.run(t, "apply", file, "--force"); code != 2 || !strings.Contains(errOut, "--force goes with --prune") {
		t.Fatalf("--force without --prune: exit %d %q", code, errOut)
	}
	out, errOut, code := pg.run(t, "apply", file, "--prune", "--force")
	if code != 0 || out != "deleted old\ndeleted stray/*\nended 1 hold and 0 waiters\nreports has 1 slot\npayments has 6 slots\n" {
		t.Fatalf("apply --prune --force: exit %d %q %q", code, out, errOut)
	}
	_ = lease.Keep(ctx)
	<-lease.Done()
	states, err := pg.locks.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range states {
		names = append(names, st.Name)
	}
	if !slices.Equal(names, []string{"payments", "reports"}) {
		t.Fatalf("locks after apply --prune: %q", names)
	}
}
