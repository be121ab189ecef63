package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/store"
)

// The election's cases (package election, issue 31): each guarantee of an
// election, on the store under test. A store passes them with
// store.Relabeler (Proclaim) and store.Announcer (Observe).

// newElection returns the election name on l, with a TTL long enough that
// nothing in a case waits for it unless the case says so.
func newElection(t *testing.T, l *sleeplock.Locks, name string, opts ...election.Option) *election.Election {
	t.Helper()
	el, err := election.New(l, name, append([]election.Option{election.WithTTL(time.Hour)}, opts...)...)
	must(t, err)
	return el
}

func campaign(t *testing.T, el *election.Election, id, value string) *election.Term {
	t.Helper()
	term, err := el.Campaign(ctx(t), election.Candidate{ID: id, Value: value})
	must(t, err)
	return term
}

// goCampaign starts a Campaign; its term (or error) arrives on the channel.
func goCampaign(ctx context.Context, el *election.Election, id string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		term, err := el.Campaign(ctx, election.Candidate{ID: id})
		ch <- campaignResult{term, err}
	}()
	return ch
}

type campaignResult struct {
	term *election.Term
	err  error
}

func wantLeader(t *testing.T, el *election.Election, id, value string, token int64) {
	t.Helper()
	l, err := el.Leader(ctx(t))
	must(t, err)
	if l.ID != id || l.Value != value || l.Token != token {
		t.Fatalf("leader %s %q token %d; want %s %q token %d", l.ID, l.Value, l.Token, id, value, token)
	}
}

func wantVacant(t *testing.T, el *election.Election) {
	t.Helper()
	if l, err := el.Leader(ctx(t)); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader = %+v, %v; want ErrNoLeader", l, err)
	}
}

// Bad input is a typed error that names the problem, and changes nothing.
var _ = add("Election/BadInput", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	if _, err := election.New(l, ""); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("New with an empty name: %v, want ErrInvalidName", err)
	}
	if _, err := election.New(l, "bad/*"); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("New with a family pattern: %v, want ErrInvalidName", err)
	}
	if _, err := election.New(l, "e", election.WithTTL(0)); !errors.Is(err, sleeplock.ErrInvalidTTL) {
		t.Fatalf("New with a TTL of 0: %v, want ErrInvalidTTL", err)
	}
	el := newElection(t, l, "bad-input")
	for _, c := range []election.Candidate{
		{ID: ""},
		{ID: strings.Repeat("i", election.MaxIDBytes+1)},
		{ID: "a\nb"},
		{ID: "ok", Value: strings.Repeat("v", election.MaxValueBytes+1)},
		{ID: "ok", Value: "tab\there"},
		{ID: "ok", Value: "\xff"},
	} {
		_, err := el.Campaign(ctx(t), c)
		var inv *sleeplock.InvalidError
		if !errors.As(err, &inv) || !errors.Is(err, election.ErrInvalidCandidate) || !errors.Is(err, sleeplock.ErrInvalid) {
			t.Fatalf("Campaign(%+q): %v, want an *InvalidError matching ErrInvalidCandidate", c, err)
		}
	}
	if err := el.Run(ctx(t), election.Candidate{ID: "ok"}, nil); !errors.Is(err, sleeplock.ErrInvalid) {
		t.Fatalf("Run with a nil function: %v, want ErrInvalid", err)
	}
	if _, err := l.State(ctx(t), "bad-input"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("a refused campaign defined the election's lock: %v", err)
	}
	term := campaign(t, el, "a", "v")
	if err := term.Proclaim(ctx(t), strings.Repeat("v", election.MaxValueBytes+1)); !errors.Is(err, election.ErrInvalidCandidate) {
		t.Fatalf("Proclaim of a long value: %v, want ErrInvalidCandidate", err)
	}
	wantLeader(t, el, "a", "v", term.Token())
	define(t, l, "taken", 2)
	if _, err := newElection(t, l, "taken").Campaign(ctx(t), election.Candidate{ID: "a"}); !errors.Is(err, sleeplock.ErrAlreadyDefined) {
		t.Fatalf("an election on a lock of 2 slots: %v, want ErrAlreadyDefined", err)
	}
})

