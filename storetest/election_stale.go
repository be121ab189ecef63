package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/store"
)

// staleStore is a store that holds back one announcement, the one made
// with heldKey in its context (an old leader's Resign), until the test lets
// it go, and that can make the reads of observers (made with an
// *observerProbe in their context) fail, so that nothing but the
// announcements can change what an observer says.
type staleStore struct {
	store.Store
	gate    chan struct{} // closed: a read made with heldKey may proceed
	held    chan struct{} // closed: the held announcement waits for release
	release chan struct{} // closed: it is sent
	fail    atomic.Bool   // observers' reads fail
}

type heldKey struct{}

// observerProbe counts an observer's reads, and signals each one.
type observerProbe struct {
	reads atomic.Int64
	read  chan struct{}
}

type probeKey struct{}

func (s *staleStore) State(ctx context.Context, name string, detail bool) (store.State, error) {
	if ctx.Value(heldKey{}) != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return store.State{}, ctx.Err()
		}
	}
	if p, ok := ctx.Value(probeKey{}).(*observerProbe); ok && s.fail.Load() {
		p.reads.Add(1)
		select {
		case p.read <- struct{}{}:
		default:
		}
		return store.State{}, errors.New("observers' reads fail (test)")
	}
	return s.Store.State(ctx, name, detail)
}

func (s *staleStore) Relabel(ctx context.Context, h store.Handle, kind string) error {
	return s.Store.(store.Relabeler).Relabel(ctx, h, kind)
}

func (s *staleStore) Announce(ctx context.Context, name, msg string) error {
	if ctx.Value(heldKey{}) != nil {
		close(s.held)
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.(store.Announcer).Announce(ctx, name, msg)
}

func (s *staleStore) Listen(name string, f func(string)) func() {
	return s.Store.(store.Announcer).Listen(name, f)
}

// staleObserver is one Observe call of the case, with its probe.
type staleObserver struct {
	name   string
	events <-chan election.Event
	probe  *observerProbe
	last   election.Event
	token  int64
}

func observeProbed(ctx context.Context, el *election.Election, name string) *staleObserver {
	p := &observerProbe{read: make(chan struct{}, 1)}
	return &staleObserver{name: name, events: el.Observe(context.WithValue(ctx, probeKey{}, p)), probe: p}
}

// An announcement made from an older state never ends an observer on it:
// A leads, B waits; A resigns, and its announcement (made from its read
// after the release: B leads) is held back while B resigns and observers
// see the vacancy, one that learned of it from B's announcement and one
// that started after it and read it. Then A's announcement arrives; the
// observers' reads fail from then on, so nothing else can put them right.
// Each observer's last event must still be the vacancy, as Leader says
// (issue 38: the last event stayed elected/B, Leader said ErrNoLeader).
var _ = add("Election/ObserveNeverEndsStale", func(t *testing.T, e *env) {
	s := &staleStore{Store: e.h.New(t), gate: make(chan struct{}), held: make(chan struct{}), release: make(chan struct{})}
	l := sleeplock.New(s)
	t.Cleanup(func() { _ = l.Close() })
	const name = "stale"
	el := newElection(t, l, name)
	octx, stop := context.WithCancel(ctx(t))
	defer stop()
	early := observeProbed(octx, el, "the observer of every change")
	observed(t, early.events, &early.token, election.Event{Type: election.Vacant})

	a := campaign(t, el, "a", "")
	observed(t, early.events, &early.token, election.Event{Type: election.Elected, Token: a.Token(), Leader: election.Leader{ID: "a"}})
	b := goCampaign(ctx(t), el, "b")
	waitWaiting(t, l, name, 1)
	resigned := make(chan error, 1)
	go func() { resigned <- a.Resign(context.WithValue(ctx(t), heldKey{}, true)) }()
	r := <-b
	must(t, r.err)
	observed(t, early.events, &early.token, election.Event{Type: election.Elected, Token: r.term.Token(), Leader: election.Leader{ID: "b"}})
	close(s.gate) // A reads the election now: B leads
	select {
	case <-s.held:
	case err := <-resigned:
		t.Fatalf("A's Resign returned (%v) without announcing", err)
	}
	must(t, r.term.Resign(ctx(t)))
	observed(t, early.events, &early.token, election.Event{Type: election.Vacant, Token: r.term.Token()})
	early.last = election.Event{Type: election.Vacant, Token: r.term.Token()}
	late := observeProbed(octx, el, "an observer that started on the vacancy")
	observed(t, late.events, &late.token, election.Event{Type: election.Vacant})
	late.last = election.Event{Type: election.Vacant}
	wantVacant(t, el)

	s.fail.Store(true)
	close(s.release)
	must(t, <-resigned)
	// After A's announcement, every observer reads: an empty announcement
	// says "read" on a store that carries messages, and a change of
	// another lock does on one that reports its changes (SQLite). Those
	// reads fail, and each observer retries, taking its events meanwhile.
	must(t, s.Store.(store.Announcer).Announce(ctx(t), name, ""))
	define(t, l, "stale-barrier", 1)
	obs := []*staleObserver{early, late}
	from := make([]int64, len(obs))
	for i, o := range obs {
		from[i] = o.probe.reads.Load()
	}
	settled := func() bool {
		for i, o := range obs {
			// Two reads after this point: a retry whose wait began while
			// this loop was taking events, so an event pending then was
			// taken.
			if o.probe.reads.Load() < from[i]+2 {
				return false
			}
		}
		return true
	}
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for !settled() {
		select {
		case ev := <-early.events:
			early.last = ev
		case ev := <-late.events:
			late.last = ev
		case <-early.probe.read:
		case <-late.probe.read:
		case <-timeout.C:
			t.Fatal("the observers made no reads after A's announcement")
		}
	}
	wantVacant(t, el)
	for _, o := range obs {
		if o.last.Type != election.Vacant {
			t.Errorf("%s ended on %v %s token %d; Leader says ErrNoLeader (vacant after token %d)",
				o.name, o.last.Type, o.last.Leader.ID, o.last.Token, r.term.Token())
		}
	}
	stop()
	var wg sync.WaitGroup
	for _, o := range obs {
		wg.Go(func() {
			for range o.events { // drained, then closed
			}
		})
	}
	wg.Wait()
})
