package labels

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFamily(t *testing.T) {
	for in, want := range map[string]string{
		"chat/42": "chat/*", "chat/7/x": "chat/*", "chat/*": "chat/*", "a/b/*": "a/*", "pay": "pay", "": "",
	} {
		if got := Family(in); got != want {
			t.Errorf("Family(%q) = %q, want %q", in, got, want)
		}
	}
}

type val struct{ label string }

// TestSet: one value per label, at most max labels, then Other; a seen
// label costs no allocation.
func TestSet(t *testing.T) {
	made := 0
	s := NewSet(nil, 3, func(l string) *val { made++; return &val{l} })
	if a, b := s.Get("chat/1"), s.Get("chat/2"); a != b || a.label != "chat/*" {
		t.Fatalf("chat/1 %v, chat/2 %v", a, b)
	}
	if v := s.Get("chat"); v.label != "chat" {
		t.Fatalf("plain chat: %q", v.label)
	}
	s.Get("user/1")
	for i := range 100 {
		if v := s.Get(fmt.Sprintf("x%d/1", i)); v.label != Other {
			t.Fatalf("past the limit: %q", v.label)
		}
	}
	if s.Len() != 4 || made != 4 {
		t.Fatalf("%d labels, %d made; want 3 + Other", s.Len(), made)
	}
	if n := testing.AllocsPerRun(100, func() { s.Get("chat/12345") }); n != 0 {
		t.Fatalf("%v allocations for a seen label", n)
	}
	m := NewSet(func(string) string { return "all" }, 0, func(l string) *val { return &val{l} })
	if m.Get("a").label != "all" || m.Get("b/c") != m.Get("d") {
		t.Fatal("mapper not used")
	}
}

// Sums adds up the stats of each label once, in the order the labels
// first appear, whatever the order of the names.
func TestSums(t *testing.T) {
	s := NewSet(nil, 0, func(label string) *string { return &label })
	sums := s.Sums([]store.Stats{
		{Name: "chat/1", Acquisitions: 2, Running: 1},
		{Name: "pay", Acquisitions: 5},
		{Name: "chat/2", Acquisitions: 3, Running: 1},
	})
	if len(sums) != 2 {
		t.Fatalf("%d sums, want 2", len(sums))
	}
	for i, want := range []struct {
		label        string
		acq, running int
	}{{"chat/*", 5, 2}, {"pay", 5, 0}} {
		got := sums[i]
		if *got.Label != want.label || got.Stats.Acquisitions != uint64(want.acq) || got.Stats.Running != want.running {
			t.Errorf("sum %d = %s %+v, want %+v", i, *got.Label, got.Stats, want)
		}
	}
}

// TestElections: an election's terms are its lock's grants, its takeovers
// its lock's expiries; an election with no lock yet counts 0; a family of
// the same name is not it.
func TestElections(t *testing.T) {
	all := []store.Stats{
		{Name: "a", Acquisitions: 9, Expiries: 1},
		{Name: "sched", Acquisitions: 5, Expiries: 2, Releases: 3},
		{Name: "z/*", Family: true, Acquisitions: 7},
	}
	got := Elections(all, Distinct([]string{"sched", "none", "sched", "z/*"}))
	want := []Election{{Name: "none"}, {Name: "sched", Terms: 5, Takeovers: 2}, {Name: "z/*"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Elections = %v, want %v", got, want)
	}
}

// Holds keeps, per label, the age of the oldest hold and counts the late
// holders; a lock with no holder adds no label.
func TestHolds(t *testing.T) {
	s := NewSet(nil, 0, func(label string) *string { return &label })
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	onTime := store.Holder{Acquired: now.Add(-time.Hour), Renewed: now.Add(-time.Second), Expires: now.Add(29 * time.Second)}
	late := store.Holder{Acquired: now.Add(-2 * time.Minute), Renewed: now.Add(-20 * time.Second), Expires: now.Add(10 * time.Second)}
	// Past its expiry: its slot goes to the next caller, so it is neither
	// the oldest hold nor late, and a lock with only such holds is absent.
	expired := store.Holder{Acquired: now.Add(-3 * time.Hour), Renewed: now.Add(-time.Minute), Expires: now.Add(-30 * time.Second)}
	holds := s.Holds([]store.State{
		{Name: "chat/1", Now: now, Holders: []store.Holder{late, expired}},
		{Name: "chat/2", Now: now, Holders: []store.Holder{onTime, late}},
		{Name: "pay", Now: now, Holders: []store.Holder{onTime}},
		{Name: "idle", Now: now},
		{Name: "gone", Now: now, Holders: []store.Holder{expired}},
	})
	if got, want := holds[s.Get("chat/1")], (Holds{Oldest: time.Hour, Late: 2}); got != want {
		t.Errorf("chat/*: %+v, want %+v", got, want)
	}
	if got, want := holds[s.Get("pay")], (Holds{Oldest: time.Hour}); got != want {
		t.Errorf("pay: %+v, want %+v", got, want)
	}
	if _, ok := holds[s.Get("idle")]; ok || len(holds) != 2 {
		t.Errorf("labels: %v, want chat/* and pay (not idle, not gone)", holds)
	}
}