// Leader reports the leader with its ID, value and token; Proclaim changes
// the value in the same term; Resign leaves the election vacant and is
// idempotent; an ended term refuses Proclaim.
var _ = add("Election/LeaderProclaimResign", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	el := newElection(t, l, "lead")
	wantVacant(t, el)
	term := campaign(t, el, "host-a", "10.0.0.1:80")
	if term.ID() != "host-a" || term.Value() != "10.0.0.1:80" || term.Token() <= 0 {
		t.Fatalf("term %s %q token %d", term.ID(), term.Value(), term.Token())
	}
	wantLeader(t, el, "host-a", "10.0.0.1:80", term.Token())
	must(t, term.Proclaim(ctx(t), "10.0.0.1:81"))
	wantLeader(t, el, "host-a", "10.0.0.1:81", term.Token())
	if term.Err() != nil {
		t.Fatalf("a leading term's Err: %v", term.Err())
	}
	must(t, term.Resign(ctx(t)))
	must(t, term.Resign(ctx(t)))
	<-term.Done()
	if !errors.Is(term.Err(), sleeplock.ErrReleased) {
		t.Fatalf("Err after Resign: %v, want ErrReleased", term.Err())
	}
	if err := term.Proclaim(ctx(t), "x"); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim after Resign: %v, want ErrNotLeader", err)
	}
	wantVacant(t, el)
	next := campaign(t, el, "host-b", "")
	if next.Token() <= term.Token() {
		t.Fatalf("token %d after %d: tokens must grow", next.Token(), term.Token())
	}
	wantLeader(t, el, "host-b", "", next.Token())
})

// Campaigns queue in FIFO order, and Resign hands leadership to the next
// candidate at once: the TTL is an hour, so a hand-over that waited for it
// would never come.
var _ = add("Election/FIFOHandOver", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	el := newElection(t, l, "fifo")
	first := campaign(t, el, "c0", "")
	var waiting []<-chan campaignResult
	for i := 1; i <= 3; i++ {
		waiting = append(waiting, goCampaign(ctx(t), el, fmt.Sprintf("c%d", i)))
		waitWaiting(t, l, "fifo", i)
	}
	prev := first
	for i, ch := range waiting {
		must(t, prev.Resign(ctx(t)))
		r := <-ch
		must(t, r.err)
		if want := fmt.Sprintf("c%d", i+1); r.term.ID() != want {
			t.Fatalf("leader %s after %s resigned, want %s (FIFO)", r.term.ID(), prev.ID(), want)
		}
		if r.term.Token() <= prev.Token() {
			t.Fatalf("token %d after %d", r.term.Token(), prev.Token())
		}
		wantLeader(t, el, r.term.ID(), "", r.term.Token())
		prev = r.term
	}
	must(t, prev.Resign(ctx(t)))
})

// A campaign whose context ends leaves the queue and is never granted
// afterwards: the leader's resignation goes to the next live candidate, or
// leaves the election vacant.
var _ = add("Election/CancelledCampaignLeavesQueue", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	el := newElection(t, l, "cancel")
	leader := campaign(t, el, "a", "")
	cctx, cancel := context.WithCancel(ctx(t))
	b := goCampaign(cctx, el, "b")
	waitWaiting(t, l, "cancel", 1)
	c := goCampaign(ctx(t), el, "c")
	waitWaiting(t, l, "cancel", 2)
	cancel()
	if r := <-b; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a cancelled campaign: %v, want context.Canceled", r.err)
	}
	waitWaiting(t, l, "cancel", 1)
	must(t, leader.Resign(ctx(t)))
	r := <-c
	must(t, r.err)
	if r.term.ID() != "c" {
		t.Fatalf("leader %s, want c (b gave up)", r.term.ID())
	}
	cctx2, cancel2 := context.WithCancel(ctx(t))
	d := goCampaign(cctx2, el, "d")
	waitWaiting(t, l, "cancel", 1)
	cancel2()
	if r := <-d; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a cancelled campaign: %v, want context.Canceled", r.err)
	}
	must(t, r.term.Resign(ctx(t)))
	wantVacant(t, el)
	wantState(t, l, "cancel", 0, 0)
})

