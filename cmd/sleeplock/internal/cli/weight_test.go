package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// run --weight K holds K slots: the command sees them held, state shows
// the holder's weight (table and JSON), and the lock is free after.
func TestRunWeight(t *testing.T) {
	e := newRunEnv(t)
	l := e.locks(t)
	if err := l.Define(t.Context(), "gpu", 4); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "run", "--store", e.store(), "-q", "--weight", "3", "--kind", "train", "gpu", "--",
		"sh", "-c", `echo "$SLEEPLOCK_LOCK"`)
	if code != 0 || out != "gpu\n" {
		t.Fatalf("run --weight 3: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	e.wantState(t, "gpu", 0, 0)

	lease, err := l.Acquire(t.Context(), "gpu", sleeplock.Weight(3), sleeplock.Kind("train"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	out, _, code = run(t, "state", "--store", e.store(), "gpu")
	if code != 0 || !strings.Contains(out, "(train) weight 3") {
		t.Fatalf("state: exit %d, %q; want the holder's weight 3", code, out)
	}
	out, _, code = run(t, "state", "--store", e.store(), "--json", "gpu")
	var v []struct {
		Running, Leases int
		Holders         []struct{ Weight int }
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v) != 1 || v[0].Running != 3 || v[0].Leases != 1 ||
		len(v[0].Holders) != 1 || v[0].Holders[0].Weight != 3 {
		t.Fatalf("state --json: exit %d, %v, %s; want running 3, 1 lease of weight 3", code, err, out)
	}
	// Two slots are asked, one is free: refused.
	_, _, code = run(t, "run", "--store", e.store(), "-q", "-n", "--weight", "2", "gpu", "true")
	if code != exitRefused {
		t.Fatalf("run -n --weight 2 beside a holder of 3 of 4: exit %d, want %d", code, exitRefused)
	}
}

// A weight larger than the slots of the lock that run would define fails
// at once (status 125, saying why, defining nothing); contradictory flags are a bad command line (status 2).
func TestRunWeightErrors(t *testing.T) {
	e := newRunEnv(t)
	_, errOut, code := run(t, "run", "--store", e.store(), "--weight", "2", "one", "true")
	if code != exitFailed || !strings.Contains(errOut, "define it with 1 slot, fewer than --weight 2") {
		t.Fatalf("run --weight 2 on a new lock of 1 slot: exit %d, stderr %q; want %d and why", code, errOut, exitFailed)
	}
	for _, args := range [][]string{
		{"--weight", "0"},
		{"--shared", "--exclusive"},
		{"-s", "--weight", "2"},
		{"-x", "--weight", "2"},
		{"--slots", "2", "--weight", "3"},
	} {
		_, _, code := run(t, append(append([]string{"run", "--store", e.store()}, args...), "lk", "true")...)
		if code != 2 {
			t.Errorf("run %v: exit %d, want 2", args, code)
		}
	}
}

// run --shared on a lock that does not exist defines it with sharedSlots.
func TestRunSharedDefines(t *testing.T) {
	e := newRunEnv(t)
	if _, errOut, code := run(t, "run", "--store", e.store(), "-s", "readers", "true"); code != 0 {
		t.Fatalf("run -s: exit %d, %q", code, errOut)
	}
	st, err := e.locks(t).State(t.Context(), "readers")
	if err != nil || st.Slots != sharedSlots {
		t.Fatalf("state %+v %v: want %d slots", st, err, sharedSlots)
	}
}

// A refused run --weight says what it asked and what is free (issue 29
// B5), and a second reader refused on a lock of one slot is told why and
// what to run (B6).
func TestRunRefusalSaysWhy(t *testing.T) {
	e := newRunEnv(t)
	l := e.locks(t)
	if err := l.Define(t.Context(), "gpu", 16); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(t.Context(), "gpu", sleeplock.Weight(14))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	_, errOut, code := run(t, "run", "--store", e.store(), "-n", "--weight", "4", "gpu", "true")
	if code != exitRefused || !strings.Contains(errOut, "4 asked, 2 of 16 free") || strings.Contains(errOut, "all slots are held") {
		t.Fatalf("run -n --weight 4 with 14 of 16 held: exit %d, stderr %q; want \"4 asked, 2 of 16 free\"", code, errOut)
	}

	// A plain run made "db" with 1 slot; a reader holds it; a second
	// reader is refused and told to resize.
	_, _, code = run(t, "run", "--store", e.store(), "-q", "db", "true")
	if code != 0 {
		t.Fatalf("plain run: exit %d", code)
	}
	reader, err := l.Acquire(t.Context(), "db", sleeplock.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Release(context.Background()) }()
	_, errOut, code = run(t, "run", "--store", e.store(), "-s", "-n", "db", "true")
	if code != exitRefused || !strings.Contains(errOut, `lock "db" has 1 slot, so readers cannot share it`) ||
		!strings.Contains(errOut, "sleeplock define db 1000000 --resize") {
		t.Fatalf("run -s -n on a 1-slot lock: exit %d, stderr %q; want why and the define to run", code, errOut)
	}
	// Waiting, the reader is told the same once.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan string, 1)
	w := &signalWriter{want: "readers cannot share it", seen: make(chan struct{})}
	seen := w.seen
	go func() {
		Main(ctx, []string{"run", "--store", e.store(), "-s", "db", "true"}, w, w)
		done <- w.String()
	}()
	<-seen
	cancel()
	if s := <-done; strings.Count(s, "readers cannot share it") != 1 {
		t.Fatalf("waiting reader's stderr %q: want the hint once", s)
	}
	_, errOut, code = run(t, "run", "--store", e.store(), "-n", "db", "true")
	if code != exitRefused || strings.Contains(errOut, "readers cannot share") {
		t.Fatalf("plain run -n: exit %d, stderr %q; want no reader's hint", code, errOut)
	}
}

// An exclusive holder and an exclusive waiter are shown one way (issue 29
// B8): in state's JSON both have their weight in slots and "exclusive":
// true, and the table says "exclusive" for both.
func TestStateShowsExclusiveOneWay(t *testing.T) {
	e := newRunEnv(t)
	l := e.locks(t)
	if err := l.Define(t.Context(), "w", 4); err != nil {
		t.Fatal(err)
	}
	held, err := l.Acquire(t.Context(), "w", sleeplock.Ref("writer-1"), sleeplock.Exclusive())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(context.Background()) }()
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, "w", sleeplock.Ref("writer-2"), sleeplock.Exclusive())
		waited <- err
	}()
	defer func() { cancel(); <-waited }()
	waitUntil(t, "the exclusive waiter queued", func() bool {
		st, err := l.State(t.Context(), "w")
		return err == nil && st.Waiting == 1
	})
	out, _, code := run(t, "state", "--store", e.store(), "--json", "w")
	var v []struct {
		Holders, Queue []struct {
			Weight    int
			Exclusive bool
		}
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v) != 1 || len(v[0].Holders) != 1 || len(v[0].Queue) != 1 ||
		v[0].Holders[0] != v[0].Queue[0] || v[0].Holders[0].Weight != 4 || !v[0].Holders[0].Exclusive {
		t.Fatalf("state --json: exit %d, %v, %s; want the holder and the waiter both weight 4, exclusive", code, err, out)
	}
	out, _, code = run(t, "state", "--store", e.store(), "w")
	if code != 0 || !strings.Contains(out, "writer-1 exclusive") || !strings.Contains(out, "writer-2 exclusive") || strings.Contains(out, "weight 4") {
		t.Fatalf("state: exit %d, %q; want both shown as exclusive", code, out)
	}
}
