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

// A weight larger than the lock's slots fails at once (status 125, saying
// why); contradictory flags are a bad command line (status 2).
func TestRunWeightErrors(t *testing.T) {
	e := newRunEnv(t)
	_, errOut, code := run(t, "run", "--store", e.store(), "--weight", "2", "one", "true")
	if code != exitFailed || !strings.Contains(errOut, "fewer than the 2 asked") {
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