// At most one term is current at any time, and tokens grow from term to
// term: candidates on two Locks (two nodes where the store is shared)
// campaign, lead briefly and resign, over and over.
var _ = add("Election/OneLeaderTokensGrow", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	nodes := []*sleeplock.Locks{l}
	if e.h.Reopen != nil {
		other := sleeplock.New(e.h.Reopen(t, s))
		t.Cleanup(func() { _ = other.Close() })
		nodes = append(nodes, other)
	}
	const candidates, terms = 3, 3
	var current atomic.Int32
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for c := range candidates {
		el := newElection(t, nodes[c%len(nodes)], "one")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range terms {
				term, err := el.Campaign(ctx(t), election.Candidate{ID: fmt.Sprintf("c%d", c)})
				if err != nil {
					t.Error(err)
					return
				}
				if n := current.Add(1); n != 1 {
					t.Errorf("%d terms current at once", n)
				}
				mu.Lock()
				tokens = append(tokens, term.Token())
				mu.Unlock()
				current.Add(-1)
				if err := term.Resign(ctx(t)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("term %d has token %d after %d: tokens must grow (%v)", i, tokens[i], tokens[i-1], tokens)
		}
	}
})

// Run calls fn while the candidate leads, cancels fn's context when the
// term ends, resigns only after fn has returned (the next leader starts
// after the work ended), campaigns again after fn returns, and returns
// when its context ends.
var _ = add("Election/RunEndsWorkBeforeResign", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	el := newElection(t, l, "run")
	terms := make(chan *election.Term)
	release := make(chan struct{})
	var workEnded atomic.Bool
	rctx, stop := context.WithCancel(ctx(t))
	runErr := make(chan error, 1)
	round := 0
	go func() {
		runErr <- el.Run(rctx, election.Candidate{ID: "worker"}, func(ctx context.Context, term *election.Term) error {
			round++
			terms <- term
			if round == 1 {
				<-ctx.Done() // ended by the test's Resign below
				if !errors.Is(context.Cause(ctx), sleeplock.ErrReleased) {
					t.Errorf("fn's context ended with %v, want ErrReleased", context.Cause(ctx))
				}
				return nil
			}
			<-release // ignores its context until the test lets it go
			workEnded.Store(true)
			return errors.New("work failed after its term ended")
		})
	}()
	first := <-terms
	must(t, first.Resign(ctx(t)))
	second := <-terms // Run campaigned again
	if second.Token() <= first.Token() {
		t.Fatalf("token %d after %d", second.Token(), first.Token())
	}
	next := goCampaign(ctx(t), el, "next")
	waitWaiting(t, l, "run", 1)
	stop() // fn's context ends; fn keeps working until released
	select {
	case r := <-next:
		t.Fatalf("the next candidate led (%v) while fn still worked", r.err)
	default:
	}
	close(release)
	r := <-next
	must(t, r.err)
	if !workEnded.Load() {
		t.Fatal("the next candidate led before fn returned")
	}
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	wantLeader(t, el, "next", "", r.term.Token())
	must(t, r.term.Resign(ctx(t)))
})

// observed reads events until one matches want, checking that tokens never
// go down; it fails after 20 s.
func observed(t *testing.T, events <-chan election.Event, last *int64, want election.Event) {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("events closed while waiting for %v", want)
			}
			if ev.Token < *last {
				t.Fatalf("event %v token %d after %d: tokens never go down", ev.Type, ev.Token, *last)
			}
			*last = ev.Token
			if ev.Type == want.Type && ev.Token == want.Token && ev.Leader.ID == want.Leader.ID && ev.Leader.Value == want.Leader.Value {
				return
			}
		case <-timeout.C:
			t.Fatalf("no event %v %s %q token %d", want.Type, want.Leader.ID, want.Leader.Value, want.Token)
		}
	}
}

