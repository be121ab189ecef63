package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
)

// notes is a Notifier that hands its events to the test.
type notes chan sleeplock.Event

func (n notes) Notify(e sleeplock.Event) { n <- e }

// await returns the next event of type typ, skipping the others.
func (n notes) await(t *testing.T, typ sleeplock.EventType) sleeplock.Event {
	t.Helper()
	for {
		select {
		case e := <-n:
			if e.Type == typ {
				return e
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v event in 10 s", typ)
		}
	}
}

// polled matches an event of another process that the poll derived.
func polled(typ, ref string, check func(eventView) bool) func(sse) bool {
	return func(m sse) bool {
		var v eventView
		return m.event == "event" && json.Unmarshal([]byte(m.data), &v) == nil && v.Seen == "poll" &&
			v.Type == typ && v.Ref == ref && (check == nil || check(v))
	}
}

// TestOthersEvents: the grants, waits and ended holds of another process
// sharing the store (another Locks on the same store, whose events never
// reach this hub) reach the stream as events derived by the poll, with the
// waits the store timed; holds shorter than the poll are counted in a
// "missed" message from the store's counters, under their family; this
// process's own events are not told twice.
func TestOthersEvents(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	e := newEnvOn(t, st, Config{Poll: time.Hour}) // polls are the test's (pollOnce)
	seen := make(notes, 100)
	other := sleeplock.New(st, sleeplock.WithNotifier(seen))
	defer other.Close()
	must(t, other.Define(ctx, "pay", 1))
	must(t, other.Define(ctx, "chat/*", 1))
	s := e.stream(t, "")
	hello := s.next(t, func(m sse) bool { return m.event == "hello" })
	if !strings.Contains(hello.data, `"counters":true`) || !strings.Contains(hello.data, `"poll_ms":3600000`) {
		t.Fatalf("hello %s", hello.data)
	}

	a, err := other.Acquire(ctx, "pay", sleeplock.Ref("job-1"), sleeplock.Kind("batch"))
	must(t, err)
	e.srv.pollOnce(false)
	// Its wait comes from the counters: the one grant counted was seen.
	s.next(t, polled("acquired", "job-1", func(v eventView) bool {
		return v.Kind == "batch" && v.Lock == "pay" && v.Running == 1 && v.WaitedMS != nil && *v.WaitedMS == 0
	}))

	got := make(chan sleeplock.Lease, 1)
	go func() {
		b, err := other.Acquire(ctx, "pay", sleeplock.Ref("job-2"))
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	seen.await(t, sleeplock.EventWaiting)
	e.srv.pollOnce(false)
	s.next(t, polled("waiting", "job-2", func(v eventView) bool { return v.Waiting == 1 }))

	must(t, a.Release(ctx))
	granted := seen.await(t, sleeplock.EventAcquired)
	e.srv.pollOnce(false)
	s.next(t, polled("released", "job-1", func(v eventView) bool { return v.HeldMS != nil }))
	// Seen waiting, then holding: its wait is the store's, to the millisecond.
	s.next(t, polled("acquired", "job-2", func(v eventView) bool {
		return v.WaitedMS != nil && *v.WaitedMS == granted.Waited.Milliseconds()
	}))
	must(t, (<-got).Release(ctx)) // seen ended by the next poll

	// Holds no poll sees are counted, under the lock or its family.
	for _, name := range []string{"pay", "chat/7", "chat/8"} {
		l, err := other.Acquire(ctx, name)
		must(t, err)
		must(t, l.Release(ctx))
	}
	e.srv.pollOnce(false)
	s.next(t, polled("released", "job-2", nil))
	for _, want := range []missed{{Lock: "chat/*", Acquired: 2, Ended: 2}, {Lock: "pay", Acquired: 1, Ended: 1}} {
		m := s.next(t, func(m sse) bool { return m.event == "missed" })
		var v missed
		must(t, json.Unmarshal([]byte(m.data), &v))
		if v.Lock != want.Lock || v.Acquired != want.Acquired || v.Ended != want.Ended || v.WaitedMS != 0 {
			t.Fatalf("missed %s, want %+v", m.data, want)
		}
	}

	// This process's own grant comes once, live, not again from the poll.
	mine, err := e.locks.Acquire(ctx, "pay", sleeplock.Ref("mine"))
	must(t, err)
	s.next(t, func(m sse) bool {
		return m.event == "event" && strings.Contains(m.data, `"ref":"mine"`) && !strings.Contains(m.data, `"seen"`)
	})
	e.srv.pollOnce(false)
	must(t, mine.Release(ctx))
	s.next(t, func(m sse) bool {
		return m.event == "event" && strings.Contains(m.data, `"type":"released","lock":"pay"`)
	})
	l, err := other.Acquire(ctx, "chat/9", sleeplock.Ref("marker"))
	must(t, err)
	defer l.Release(ctx)
	e.srv.pollOnce(false)
	s.next(t, func(m sse) bool {
		if m.event == "event" && strings.Contains(m.data, `"ref":"mine"`) || m.event == "missed" {
			t.Fatalf("told again, or missed: %s %s", m.event, m.data)
		}
		return polled("acquired", "marker", nil)(m)
	})
}

// TestPollIdle: with no stream open the poll reads nothing, and the first
// stream's poll starts from what the store holds then (no event for what
// happened before it).
func TestPollIdle(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	e := newEnvOn(t, st, Config{Poll: time.Hour})
	other := sleeplock.New(st)
	defer other.Close()
	must(t, other.Define(ctx, "pay", 2))
	_, err := other.Acquire(ctx, "pay", sleeplock.Ref("before"))
	must(t, err)
	e.srv.pollOnce(false)
	e.srv.pollMu.Lock()
	primed := e.srv.watch.primed
	e.srv.pollMu.Unlock()
	if primed {
		t.Fatal("the poll read the store with no stream open")
	}
	s := e.stream(t, "")
	s.next(t, func(m sse) bool { return m.event == "hello" })
	_, err = other.Acquire(ctx, "pay", sleeplock.Ref("after"))
	must(t, err)
	e.srv.pollOnce(false)
	s.next(t, func(m sse) bool {
		if polled("acquired", "before", nil)(m) {
			t.Fatalf("a grant made before the stream told as new: %s", m.data)
		}
		return polled("acquired", "after", nil)(m)
	})
}
