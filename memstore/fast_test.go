package memstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/internal/plain"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// plainLease is a plain lease as package sleeplock keeps it.
type plainLease struct {
	slot  plain.Lock
	token int64
}

func acquirePlain(t *testing.T, s *memstore.Store, name string) plainLease {
	t.Helper()
	slot, token, err := s.Plain().Acquire(context.Background(), name, false)
	if err != nil {
		t.Fatalf("AcquirePlain(%s): %v", name, err)
	}
	return plainLease{slot, token}
}

func holdersOf(t *testing.T, s *memstore.Store, name string) map[int64]string {
	t.Helper()
	st, err := s.State(context.Background(), name, true)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for _, h := range st.Holders {
		out[h.Token] = h.Ref
	}
	if len(out) != st.Running {
		t.Fatalf("%d holders listed, Running %d", len(out), st.Running)
	}
	return out
}

// A plain lease's ref and token are the ones State lists, whether the
// lock keeps its holders on its fast word or in records, and tokens grow
// with every grant across both.
func TestPlainLeasesListedOnEitherPath(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Define(ctx, "p", 3, nil); err != nil {
		t.Fatal(err)
	}
	var last int64
	for round := range 50 {
		a := acquirePlain(t, s, "p")
		b := acquirePlain(t, s, "p")
		if a.token <= last || b.token <= a.token {
			t.Fatalf("round %d: tokens %d, %d after %d", round, a.token, b.token, last)
		}
		last = b.token
		if round%3 == 0 {
			// State freezes the lock: the holders become records.
			hs := holdersOf(t, s, "p")
			if hs[a.token] != a.slot.Ref(a.token).String() || hs[b.token] != b.slot.Ref(b.token).String() || len(hs) != 2 {
				t.Fatalf("round %d: State lists %v, leases %d=%s %d=%s", round, hs, a.token, a.slot.Ref(a.token), b.token, b.slot.Ref(b.token))
			}
		}
		if err := a.slot.Release(a.token); err != nil {
			t.Fatal(err)
		}
		if err := a.slot.Release(a.token); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("second release: %v", err)
		}
		if err := b.slot.Release(b.token); err != nil {
			t.Fatal(err)
		}
		if err := b.slot.Err(b.token); !errors.Is(err, store.ErrReleased) {
			t.Fatalf("Err after release: %v", err)
		}
	}
	if hs := holdersOf(t, s, "p"); len(hs) != 0 {
		t.Fatalf("holders left: %v", hs)
	}
}

// A holder that outlives the fast word's window (more grants than it
// tracks) keeps its slot, its ref and its token, and the lock keeps
// granting the other slots.
func TestPlainHolderOlderThanTheWindow(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Define(ctx, "w", 2, nil); err != nil {
		t.Fatal(err)
	}
	old := acquirePlain(t, s, "w")
	for range 100 {
		x := acquirePlain(t, s, "w")
		if err := x.slot.Release(x.token); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.slot.Err(old.token); err != nil {
		t.Fatalf("the old lease reports %v", err)
	}
	hs := holdersOf(t, s, "w")
	if len(hs) != 1 || hs[old.token] != old.slot.Ref(old.token).String() {
		t.Fatalf("State lists %v, want the old lease %d", hs, old.token)
	}
	// Full: a second holder, then a refusal.
	x := acquirePlain(t, s, "w")
	if _, _, err := s.Plain().Acquire(ctx, "w", false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("third try on 2 slots: %v", err)
	}
	for _, l := range []plainLease{old, x} {
		if err := l.slot.Release(l.token); err != nil {
			t.Fatal(err)
		}
	}
	if hs := holdersOf(t, s, "w"); len(hs) != 0 {
		t.Fatalf("holders left: %v", hs)
	}
}

// A plain lease released by another caller naming its ref ends with that
// cause, on the fast word or not, and its context (asked for before or
// after) says so, the same context on every call.
func TestPlainLeaseReleasedByRef(t *testing.T) {
	for _, askFirst := range []bool{false, true} {
		s := memstore.New()
		ctx := context.Background()
		if _, err := s.Define(ctx, "r", 3, nil); err != nil {
			t.Fatal(err)
		}
		x := acquirePlain(t, s, "r")
		var c context.Context
		if askFirst {
			c = x.slot.Context(x.token)
		}
		ref := store.RefOf(x.slot.Ref(x.token).String()) // the ref as an operator types it
		h := store.Handle{Lock: store.Lock{Name: "r"}, Ref: ref}
		if err := s.Release(ctx, h, nil); err != nil {
			t.Fatalf("release by ref: %v", err)
		}
		err := x.slot.Err(x.token)
		if err == nil || errors.Is(err, store.ErrReleased) {
			t.Fatalf("Err of a lease released by another: %v", err)
		}
		if c == nil {
			c = x.slot.Context(x.token)
		}
		if x.slot.Context(x.token) != c || !errors.Is(context.Cause(c), err) {
			t.Fatalf("context changed, or its cause %v is not Err %v", context.Cause(c), err)
		}
		if err := x.slot.Release(x.token); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("own release after: %v", err)
		}
		_ = s.Close()
	}
}

