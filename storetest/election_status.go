package storetest

import (
	"slices"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/store"
)

// statusIn returns what election.StatusOf reads from name's state in a
// List, and whether it took the lock for an election.
func statusIn(t *testing.T, l *sleeplock.Locks, name string) (election.Status, bool) {
	t.Helper()
	states, err := l.List(ctx(t))
	must(t, err)
	i := slices.IndexFunc(states, func(st store.State) bool { return st.Name == name })
	if i < 0 {
		t.Fatalf("List has no %q", name)
	}
	return election.StatusOf(states[i])
}

// A lock's state (List) shows its election: the leader's ID, value, token
// and start, and the candidates waiting; a plain lock of one slot is no
// election, held or not.
var _ = add("Election/StatusOf", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	el := newElection(t, l, "status")
	term := campaign(t, el, "host-a", "10.0.0.1:80")
	waiter := goCampaign(ctx(t), el, "host-b")
	waitFor(t, "host-b to queue", func() bool {
		st, err := l.State(ctx(t), "status")
		return err == nil && st.Waiting == 1
	})
	s, ok := statusIn(t, l, "status")
	if !ok || !s.Leading {
		t.Fatalf("StatusOf = %+v, %v; want host-a leading", s, ok)
	}
	if got := s.Leader; got.ID != "host-a" || got.Value != "10.0.0.1:80" || got.Token != term.Token() || got.Waiting != 1 {
		t.Fatalf("StatusOf leader %+v; want host-a, 10.0.0.1:80, token %d, 1 waiting", got, term.Token())
	}
	if since := term.Since(); !since.IsZero() && !s.Leader.Since.Equal(since) {
		t.Fatalf("StatusOf since %v; the term began %v", s.Leader.Since, since)
	}
	must(t, term.Resign(ctx(t)))
	next := <-waiter
	must(t, next.err)
	if s, ok = statusIn(t, l, "status"); !ok || s.Leader.ID != "host-b" || s.Leader.Token != next.term.Token() || s.Leader.Waiting != 0 {
		t.Fatalf("StatusOf after the hand-over = %+v, %v; want host-b, token %d", s, ok, next.term.Token())
	}
	must(t, next.term.Resign(ctx(t)))
	if s, ok = statusIn(t, l, "status"); ok {
		t.Fatalf("StatusOf of a vacant election nobody campaigns in = %+v, true; want false (a free lock of one slot)", s)
	}

	define(t, l, "plain", 1)
	lease, err := l.Acquire(ctx(t), "plain", sleeplock.Ref("worker-1"))
	must(t, err)
	if s, ok = statusIn(t, l, "plain"); ok {
		t.Fatalf("StatusOf of a plain lock = %+v, true", s)
	}
	must(t, lease.Release(ctx(t)))
})
