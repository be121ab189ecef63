package pgstore

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestDispatcherWakesInTicketOrder: a notification wakes as many of this
// store's waiters of the lock as it says slots are free, in ticket order;
// one for a lock without local waiters, or garbled, changes nothing; a
// waiter leaving tells the one that became a head of the queue (it arms
// its timer, it does not check); a handoff reaches its waiter alone, with
// the grant (also one that came before the waiter was queued here), and a
// handoff for another ticket or op, or garbled, is ignored.
func TestDispatcherWakesInTicketOrder(t *testing.T) {
	var d dispatcher
	d.init(&Store{})
	ws := map[int64]*waiter{}
	for _, ticket := range []int64{5, 3, 9} {
		w := &waiter{op: ticket * 10, names: []string{"k"}, wake: make(chan struct{}, 1),
			up: make(chan struct{}, 1), handed: make(chan handoff, 1)}
		d.all[w.op] = w
		d.active.Add(1)
		d.queued(w, ticket, map[string]int{"k": 1})
		ws[ticket] = w
	}
	woken := func() (out []int64) {
		for _, ticket := range []int64{3, 5, 9} {
			select {
			case <-ws[ticket].wake:
				out = append(out, ticket)
			default:
			}
		}
		return out
	}
	if !d.head(ws[3]) || d.head(ws[5]) || d.head(ws[9]) {
		t.Fatal("with one slot only ticket 3 is a head")
	}
	d.notified("2:k")
	if got := woken(); len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Fatalf("2 free slots woke %v, want [3 5]", got)
	}
	for _, p := range []string{"1:ghost", "garbage", ":", "x:k/other", ""} {
		d.notified(p)
	}
	if got := woken(); len(got) != 0 {
		t.Fatalf("notifications of other locks woke %v", got)
	}
	d.leave(ws[3])
	if got := woken(); len(got) != 0 || !d.head(ws[5]) {
		t.Fatalf("ticket 3 leaving woke %v, want none (5 told it is a head)", got)
	}
	select {
	case <-ws[5].up:
	default:
		t.Fatal("ticket 3 leaving did not tell 5 it became a head")
	}
	for _, p := range []string{"g 50 4 7 1 2 3 1 1 0 9", "g 60 5 7 1 2 3 1 1 0 9", "g 50 5 x 1 2 3 1 1 0 9",
		"g 50 5 7", "g"} {
		d.notified(p)
	}
	d.notified("g 50 5 77 100 200 300 1 1 0 90")
	for _, w := range ws {
		select {
		case h := <-w.handed:
			if w != ws[5] || h != (handoff{op: 50, ticket: 5, token: 77, at: 100, expires: 200, seq: 300, slots: 1,
				running: 1, waited: 90}) {
				t.Fatalf("handoff %+v reached ticket %d", h, w.ticket)
			}
		default:
			if w == ws[5] {
				t.Fatal("the handoff to ticket 5 did not reach it")
			}
		}
	}
	if got := woken(); len(got) != 0 {
		t.Fatalf("handoffs woke %v", got)
	}
	// A handoff that arrives before its waiter is queued here is kept for it.
	d.notified("g 110 11 78 100 200 301 1 1 0 90")
	late := &waiter{op: 110, names: []string{"k"}, wake: make(chan struct{}, 1), up: make(chan struct{}, 1),
		handed: make(chan handoff, 1)}
	d.all[late.op] = late
	d.active.Add(1)
	d.queued(late, 11, map[string]int{"k": 1})
	select {
	case h := <-late.handed:
		if h.token != 78 {
			t.Fatalf("early handoff %+v", h)
		}
	default:
		t.Fatal("a handoff that came before its waiter was queued was lost")
	}
	d.leave(late)
	d.setSlots(ws[5], "k", 2)
	if got := woken(); len(got) != 2 || !d.head(ws[9]) {
		t.Fatalf("slots grown to 2 woke %v, want [5 9]", got)
	}
	d.leave(ws[5])
	d.leave(ws[9])
	if len(d.byLock) != 0 || len(d.all) != 0 {
		t.Fatalf("left behind: %v %v", d.byLock, d.all)
	}
}