// Observe starts with the current state and reports every change: a new
// term, a new value, a vacancy; on this store and, where the store is
// shared, on another node's. Its channel closes when its context ends.
var _ = add("Election/Observe", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	el := newElection(t, l, "obs")
	els := []*election.Election{el}
	if e.h.Reopen != nil {
		other := sleeplock.New(e.h.Reopen(t, s))
		t.Cleanup(func() { _ = other.Close() })
		els = append(els, newElection(t, other, "obs"))
	}
	octx, stop := context.WithCancel(ctx(t))
	streams := make([]<-chan election.Event, len(els))
	lasts := make([]int64, len(els))
	for i, x := range els {
		streams[i] = x.Observe(octx)
	}
	step := func(want election.Event) {
		t.Helper()
		for i := range streams {
			observed(t, streams[i], &lasts[i], want)
		}
	}
	step(election.Event{Type: election.Vacant})
	a := campaign(t, el, "a", "one")
	step(election.Event{Type: election.Elected, Token: a.Token(), Leader: election.Leader{ID: "a", Value: "one"}})
	must(t, a.Proclaim(ctx(t), "two"))
	step(election.Event{Type: election.Changed, Token: a.Token(), Leader: election.Leader{ID: "a", Value: "two"}})
	b := goCampaign(ctx(t), els[len(els)-1], "b")
	waitWaiting(t, l, "obs", 1)
	must(t, a.Resign(ctx(t)))
	r := <-b
	must(t, r.err)
	step(election.Event{Type: election.Elected, Token: r.term.Token(), Leader: election.Leader{ID: "b"}})
	must(t, r.term.Resign(ctx(t)))
	step(election.Event{Type: election.Vacant, Token: r.term.Token()})
	// A late observer starts with the current state.
	late := el.Observe(octx)
	var lastLate int64
	observed(t, late, &lastLate, election.Event{Type: election.Vacant})
	stop()
	for _, ch := range append(streams, late) {
		for range ch { // drained, then closed
		}
	}
})

// keepFails is a store whose renewals can be made to fail, as when the
// store cannot be reached, and that records when the last renewal that
// succeeded was sent.
type keepFails struct {
	store.Store
	fail     atomic.Bool
	mu       sync.Mutex
	lastSent time.Time
}

func (k *keepFails) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	if k.fail.Load() {
		return time.Time{}, errors.New("renewals fail (test)")
	}
	sent := time.Now()
	exp, err := k.Store.Keep(ctx, h, ttl, hold)
	if err == nil {
		k.mu.Lock()
		k.lastSent = sent
		k.mu.Unlock()
	}
	return exp, err
}

func (k *keepFails) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	sent := time.Now()
	g, err := k.Store.Acquire(ctx, req)
	if err == nil && strings.HasPrefix(req.Ref.String(), "leader#") {
		k.mu.Lock()
		k.lastSent = sent
		k.mu.Unlock()
	}
	return g, err
}

func (k *keepFails) Relabel(ctx context.Context, h store.Handle, kind string) error {
	return k.Store.(store.Relabeler).Relabel(ctx, h, kind)
}

func (k *keepFails) Announce(ctx context.Context, name, msg string) error {
	return k.Store.(store.Announcer).Announce(ctx, name, msg)
}

func (k *keepFails) Listen(name string, f func(string)) func() {
	return k.Store.(store.Announcer).Listen(name, f)
}

