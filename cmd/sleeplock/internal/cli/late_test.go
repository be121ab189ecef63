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

// A holder that stopped renewing (killed with -9, stopped) shows as late
// before its expiry, in the table and in the JSON document, with when it
// last renewed; a holder that renews on time does not (issue 42).
func TestStateShowsLateHolder(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := sleeplock.State{
		Name: "jobs", Slots: 2, Running: 2, Now: now,
		Holders: []store.Holder{
			// TTL 30 s, renewed 4 s ago: on time (a renewal owed every 10 s).
			{Ref: "alive", Token: 1, Count: 1, Acquired: now.Add(-time.Hour), Renewed: now.Add(-4 * time.Second), Expires: now.Add(26 * time.Second)},
			// TTL 30 s, renewed 20 s ago: late, 10 s left.
			{Ref: "stuck", Token: 2, Count: 1, Acquired: now.Add(-time.Hour), Renewed: now.Add(-20 * time.Second), Expires: now.Add(10 * time.Second)},
		},
	}
	var out bytes.Buffer
	printStates(&out, []sleeplock.State{st})
	table := out.String()
	for _, want := range []string{
		"alive age 1h0m0s, renewed 4s ago, 26s left",
		"stuck age 1h0m0s, renewed 20s ago (LATE: owed every 10s), 10s left",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Count(table, "LATE") != 1 {
		t.Errorf("the holder on time is marked late:\n%s", table)
	}

	doc, err := json.Marshal(lockview.Of(st))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Holders []struct {
			Ref       string `json:"ref"`
			Kept      string `json:"kept"`
			KeptMS    *int64 `json:"kept_ms"`
			LateAfter *int64 `json:"late_after_ms"`
			Late      bool   `json:"late"`
		} `json:"holders"`
	}
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Holders) != 2 {
		t.Fatalf("holders in %s", doc)
	}
	for i, want := range []struct {
		ref    string
		keptMS int64
		late   bool
	}{{"alive", 4000, false}, {"stuck", 20000, true}} {
		h := got.Holders[i]
		if h.Ref != want.ref || h.Late != want.late || h.KeptMS == nil || *h.KeptMS != want.keptMS ||
			h.LateAfter == nil || *h.LateAfter != 15000 || h.Kept != now.Add(-time.Duration(want.keptMS)*time.Millisecond).Format(time.RFC3339Nano) {
			t.Errorf("holder %d in %s, want ref %s, kept %d ms ago, late %v, late after 15000 ms", i, doc, want.ref, want.keptMS, want.late)
		}
	}
}
