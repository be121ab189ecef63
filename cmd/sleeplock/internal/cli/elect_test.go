package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
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
	out, errOut, code := run(t, "elect", "--store", st, "jobs", "--id", "a", "--", "sh", "-c", `echo "token=$SLEEPLOCK_TOKEN id=$SLEEPLOCK_LEADER_ID"; exit 3`)
	if code != 3 || !strings.Contains(out, "token=1 id=a") {
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