// A leader that cannot renew knows it no longer leads no later than the
// store could elect another: its Done closes (with ErrLeaseLost) at its
// local deadline, its last renewal's sending time plus the TTL, and the
// next candidate is granted no earlier than that deadline; an observer
// sees the new term. The case takes one TTL of real time.
var _ = add("Election/LeaderKnowsItStopsLeading", func(t *testing.T, e *env) {
	const ttl = 600 * time.Millisecond
	inner := e.h.New(t)
	k := &keepFails{Store: inner}
	l := sleeplock.New(k)
	t.Cleanup(func() { _ = l.Close() })
	el := newElection(t, l, "knows", election.WithTTL(ttl))
	events := el.Observe(ctx(t))
	var last int64
	observed(t, events, &last, election.Event{Type: election.Vacant})
	leader := campaign(t, el, "leader", "")
	observed(t, events, &last, election.Event{Type: election.Elected, Token: leader.Token(), Leader: election.Leader{ID: "leader"}})
	next := goCampaign(ctx(t), el, "next")
	waitWaiting(t, l, "knows", 1)
	k.fail.Store(true)
	<-leader.Done()
	if !errors.Is(leader.Err(), sleeplock.ErrLeaseLost) {
		t.Fatalf("the old term ended with %v, want ErrLeaseLost", leader.Err())
	}
	// On a store whose clock is real, the next candidate may lead by now;
	// on a fake clock, once the store's clock passes the lease's expiry.
	e.advance(t, inner, ttl)
	r := <-next
	granted := time.Now()
	must(t, r.err)
	k.mu.Lock()
	deadline := k.lastSent.Add(ttl)
	k.mu.Unlock()
	if granted.Before(deadline) {
		t.Fatalf("the next candidate led %v before the leader's deadline", deadline.Sub(granted))
	}
	if err := leader.Resign(ctx(t)); err != nil {
		t.Fatalf("Resign of a lost term: %v, want nil", err)
	}
	k.fail.Store(false)
	// On a store whose clock is real, the Advance above may have aged the
	// new term's lease too: a renewal revives it.
	must(t, r.term.Lease().Keep(ctx(t)))
	observed(t, events, &last, election.Event{Type: election.Elected, Token: r.term.Token(), Leader: election.Leader{ID: "next"}})
	wantLeader(t, el, "next", "", r.term.Token())
	must(t, r.term.Resign(ctx(t)))
})

// Relabel (store.Relabeler) changes the kind of one hold in place, wherever
// the store keeps it, and nothing else: the other holders of the lock, the
// token and the times stay; a hold that is not there is ErrNotHeld and a
// name no definition covers ErrNotFound.
var _ = add("Election/Relabel", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	r, ok := s.(store.Relabeler)
	if !ok {
		t.Fatal("the store does not implement store.Relabeler (election's Proclaim)")
	}
	define(t, l, "relabel", 3)
	var leases []sleeplock.Lease
	for i := range 3 {
		lease, err := l.Acquire(ctx(t), "relabel", sleeplock.Ref(fmt.Sprintf("r%d", i)), sleeplock.Kind("old"))
		must(t, err)
		leases = append(leases, lease)
	}
	h := store.Handle{Lock: store.Lock{Name: "relabel", Token: leases[1].Token()}, Ref: store.RefOf("r1")}
	must(t, r.Relabel(ctx(t), h, "new"))
	st := state(t, l, "relabel")
	for _, hd := range st.Holders {
		want := "old"
		if hd.Ref == "r1" {
			want = "new"
		}
		if hd.Kind != want {
			t.Fatalf("holder %s has kind %q, want %q", hd.Ref, hd.Kind, want)
		}
	}
	wrong := h
	wrong.Token++
	if err := r.Relabel(ctx(t), wrong, "x"); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("Relabel with another token: %v, want ErrNotHeld", err)
	}
	missing := store.Handle{Lock: store.Lock{Name: "nowhere"}, Ref: store.RefOf("r1")}
	if err := r.Relabel(ctx(t), missing, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Relabel of an undefined lock: %v, want ErrNotFound", err)
	}
	must(t, leases[0].Release(ctx(t)))
	if err := r.Relabel(ctx(t), store.Handle{Lock: store.Lock{Name: "relabel"}, Ref: store.RefOf("r0")}, "x"); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("Relabel of a released hold: %v, want ErrNotHeld", err)
	}
	must(t, r.Relabel(ctx(t), store.Handle{Lock: store.Lock{Name: "relabel"}, Ref: store.RefOf("r2")}, "any token"))
	if st := state(t, l, "relabel"); len(st.Holders) != 2 || st.Holders[1].Kind != "any token" || st.Holders[1].Token != leases[2].Token() {
		t.Fatalf("holders after relabelling r2: %+v", st.Holders)
	}
})
