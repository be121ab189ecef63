package election

import (
	"testing"
	"time"
)

func leads(token int64, id, value string) view {
	return view{leads: true, left: time.Minute, leader: Leader{ID: id, Value: value, Token: token}}
}

// proclaimed is leads(token, id, value) as the leader announces it after
// its seq-th Proclaim.
func proclaimed(token int64, id, value string, seq int64) view {
	v := leads(token, id, value)
	v.seq = seq
	return v
}

// heard passes an announcement to o as the store would carry it.
func heard(t *testing.T, o *observer, v view, last int64) bool {
	t.Helper()
	v, p, ok := decode(encode(v, last))
	if !ok {
		t.Fatalf("decode(encode(%+v, %d)) failed", v, last)
	}
	return o.heardState(v, p)
}

// An observer ignores what is older than what it knows (tokens never go
// down, a term's end ranks above its states, a leader's proclaims in
// order), coalesces changes not yet delivered, and types each event
// against the last one delivered.
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
	hear := func(v view, last int64) {
		t.Helper()
		if !heard(t, o, v, last) {
			t.Fatalf("hearing %+v (%d) asked for a read", v, last)
		}
	}
	o.read(view{})
	if ev := deliver(); ev.Type != Vacant || ev.Token != 0 {
		t.Fatalf("first event %+v, want vacant", ev)
	}
	o.read(leads(5, "a", "x"))
	hear(proclaimed(5, "a", "y", 1), 0) // coalesced into the election
	if ev := deliver(); ev.Type != Elected || ev.Leader.Value != "y" || ev.Token != 5 {
		t.Fatalf("got %+v, want elected a y 5", ev)
	}
	hear(leads(4, "old", ""), 0)          // a late message of an older term
	hear(view{}, 4)                       // the end of an older term
	hear(proclaimed(5, "a", "x", 0), 0)   // the term's start, heard late
	hear(proclaimed(5, "a", "old", 1), 0) // a proclaim already heard
	if o.pending {
		t.Fatalf("an older state made an event: %+v", o.event())
	}
	hear(proclaimed(5, "a", "z", 2), 0)
	if ev := deliver(); ev.Type != Changed || ev.Leader.Value != "z" {
		t.Fatalf("got %+v, want changed z", ev)
	}
	o.read(leads(5, "a", "z")) // a read keeps the proclaims heard
	hear(proclaimed(5, "a", "y", 1), 0)
	if o.pending || o.cur.leader.Value != "z" {
		t.Fatalf("a proclaim older than a read made %+v", o.cur.leader)
	}
	hear(view{}, 5)
	hear(leads(6, "b", ""), 5)
	o.read(view{}) // b's lease expired
	if ev := deliver(); ev.Type != Vacant || ev.Token != 6 {
		t.Fatalf("got %+v, want vacant with token 6", ev)
	}
	o.read(view{})
	if o.pending {
		t.Fatal("vacant again made an event")
	}
}

// Issue 38: A resigns and announces what it read after its release (B
// leads, term 7); B resigns at once and announces the vacancy. A's
// announcement, arriving last, is older: the observer stays on the
// vacancy, as Leader says.
func TestObserverStaleAnnouncement(t *testing.T) {
	o := &observer{e: &Election{ttl: time.Minute}}
	o.read(leads(6, "a", ""))
	o.pending, o.sent, o.last = false, true, o.cur
	b := leads(7, "b", "")
	if !heard(t, o, b, 0) || !heard(t, o, view{}, 7) || !heard(t, o, b, 6) {
		t.Fatal("an announcement asked for a read")
	}
	if o.cur.leads || o.event().Type != Vacant || o.event().Token != 7 {
		t.Fatalf("ended on %+v, want the vacancy after 7", o.event())
	}

	// An observer that read the vacancy cannot place A's announcement
	// (the read does not say which term ended): it reads instead, and
	// takes the announcement of an older term for nothing.
	o = &observer{e: &Election{ttl: time.Minute}}
	o.read(leads(6, "a", ""))
	o.read(view{})
	if heard(t, o, b, 6) {
		t.Fatal("an announced leader after a vacancy read was taken without a read")
	}
	if o.cur.leads {
		t.Fatalf("took %+v", o.cur.leader)
	}
	if !heard(t, o, leads(5, "old", ""), 0) || !heard(t, o, view{}, 7) || o.cur.leads || o.at.token != 7 {
		t.Fatalf("after older and vacant announcements: %+v at %+v", o.cur, o.at)
	}
	// A lease that expired (read vacant) and was renewed before anyone
	// took over leads again: its announcements ask for a read, which
	// shows it.
	if heard(t, o, proclaimed(7, "b", "again", 1), 0) {
		t.Fatal("a revived leader's proclaim was taken without a read")
	}
	o.read(leads(7, "b", "again"))
	if !o.cur.leads || o.cur.leader.Value != "again" || o.guess {
		t.Fatalf("the read of the revived leader: %+v", o.cur)
	}
	if !heard(t, o, proclaimed(7, "b", "later", 2), 0) || o.cur.leader.Value != "later" {
		t.Fatalf("a later proclaim: %+v", o.cur.leader)
	}
}

func TestPosOrder(t *testing.T) {
	order := []pos{{token: 1}, {token: 1, seq: 1}, {token: 1, seq: 2}, {token: 1, ended: true}, {token: 2}, {token: 2, ended: true}}
	for i, p := range order {
		for j, q := range order {
			if got := p.after(q); got != (i > j) {
				t.Fatalf("%+v.after(%+v) = %v", p, q, got)
			}
		}
	}
}

// Announcements carry the whole state, and anything else is not one.
func TestEncodeDecode(t *testing.T) {
	v := leads(7, "host \"a\" <1>", "10.0.0.1:80")
	v.leader.Since = time.UnixMicro(1_700_000_000_000_000)
	v.seq = 3
	got, p, ok := decode(encode(v, 0))
	if !ok || p != (pos{token: 7, seq: 3}) || got.leader != v.leader || got.left != v.left || !got.leads || got.seq != 3 {
		t.Fatalf("decode(encode(%+v)) = %+v, %+v, %v", v, got, p, ok)
	}
	if got, p, ok := decode(encode(view{}, 9)); !ok || got.leads || p != (pos{token: 9, ended: true}) {
		t.Fatalf("vacant: %+v, %+v, %v", got, p, ok)
	}
	for _, bad := range []string{"", "{", `{"t":0}`, `{"t":1,"q":-1}`, "1:lock"} {
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
