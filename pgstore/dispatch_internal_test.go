package pgstore

import "testing"

// TestDispatcherWakesInTicketOrder: a notification wakes as many of this
// store's waiters of the lock as it says slots are free, in ticket order;
// one for a lock without local waiters, or garbled, changes nothing; a
// waiter leaving wakes the one that became a head of the queue.
func TestDispatcherWakesInTicketOrder(t *testing.T) {
	var d dispatcher
	d.init(&Store{})
	ws := map[int64]*waiter{}
	for _, ticket := range []int64{5, 3, 9} {
		w := &waiter{op: ticket * 10, names: []string{"k"}, wake: make(chan struct{}, 1)}
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
	if got := woken(); len(got) != 1 || got[0] != 5 || !d.head(ws[5]) {
		t.Fatalf("ticket 3 leaving woke %v, want [5] as the new head", got)
	}
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