// TestHandoffWaitsForLocalRelease: a waiter handed its grant waits until
// the releases of its lock that its store has in flight have emitted their
// events (so released comes before acquired), and no longer.
func TestHandoffWaitsForLocalRelease(t *testing.T) {
	var d dispatcher
	d.init(&Store{})
	done := d.releasing("k")
	other := d.releasing("other")
	defer other()
	waited := make(chan struct{})
	go func() {
		d.afterReleases(context.Background(), "k")
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("the waiter did not wait for the release in flight")
	case <-time.After(20 * time.Millisecond):
	}
	done()
	<-waited
	if len(d.releases("k")) != 0 || len(d.releases("other")) != 1 {
		t.Fatalf("in flight: %v", d.inflight)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.afterReleases(ctx, "other") // ends with its context
}

// TestTookGrantsAreBounded: while the heartbeat cannot reach the database,
// a store keeps at most maxTook grants to confirm, the newest.
func TestTookGrantsAreBounded(t *testing.T) {
	var d dispatcher
	for i := range maxTook + 10 {
		d.tookGrant("l"+strconv.Itoa(i), "r")
	}
	if len(d.took) != maxTook || d.took[0].lock != "l10" || d.took[maxTook-1].lock != "l"+strconv.Itoa(maxTook+9) {
		t.Fatalf("kept %d grants, first %q, last %q", len(d.took), d.took[0].lock, d.took[len(d.took)-1].lock)
	}
}

// beatConn answers node_beat() with written rows and a stale flag, and
// counts the beats sent.
type beatConn struct {
	conn
	written int64
	stale   bool
	beats   int
}

func (c *beatConn) query(_ context.Context, _ string, _ []any, each func(scan func(dest ...any) error) error) error {
	c.beats++
	return each(func(dest ...any) error {
		*dest[0].(*int64), *dest[1].(*bool) = c.written, c.stale
		return nil
	})
}

// TestBeatSkipsAndWakesHeads: a beat that finds a stale node wakes the
// heads of this store's queue, and no other waiter (the heads' timers are
// long: only a check passes the dead node's waiters ahead of them). A beat
// right after one that wrote the node's row sends nothing while no node is
// stale and nothing is to confirm; it is sent while a node is stale, and
// once the row has aged 40 % of the waiter TTL.
func TestBeatSkipsAndWakesHeads(t *testing.T) {
	var d dispatcher
	d.init(&Store{cfg: config{waiterTTL: time.Hour}})
	ws := map[int64]*waiter{}
	for _, ticket := range []int64{1, 2} {
		w := &waiter{op: ticket * 10, names: []string{"k"}, wake: make(chan struct{}, 1),
			up: make(chan struct{}, 1), handed: make(chan handoff, 1)}
		d.all[w.op] = w
		d.active.Add(1)
		d.queued(w, ticket, map[string]int{"k": 1})
		ws[ticket] = w
	}
	woken := func(ticket int64) bool {
		select {
		case <-ws[ticket].wake:
			return true
		default:
			return false
		}
	}
	ctx := context.Background()
	c := &beatConn{written: 1}
	d.beat(ctx, c) // writes the row; no node stale
	if c.beats != 1 || woken(1) || woken(2) {
		t.Fatalf("first beat: %d sent, woken %v %v", c.beats, woken(1), woken(2))
	}
	d.beat(ctx, c) // the row is fresh (an hour's TTL): nothing sent
	if c.beats != 1 {
		t.Fatalf("a beat with nothing to write was sent (%d)", c.beats)
	}
	d.tookGrant("k", "r") // a grant to confirm: sent
	d.beat(ctx, c)
	if c.beats != 2 {
		t.Fatalf("a beat with a grant to confirm was not sent (%d)", c.beats)
	}
	c.written, c.stale = 0, true
	d.tookGrant("k", "r2") // sent (a grant to confirm), and finds a stale node
	d.beat(ctx, c)
	if c.beats != 3 || !woken(1) || woken(2) {
		t.Fatalf("stale beat: %d sent, head woken %v, second woken %v", c.beats, woken(1), woken(2))
	}
	d.beat(ctx, c) // sent while a node is stale, however fresh the row
	if c.beats != 4 || !woken(1) {
		t.Fatalf("a beat while a node is stale: %d sent, head woken %v", c.beats, woken(1))
	}
	c.stale = false
	d.beat(ctx, c) // the last stale beat
	d.beat(ctx, c) // fresh row, no stale node: skipped
	if c.beats != 5 {
		t.Fatalf("after the stale node went: %d sent, want 5", c.beats)
	}
	d.wrote.Store(1) // the row was written long ago (since born)
	d.s.cfg.waiterTTL = time.Nanosecond
	d.beat(ctx, c)
	if c.beats != 6 {
		t.Fatalf("a beat due to renew the row was not sent (%d)", c.beats)
	}
}