// A family member forgotten and made again gives its refs to no one twice:
// a new record may reuse the old one's range of refs, but its tokens start
// above the old record's.
func TestPlainRefsOfRemadeFamilyMember(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Define(ctx, "chat/*", 1, nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	for i := range 200 {
		name := "chat/" + strconv.Itoa(i%7)
		x := acquirePlain(t, s, name)
		ref := x.slot.Ref(x.token).String()
		if prev, dup := seen[ref]; dup {
			t.Fatalf("%s: ref %s given again (token %d, before %d)", name, ref, x.token, prev)
		}
		seen[ref] = x.token
		if err := x.slot.Release(x.token); err != nil {
			t.Fatal(err)
		}
		if st, _ := s.State(ctx, name, false); st.Running != 0 {
			t.Fatalf("%s running %d", name, st.Running)
		}
	}
}

// A lock with many slots indexes its holders by token: random releases of
// many plain leases all find their records.
func TestManyPlainHolders(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Define(ctx, "big", 500, nil); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var held []plainLease
	for range 3 {
		for len(held) < 500 {
			held = append(held, acquirePlain(t, s, "big"))
		}
		rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
		for len(held) > 40 {
			x := held[len(held)-1]
			held = held[:len(held)-1]
			if err := x.slot.Err(x.token); err != nil {
				t.Fatalf("held lease %d reports %v", x.token, err)
			}
			if err := x.slot.Release(x.token); err != nil {
				t.Fatalf("release %d: %v", x.token, err)
			}
		}
		if hs := holdersOf(t, s, "big"); len(hs) != len(held) {
			t.Fatalf("%d listed, %d held", len(hs), len(held))
		}
	}
}

// Plain grants and releases on the fast word race with operations that
// freeze the lock (State, leases with a TTL, a waiter, Resize): never more
// holders than slots, every plain lease releases exactly once, and the
// lock ends empty.
func TestStressFastWordAgainstFreezes(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	const slots = 3
	if _, err := s.Define(ctx, "f", slots, nil); err != nil {
		t.Fatal(err)
	}
	var inside atomic.Int32
	var over atomic.Int32
	enter := func() {
		if inside.Add(1) > slots {
			over.Add(1)
		}
	}
	deadline := time.Now().Add(stressTime)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for time.Now().Before(deadline) {
				r := rng.IntN(20)
				switch r {
				case 0:
					if _, err := s.State(ctx, "f", true); err != nil {
						t.Error(err)
					}
				case 1:
					wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
					gr, err := s.Acquire(wctx, store.AcquireRequest{Name: "f", Ref: store.NewRef(), TTL: time.Minute, Wait: true})
					cancel()
					if err == nil {
						enter()
						inside.Add(-1)
						if err := s.Release(ctx, gr.Handle(), nil); err != nil {
							t.Error(err)
						}
					}
				default:
					wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
					slot, token, err := s.Plain().Acquire(wctx, "f", r%2 == 0)
					cancel()
					if err != nil {
						if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
							t.Error(err)
						}
						continue
					}
					enter()
					if rng.IntN(4) == 0 {
						_ = slot.Context(token)
					}
					inside.Add(-1)
					if err := slot.Release(token); err != nil {
						t.Errorf("release %d: %v", token, err)
					}
					if err := slot.Release(token); !errors.Is(err, store.ErrNotHeld) {
						t.Errorf("second release %d: %v", token, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := over.Load(); n != 0 {
		t.Fatalf("%d times more holders than slots", n)
	}
	if hs := holdersOf(t, s, "f"); len(hs) != 0 {
		t.Fatalf("holders left: %v", hs)
	}
	// Empty again: the next grants take the fast path and still count.
	a, b, c := acquirePlain(t, s, "f"), acquirePlain(t, s, "f"), acquirePlain(t, s, "f")
	if _, _, err := s.Plain().Acquire(ctx, "f", false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a fourth plain lease of 3 slots: %v", err)
	}
	for _, x := range []plainLease{a, b, c} {
		if err := x.slot.Release(x.token); err != nil {
			t.Fatal(err)
		}
	}
}

// Weighted plain grants on the fast word race with operations that
// freeze the lock: the weights held never add up to more than the slots,
// every holder State lists has the weight its lease was granted (a
// freeze finds each weight, also of a grant that has not written it
// yet), every lease releases exactly once, and the lock ends empty, all
// its slots free again.
func TestStressWeightedFastWordAgainstFreezes(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	const slots = 8
	if _, err := s.Define(ctx, "f", slots, nil); err != nil {
		t.Fatal(err)
	}
	var inside, over atomic.Int32
	var weights sync.Map // token → the weight granted, while held
	enter := func(w int) {
		if inside.Add(int32(w)) > slots {
			over.Add(1)
		}
	}
	deadline := time.Now().Add(stressTime)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 21))
			for time.Now().Before(deadline) {
				switch r := rng.IntN(64); r {
				case 0, 2, 3, 4:
					st, err := s.State(ctx, "f", true)
					if err != nil {
						t.Error(err)
						continue
					}
					sum := 0
					for _, h := range st.Holders {
						sum += h.Weight
						if w, ok := weights.Load(h.Token); ok && w.(int) != h.Weight {
							t.Errorf("holder of token %d listed with weight %d, granted %d", h.Token, h.Weight, w)
						}
					}
					if sum != st.Running || sum > slots {
						t.Errorf("state: holders' weights add up to %d, running %d, slots %d", sum, st.Running, slots)
					}
				case 1:
					wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
					gr, err := s.Acquire(wctx, store.AcquireRequest{Name: "f", Ref: store.NewRef(), TTL: time.Minute, Wait: true, Weight: 2})
					cancel()
					if err == nil {
						enter(2)
						inside.Add(-2)
						if err := s.Release(ctx, gr.Handle(), nil); err != nil {
							t.Error(err)
						}
					}
				default:
					w := 1 + r%4
					wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
					slot, token, err := s.Plain().AcquireWeighted(wctx, "f", w, r%8 == 0)
					cancel()
					if err != nil {
						if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
							t.Error(err)
						}
						continue
					}
					if slot.Weight() != w {
						t.Errorf("granted weight %d, asked %d", slot.Weight(), w)
					}
					weights.Store(token, w)
					enter(w)
					if rng.IntN(4) == 0 {
						_ = slot.Context(token)
					}
					inside.Add(-int32(w))
					weights.Delete(token)
					if err := slot.Release(token); err != nil {
						t.Errorf("release %d: %v", token, err)
					}
					if err := slot.Release(token); !errors.Is(err, store.ErrNotHeld) {
						t.Errorf("second release %d: %v", token, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := over.Load(); n != 0 {
		t.Fatalf("%d times more weight held than slots", n)
	}
	if hs := holdersOf(t, s, "f"); len(hs) != 0 {
		t.Fatalf("holders left: %v", hs)
	}
	// Empty again: every slot can be taken at once, on the fast word.
	slot, token, err := s.Plain().AcquireWeighted(ctx, "f", store.WeightAll, false)
	if err != nil || slot.Weight() != slots {
		t.Fatalf("every slot after the run: %v, weight %d", err, slot.Weight())
	}
	if _, _, err := s.Plain().Acquire(ctx, "f", false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a plain lease with every slot held: %v", err)
	}
	if err := slot.Release(token); err != nil {
		t.Fatal(err)
	}
}
