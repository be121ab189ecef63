package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/election"
)

// state shows an election below the locks (leader, value, token, since,
// candidates waiting) and in its JSON as "election"; a plain lock's output
// has neither.
func TestStateShowsElections(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	st := "sqlite:" + db
	locks := sqliteLocks(t, db)
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

// serve --election NAME reports the election's terms and takeovers in
// /metrics; a bad name is a usage error.
func TestServeElectionMetrics(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	if _, _, code := run(t, "serve", "--store", "sqlite:"+db, "--election", "bad/*"); code != 2 {
		t.Fatalf("serve --election with a family pattern: exit %d, want 2", code)
	}
	locks := sqliteLocks(t, db)
	el, err := election.New(locks, "sched", election.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	term, err := el.Campaign(t.Context(), election.Candidate{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = term.Resign(t.Context()) }()

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	first := make(chan string, 1)
	errOut := &syncBuf{}
	exited := make(chan int, 1)
	go func() {
		exited <- Main(ctx, []string{"serve", "--store", "sqlite:" + db, "--addr", "127.0.0.1:0", "--election", "sched", "--election", "idle"},
			&lineWriter{first: first}, errOut)
	}()
	var base string
	select {
	case line := <-first:
		base = strings.TrimSuffix(strings.TrimPrefix(line, "serving the locks on "), "/")
	case code := <-exited:
		t.Fatalf("serve exited %d: %s", code, errOut.String())
	}
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`sleeplock_election_terms_total{election="sched"} 1`,
		`sleeplock_election_takeovers_total{election="sched"} 0`,
		`sleeplock_election_terms_total{election="idle"} 0`,
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics has no %q", line)
		}
	}
	stop()
	<-exited
}
