package election

import (
	"testing"
	"time"
)

func leads(token int64, id, value string) view {
	return view{leads: true, left: time.Minute, leader: Leader{ID: id, Value: value, Token: token}}
}

// An observer ignores what is older than what it knows (tokens never go
// down), coalesces changes not yet delivered, and types each event against
// the last one delivered.
func TestObserverApply(t *testing.T) {
	o := &observer{e: &Election{ttl: time.Minute}}
	deliver := func() Event {
		t.Helper()
		if !o.pending {
			t.Fatal("no event pending")
		}
		ev := o.event()
		o.pending, o.sent, o.last = false, true, o.cur
		return ev
	}
	o.apply(view{}, 0, true)
	if ev := deliver(); ev.Type != Vacant || ev.Token != 0 {
		t.Fatalf("first event %+v, want vacant", ev)
	}
	o.apply(leads(5, "a", "x"), 5, false)
	o.apply(leads(5, "a", "y"), 5, false) // coalesced into the election
	if ev := deliver(); ev.Type != Elected || ev.Leader.Value != "y" || ev.Token != 5 {
		t.Fatalf("got %+v, want elected a y 5", ev)
	}
	o.apply(leads(4, "old", ""), 4, false) // a late message of an older term
	o.apply(view{}, 4, false)              // the end of an older term
	if o.pending {
		t.Fatalf("an older term made an event: %+v", o.event())
	}
	o.apply(leads(5, "a", "z"), 5, false)
	if ev := deliver(); ev.Type != Changed || ev.Leader.Value != "z" {
		t.Fatalf("got %+v, want changed z", ev)
	}
	o.apply(view{}, 5, false)
	o.apply(leads(6, "b", ""), 6, false)
	o.apply(view{}, 6, true) // b's lease expired
	if ev := deliver(); ev.Type != Vacant || ev.Token != 6 {
		t.Fatalf("got %+v, want vacant with token 6", ev)
	}
	o.apply(view{}, 0, true)
	if o.pending {
		t.Fatal("vacant again made an event")
	}
}

// Announcements carry the whole state, and anything else is not one.
func TestEncodeDecode(t *testing.T) {
	v := leads(7, "host \"a\" <1>", "10.0.0.1:80")
	v.leader.Since = time.UnixMicro(1_700_000_000_000_000)
	got, tok, ok := decode(encode(v, 0))
	if !ok || tok != 7 || got.leader != v.leader || got.left != v.left || !got.leads {
		t.Fatalf("decode(encode(%+v)) = %+v, %d, %v", v, got, tok, ok)
	}
	if got, tok, ok := decode(encode(view{}, 9)); !ok || got.leads || tok != 9 {
		t.Fatalf("vacant: %+v, %d, %v", got, tok, ok)
	}
	for _, bad := range []string{"", "{", `{"t":0}`, "1:lock"} {
		if _, _, ok := decode(bad); ok {
			t.Fatalf("decode(%q) took it", bad)
		}
	}
}

func TestCandidateID(t *testing.T) {
	id, ok := CandidateID(newRef("host#1"))
	if !ok || id != "host#1" {
		t.Fatalf("CandidateID = %q, %v", id, ok)
	}
	for _, ref := range []string{"plain", "#0123456789abcdef", "x#0123456789abcdeg", "x#01"} {
		if _, ok := CandidateID(ref); ok {
			t.Fatalf("CandidateID(%q) took it", ref)
		}
	}
}
