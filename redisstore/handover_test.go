package redisstore_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/store"
)

// events is an Emitter that keeps what it is given.
type events struct {
	mu sync.Mutex
	es []store.Event
}

func (e *events) Emit(x store.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.es = append(e.es, x)
}

// only returns the one event e was given of type typ.
func (e *events) only(t *testing.T, typ store.EventType) store.Event {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []store.Event
	for _, x := range e.es {
		if x.Type == typ {
			out = append(out, x)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d %v events in %+v, want 1", len(out), typ, e.es)
	}
	return out[0]
}

// handOver is what a release that hands its lock to the head waiter
// leaves, its clock readings, tokens and sequence numbers zeroed once
// checked.
type handOver struct {
	released, acquired store.Event
	grant              store.Grant
	state              store.State
	stats              store.Stats
}

// TestHandOverFastAsGeneral: a release that hands its lock to the head
// waiter answers the same when the hold's own node releases it as when
// another node releases it by its handle (both take the one hand-over
// path, lua/common.lua's; lua/fast.lua hands nothing over): the events of the releaser and of the waiter granted, the
// grant, the lock's state and its counters. The next waiter, on the
// releaser's node, is then granted in its turn.
func TestHandOverFastAsGeneral(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	run := func(general bool) handOver {
		p := newPrefix(t, c)
		a, b := open(t, c, p), open(t, c, p)
		if _, err := a.Define(ctx, "f/x", 1, nil); err != nil {
			t.Fatal(err)
		}
		hold, err := a.Acquire(ctx, store.AcquireRequest{Name: "f/x", Ref: store.RefOf("holder"), Kind: "h", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			g   store.Grant
			err error
		}
		var ew events
		first, second := make(chan result, 1), make(chan result, 1)
		wait := func(s *redisstore.Store, ref string, ev store.Emitter, out chan<- result, waiting int) {
			go func() {
				g, err := s.Acquire(ctx, store.AcquireRequest{Name: "f/x", Ref: store.RefOf(ref), Kind: "w",
					TTL: time.Minute, Hold: 20 * time.Second, Wait: true, Events: ev})
				out <- result{g, err}
			}()
			waitUntil(t, "a waiter", func() bool {
				st, err := a.State(ctx, "f/x", false)
				return err == nil && st.Waiting == waiting
			})
		}
		wait(b, "first", &ew, first, 1)
		wait(a, "second", nil, second, 2)
		var er events
		releaser := a
		if general {
			releaser = b
		}
		if err := releaser.Release(ctx, hold.Handle(), &er); err != nil {
			t.Fatal(err)
		}
		r := <-first
		if r.err != nil {
			t.Fatal(r.err)
		}
		var out handOver
		out.released, out.acquired, out.grant = er.only(t, store.EventReleased), ew.only(t, store.EventAcquired), r.g
		if out.released.Token != hold.Token || out.acquired.Token != r.g.Token || r.g.Token <= hold.Token ||
			out.released.Seq >= uint64(r.g.Token) || out.acquired.Seq <= uint64(r.g.Token) {
			t.Fatalf("hold %d, released %+v, granted %d, acquired %+v", hold.Token, out.released, r.g.Token, out.acquired)
		}
		if out.acquired.Waited <= 0 || out.grant.Expires.Sub(out.grant.Acquired) != 20*time.Second {
			t.Fatalf("acquired %+v, grant %+v", out.acquired, out.grant)
		}
		if out.state, err = a.State(ctx, "f/x", true); err != nil {
			t.Fatal(err)
		}
		stats, err := a.Stats(ctx)
		if err != nil || len(stats) != 1 {
			t.Fatalf("Stats = %+v, %v", stats, err)
		}
		out.stats = stats[0]
		if err := b.Release(ctx, r.g.Handle(), nil); err != nil {
			t.Fatal(err)
		}
		if r = <-second; r.err != nil {
			t.Fatal(r.err)
		}
		for _, e := range []*store.Event{&out.released, &out.acquired} {
			e.Time, e.Token, e.Seq, e.Waited, e.Held = time.Time{}, 0, 0, 0, 0
		}
		out.grant.Token, out.grant.Acquired, out.grant.Expires = 0, time.Time{}, time.Time{}
		out.state.Now = time.Time{}
		for i := range out.state.Holders {
			h := &out.state.Holders[i]
			h.Token, h.Acquired, h.Renewed, h.Expires = 0, time.Time{}, time.Time{}, time.Time{}
		}
		for i := range out.state.Queue {
			out.state.Queue[i].Since = time.Time{}
		}
		for _, h := range []*store.Histogram{&out.stats.Waits, &out.stats.Holds} {
			var n uint64
			for _, x := range h.Buckets {
				n += x
			}
			if n != h.Count || h.Count == 0 || h.Sum <= 0 {
				t.Fatalf("histogram %+v: %d in its buckets", h, n)
			}
			h.Buckets, h.Sum = [store.HistogramBuckets]uint64{}, 0
		}
		return out
	}
	fast, general := run(false), run(true)
	if !reflect.DeepEqual(fast, general) {
		t.Fatalf("through lua/fast.lua:\n%+v\nthrough the general path:\n%+v", fast, general)
	}
	if fast.stats.Acquisitions != 2 || fast.stats.Waits.Count != 2 || fast.stats.Releases != 1 || fast.stats.Losses != 0 {
		t.Fatalf("stats %+v", fast.stats)
	}
}
