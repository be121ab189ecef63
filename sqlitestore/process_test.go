package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

func newLocks(t *testing.T, s *sqlitestore.Store, opts ...sleeplock.Option) *sleeplock.Locks {
	t.Helper()
	l := sleeplock.New(s, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for d := 100 * time.Microsecond; !cond(); d = min(2*d, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(d)
	}
}

func wantState(t *testing.T, l *sleeplock.Locks, name string, running, waiting int) {
	t.Helper()
	st, err := l.State(t.Context(), name)
	if err != nil || st.Running != running || st.Waiting != waiting {
		t.Fatalf("state of %q: %+v %v; want running %d, waiting %d", name, st, err, running, waiting)
	}
}

// A holder killed with SIGKILL (TTL 10 minutes) gives its slot to the
// waiter of another process at once: the pid check, not the TTL.
func TestKilledHolderGivesSlotBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	l := newLocks(t, openAt(t, path), sleeplock.WithTTL(10*time.Minute))
	if err := l.Define(t.Context(), "k", 1); err != nil {
		t.Fatal(err)
	}
	h := helper(t, true, "hold", path, "k")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // far below the TTL
	defer cancel()
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, "k")
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, "the waiter to queue", func() bool {
		st, err := l.State(t.Context(), "k")
		return err == nil && st.Waiting == 1
	})
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.Wait()
	if err := <-got; err != nil {
		t.Fatalf("the waiter did not get the killed holder's slot: %v", err)
	}
	wantState(t, l, "k", 0, 0)
}

// A waiter killed with SIGKILL leaves the queue at the next operation.
func TestKilledWaiterLeavesQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	l := newLocks(t, openAt(t, path))
	if err := l.Define(t.Context(), "w", 1); err != nil {
		t.Fatal(err)
	}
	held, err := l.TryAcquire(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	h := helper(t, true, "wait", path, "w")
	waitFor(t, "the helper to queue", func() bool {
		st, err := l.State(t.Context(), "w")
		return err == nil && st.Waiting == 1
	})
	_ = h.Process.Kill()
	_ = h.Wait()
	wantState(t, l, "w", 1, 0)
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	x, err := l.TryAcquire(t.Context(), "w") // nobody queues before it
	if err != nil {
		t.Fatal(err)
	}
	_ = x.Release(t.Context())
}

// Waiters of several processes are granted in the order they queued.
func TestFIFOAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	out := filepath.Join(t.TempDir(), "order")
	l := newLocks(t, openAt(t, path))
	if err := l.Define(t.Context(), "f", 1); err != nil {
		t.Fatal(err)
	}
	held, err := l.TryAcquire(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var cmds []interface{ Wait() error }
	for i := range n {
		cmds = append(cmds, helper(t, false, "queue", path, "f", strconv.Itoa(i), out))
		waitFor(t, "helper "+strconv.Itoa(i)+" to queue", func() bool {
			st, err := l.State(t.Context(), "f")
			return err == nil && st.Waiting == i+1
		})
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "0 1 2 3 4" {
		t.Fatalf("granted in order %v, want 0 1 2 3 4", got)
	}
}

// A holder record whose pid now names another process (pid reuse: another
// start time) is gone; one of another host (pid namespace) is kept until
// its TTL.
func TestPidReuseAndOtherHosts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	l := newLocks(t, openAt(t, path))
	if err := l.Define(t.Context(), "p", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(t.Context(), "p", sleeplock.Ref("old"), sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive()); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	var host string
	var pstart int64
	if err := db.QueryRow("SELECT host, pstart FROM holders").Scan(&host, &pstart); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE holders SET pid = 999999999, host = 'another-boot/pid:[1]'"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(t.Context(), "p"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a holder of another pid namespace was dropped: %v", err)
	}
	// This host again, a pid that no process has: gone.
	if _, err := db.Exec("UPDATE holders SET pid = 999999999, host = ?", host); err != nil {
		t.Fatal(err)
	}
	x, err := l.TryAcquire(t.Context(), "p", sleeplock.Ref("next"), sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
	if err != nil {
		t.Fatalf("the record of a process that is gone still holds: %v", err)
	}
	// Our own pid with another start time: a reused pid.
	if _, err := db.Exec("UPDATE holders SET pstart = ?", pstart+1); err != nil {
		t.Fatal(err)
	}
	y, err := l.TryAcquire(t.Context(), "p", sleeplock.Ref("third"))
	if err != nil {
		t.Fatalf("the record of a reused pid still holds: %v", err)
	}
	if held, _ := x.Held(t.Context()); held {
		t.Fatal("the reused pid's lease is still held")
	}
	_ = y.Release(t.Context())
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
