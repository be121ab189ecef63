package pgstore

import (
	"strconv"
	"strings"
	"testing"
)

// TestFastHintsContention: a lock is slow until seen fast; a contended
// lock stays slow, whatever else is seen, until it has been seen fast
// contendedSightings times; other names keep their own hints.
func TestFastHintsContention(t *testing.T) {
	var h fastHints
	h.init()
	if h.is("a") {
		t.Fatal("a lock not seen counts as fast")
	}
	h.set("a", true)
	if !h.is("a") {
		t.Fatal("a lock seen fast is not fast")
	}
	h.set("a", false)
	if h.is("a") {
		t.Fatal("a lock seen slow is still fast")
	}
	h.set("a", true)
	h.contended("a")
	for i := range contendedSightings {
		if h.is("a") {
			t.Fatalf("contended lock fast after %d sightings", i)
		}
		h.set("a", false) // a slow sighting neither ends nor restarts it
		h.set("a", true)
	}
	if !h.is("a") {
		t.Fatalf("contended lock still slow after %d sightings fast", contendedSightings)
	}
	h.contended("a")
	h.set("a", true)
	h.contended("a") // contended again: the count starts over
	for range contendedSightings - 1 {
		h.set("a", true)
	}
	if h.is("a") {
		t.Fatal("contention seen again did not start the count over")
	}
	other := "b"
	for i := 0; h.entry(other) == h.entry("a"); i++ {
		other = "b" + strconv.Itoa(i)
	}
	h.set(other, true)
	if !h.is(other) || h.is("a") {
		t.Fatal("hints of two names in different entries mixed")
	}
}

// TestSlotModeMaxMatchesSQL: the store's hint of a lock of several slots
// (setMany) uses the bound at which acquire_one() stops putting a lock in
// slot mode: a mismatch would cost a second statement per grant.
func TestSlotModeMaxMatchesSQL(t *testing.T) {
	want := "v_slots <= " + strconv.Itoa(slotModeMax)
	for _, f := range functionFiles {
		if f.name != "sql/acquire_one.sql" {
			continue
		}
		if n := strings.Count(f.sql, want); n != 2 {
			t.Fatalf("%s has %q %d times, want 2 (step 1 and the turn to slot mode)", f.name, want, n)
		}
		return
	}
	t.Fatal("sql/acquire_one.sql not embedded")
}
