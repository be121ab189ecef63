package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// elect runs its command while leading, with the term's token, exits with
// the command's status and resigns; leader prints the leader (JSON too) or
// "vacant" with status 1.
func TestElectAndLeader(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	st := "sqlite:" + db
	out, errOut, code := run(t, "elect", "--store", st, "jobs", "--id", "a", "--", "sh", "-c", `echo "token=$SLEEPLOCK_TOKEN id=$SLEEPLOCK_LEADER_ID ref=$SLEEPLOCK_REF"; exit 3`)
	if code != 3 || !strings.Contains(out, "token=1 id=a ref=a#") {
		t.Fatalf("elect: exit %d, out %q, err %q; want 3 and token 1", code, out, errOut)
	}
	out, _, code = run(t, "leader", "--store", st, "jobs")
	if code != 1 || !strings.Contains(out, "vacant") {
		t.Fatalf("leader after the command exited: %d %q, want vacant (elect resigns)", code, out)
	}
	s, err := sqlitestore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	el, err := election.New(locks, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	term, err := el.Campaign(t.Context(), election.Candidate{ID: "b", Value: "10.0.0.2:80"})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, "leader", "--store", st, "--json", "jobs")
	var got leaderJSON
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("leader --json: %d %q %q", code, out, errOut)
	}
	if got.Event != "elected" || got.ID != "b" || got.Value != "10.0.0.2:80" || got.Token != term.Token() {
		t.Fatalf("leader --json: %+v, want b 10.0.0.2:80 token %d", got, term.Token())
	}
	if err := term.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, code := run(t, "elect", "--store", st, "jobs"); code != 2 {
		t.Fatalf("elect without a command: exit %d, want 2", code)
	}
}

// A leader whose term is taken from it (its hold released by someone
// else) has its command ended, and elect exits 122.
func TestElectEndsCommandWhenLeadershipLost(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	codes := make(chan int, 1)
	go func() {
		// The command's stderr and elect's messages share a writer: one
		// that a mutex guards, as a terminal is.
		var out, errOut lockedBuffer
		codes <- Main(t.Context(), []string{"elect", "--store", "sqlite:" + db, "--ttl", "900ms", "jobs", "--", "sleep", "60"}, &out, &errOut)
	}()
	s, err := sqlitestore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	var ref string
	for ref == "" {
		st, err := locks.StateDetail(t.Context(), "jobs")
		if err == nil && len(st.Holders) == 1 {
			ref = st.Holders[0].Ref
		}
	}
	lease, err := locks.LeaseOf(ref, []string{"jobs"})
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code := <-codes; code != exitLost {
		t.Fatalf("elect exited %d after its term was taken, want %d", code, exitLost)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
