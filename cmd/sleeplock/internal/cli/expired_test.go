package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/store"
)

// A lease past its expiry that nobody took over is counted apart from the
// live holders, in the table and in the JSON document, and its holder is
// marked expired.
func TestStateShowsExpiredApart(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := sleeplock.State{
		Name: "jobs", Slots: 2, Running: 1, Expired: 1, Now: now,
		Holders: []store.Holder{
			{Ref: "live", Token: 2, Count: 1, Acquired: now.Add(-time.Second), Expires: now.Add(time.Minute)},
			{Ref: "gone", Token: 1, Count: 1, Acquired: now.Add(-time.Hour), Expires: now.Add(-time.Second)},
		},
	}
	var out bytes.Buffer
	printStates(&out, []sleeplock.State{st})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("table:\n%s", out.String())
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	if strings.Join(head[:5], " ") != "LOCK SLOTS RUNNING EXPIRED WAITING" || strings.Join(row[:5], " ") != "jobs 2 1 1 0" {
		t.Errorf("table:\n%s", out.String())
	}
	if !strings.Contains(lines[1], "gone age 1h0m0s, expired") {
		t.Errorf("the expired holder is not marked:\n%s", out.String())
	}
	doc, err := json.Marshal(lockview.Of(st))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatal(err)
	}
	if got["running"] != 1.0 || got["expired"] != 1.0 {
		t.Errorf("running %v, expired %v in %s", got["running"], got["expired"], doc)
	}
}
