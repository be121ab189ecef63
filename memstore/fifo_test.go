package memstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/internal/plain"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// Strict FIFO under contention, judged at the store's own serialisation
// point rather than by the caller's clock: a sampler snapshots the queue
// (State, under the lock's mutex) again and again while 48 goroutines
// acquire and release a two-slot lock, some with contexts that end while
// they wait, some only trying; half of them through the plain path, half
// with a ref of their own (a plain waiter is listed under a provisional
// ref, its lease's ref being its token's, so only the others can be found
// in a snapshot; every caller's token is checked against them). Then
//   - the waiters of one snapshot that were granted got rising tokens in
//     their queue order (nobody queued is passed by one behind it), and
//   - a caller that arrived after a snapshot was taken got a higher token
//     than every waiter of that snapshot that was granted (no newcomer,
//     waiting or trying, is granted ahead of a queued waiter).
//
// The goroutines release as soon as they are granted, so slots are handed
// on from releaser to waiter all the time, racing arrivals and cancels.
func TestStressFIFOAtTheLock(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Define(ctx, "q", 2, nil); err != nil {
		t.Fatal(err)
	}
	type op struct {
		ref   string
		token int64
		gen   int64 // snapshots taken before the call
	}
	type snapshot struct{ queue []string }
	var (
		gen   atomic.Int64
		stop  atomic.Bool
		mu    sync.Mutex
		ops   []op
		snaps []snapshot
		wg    sync.WaitGroup
	)
	for g := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			var mine []op
			for !stop.Load() {
				wctx, cancel := ctx, context.CancelFunc(func() {})
				if g%4 == 1 {
					wctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(40))*time.Microsecond)
				}
				at := gen.Load()
				var token int64
				var ref store.Ref
				var release func() error
				var err error
				if g%2 == 0 {
					var slot plain.Lock
					slot, token, err = s.Plain().Acquire(wctx, "q", g%8 != 6)
					if err == nil {
						ref, release = slot.Ref(token), func() error { return slot.Release(token) }
					}
				} else {
					var gr store.Grant
					gr, err = s.Acquire(wctx, store.AcquireRequest{Name: "q", Ref: store.NewRef(), Wait: g%8 != 7})
					token, ref, release = gr.Token, gr.Ref, func() error { return s.Release(ctx, gr.Handle(), nil) }
				}
				cancel()
				if err != nil {
					if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
						return
					}
					continue
				}
				mine = append(mine, op{ref.String(), token, at})
				if err := release(); err != nil {
					t.Error(err)
					return
				}
			}
			mu.Lock()
			ops = append(ops, mine...)
			mu.Unlock()
		}()
	}
	deadline := time.Now().Add(stressTime)
	for time.Now().Before(deadline) {
		st, err := s.State(ctx, "q", true)
		if err != nil {
			t.Fatal(err)
		}
		q := make([]string, len(st.Queue))
		for i, w := range st.Queue {
			q[i] = w.Ref
		}
		snaps = append(snaps, snapshot{q})
		// A caller that reads gen after this arrived after the snapshot.
		gen.Add(1)
		time.Sleep(20 * time.Microsecond) // pacing only: let the traffic run
	}
	stop.Store(true)
	wg.Wait()

	tokens := make(map[string]int64, len(ops))
	for _, o := range ops {
		tokens[o.ref] = o.token
	}
	// last[k]: the highest token granted to a waiter of snapshots 0..k.
	last := make([]int64, len(snaps))
	queued, checked := 0, 0
	for k, sn := range snaps {
		var prev int64
		if k > 0 {
			last[k] = last[k-1]
		}
		for i, ref := range sn.queue {
			tok, ok := tokens[ref]
			if !ok {
				continue // it gave up
			}
			queued++
			if tok <= prev {
				t.Fatalf("snapshot %d: waiter %d (%s) got token %d after one behind it got %d", k, i, ref, tok, prev)
			}
			prev = tok
			last[k] = max(last[k], tok)
		}
	}
	slices.SortFunc(ops, func(a, b op) int { return int(a.gen - b.gen) })
	for _, o := range ops {
		if o.gen == 0 {
			continue
		}
		checked++
		if lim := last[o.gen-1]; o.token <= lim {
			t.Fatalf("%s arrived after snapshot %d and got token %d, ahead of a waiter of it (token %d)", o.ref, o.gen-1, o.token, lim)
		}
	}
	t.Logf("%d grants, %d snapshots, %d queued waiters seen granted, %d arrivals checked", len(ops), len(snaps), queued, checked)
	if queued == 0 || checked == 0 {
		t.Fatal("the test saw no queue: it proved nothing")
	}
}
