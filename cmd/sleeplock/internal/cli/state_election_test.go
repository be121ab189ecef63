package cli

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// state shows an election below the locks (leader, value, token, since,
// candidates waiting) and in its JSON as "election"; a plain lock's output
// has neither.
func TestStateShowsElections(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	st := "sqlite:" + db
	s, err := sqlitestore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	if _, _, code := run(t, "define", "--store", st, "plain", "1"); code != 0 {
		t.Fatalf("define: exit %d", code)
	}
	out, _, code := run(t, "state", "--store", st)
	if code != 0 || strings.Contains(out, "ELECTION") {
		t.Fatalf("state of a plain lock: %d %q; want no election table", code, out)
	}
	el, err := election.New(locks, "jobs", election.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	term, err := el.Campaign(t.Context(), election.Candidate{ID: "host-b", Value: "10.0.0.2:80"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = term.Resign(t.Context()) }()
	waiting := make(chan error, 1)
	go func() {
		next, err := el.Campaign(t.Context(), election.Candidate{ID: "host-c"})
		if err == nil {
			err = next.Resign(t.Context())
		}
		waiting <- err
	}()
	for {
		st, err := locks.State(t.Context(), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiting == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the store: nothing to wait on across processes
	}

	out, errOut, code := run(t, "state", "--store", st)
	if code != 0 {
		t.Fatalf("state: %d %q", code, errOut)
	}
	_, table, ok := strings.Cut(out, "ELECTION")
	if !ok {
		t.Fatalf("state: no election table in\n%s", out)
	}
	fields := strings.Fields(strings.Split(table, "\n")[1])
	want := []string{"jobs", "host-b", "10.0.0.2:80", strconv.FormatInt(term.Token(), 10)}
	if len(fields) < 7 || strings.Join(fields[:4], " ") != strings.Join(want, " ") || fields[5] != "ago" || fields[6] != "1" {
		t.Fatalf("state's election row %q; want %v, since, 1 waiting", fields, want)
	}

	out, _, code = run(t, "state", "--store", st, "--json")
	var views []lockview.Lock
	if code != 0 || json.Unmarshal([]byte(out), &views) != nil || len(views) != 2 {
		t.Fatalf("state --json: %d %q", code, out)
	}
	if views[1].Name != "plain" || views[1].Election != nil || strings.Count(out, `"election"`) != 1 {
		t.Fatalf("state --json: the plain lock has an election: %s", out)
	}
	got := views[0].Election
	if got == nil || got.Vacant || got.Leader != "host-b" || got.Value != "10.0.0.2:80" || got.Token != term.Token() ||
		got.Waiting != 1 || got.Since == "" || got.AgeMS == nil {
		t.Fatalf("state --json: election %+v; want host-b leading with token %d, 1 waiting", got, term.Token())
	}
	if err := term.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
}
