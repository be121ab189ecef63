package memstore

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/sleeplock/sleeplock/internal/plain"
	"github.com/sleeplock/sleeplock/store"
)

// A lock that cannot name plain leases by token (no range of refs left in
// the process, or tokens past the range) refuses to grant one with
// plain.ErrNotPlain, and changes nothing; its fast word stays frozen.
func TestNotPlainWithoutRefs(t *testing.T) {
	ctx := context.Background()
	for name, spoil := range map[string]func(lk *lock){
		"no range":   func(lk *lock) { lk.rng = store.RefRange{} },
		"past range": func(lk *lock) { lk.token = plainRefLimit },
	} {
		s := New()
		if _, err := s.Define(ctx, "n", 2, nil); err != nil {
			t.Fatal(err)
		}
		lk := s.load("n")
		lk.lockMu()
		spoil(lk)
		s.unlockMu(lk)
		if lk.fast.Load()&fastFrozen == 0 {
			t.Fatalf("%s: the fast word was made again", name)
		}
		for _, wait := range []bool{false, true} {
			if _, _, err := (*plainStore)(s).Acquire(ctx, "n", wait); !errors.Is(err, plain.ErrNotPlain) {
				t.Fatalf("%s: AcquirePlain = %v, want plain.ErrNotPlain", name, err)
			}
		}
		if st, _ := s.State(ctx, "n", false); st.Running != 0 || st.Waiting != 0 {
			t.Fatalf("%s: state %+v", name, st)
		}
		_ = s.Close()
	}
}

// A weighted plain lease is granted on the fast word, whose count of
// slots then includes its weight: the lock stays unfrozen, weight-1
// grants fill the slots left and no more, and a freeze lists each holder
// with its weight.
func TestWeightedGrantOnTheFastWord(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	if _, err := s.Define(ctx, "h", 8, nil); err != nil {
		t.Fatal(err)
	}
	lk := s.load("h")
	weighted, tok, err := (*plainStore)(s).AcquireWeighted(ctx, "h", 3, false)
	if err != nil || weighted.Weight() != 3 {
		t.Fatalf("weight 3: %v, weight %d", err, weighted.Weight())
	}
	if w := lk.fast.Load(); w&fastFrozen != 0 || w>>fastExtraShift&fastMaxExtra != 2 {
		t.Fatalf("word %#x: want unfrozen, with 2 extra slots", w)
	}
	var light []int64
	for {
		t1, ok := lk.tryFast()
		if !ok {
			break
		}
		light = append(light, t1)
	}
	if len(light) != 5 {
		t.Fatalf("%d grants of one slot beside 3 of 8 held, want 5", len(light))
	}
	st, err := s.State(ctx, "h", true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running != 8 || len(st.Holders) != 6 || st.Holders[0].Token != tok || st.Holders[0].Weight != 3 {
		t.Fatalf("state after a freeze: %+v", st)
	}
	for _, t1 := range light {
		if err := lk.Release(t1); err != nil {
			t.Fatal(err)
		}
	}
	if err := weighted.Release(tok); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.State(ctx, "h", false); st.Running != 0 {
		t.Fatalf("state after the releases: %+v", st)
	}
}

// A freeze that finds a weighted grant on the fast word before the grant
// has written its weight (it has made its compare-and-swap, not yet its
// entry) waits for the entry and records the grant with its weight.
func TestFreezeWaitsForAWeightedGrantsEntry(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	if _, err := s.Define(ctx, "h", 8, nil); err != nil {
		t.Fatal(err)
	}
	lk := s.load("h")
	t1, ok := lk.tryFast()
	if !ok {
		t.Fatal("no fast grant on an idle lock")
	}
	tab := lk.st.tokenWeights()
	w := lk.fast.Load()
	tok := int64(w>>fastTokShift) + 1
	win := w >> fastWinShift & fastWinMask
	nw := uint64(tok)<<fastTokShift | (win<<1|1)<<fastWinShift | (w>>fastExtraShift&fastMaxExtra+2)<<fastExtraShift | w&(fastMaxSlots<<1)
	if !lk.fast.CompareAndSwap(w, nw) {
		t.Fatal("the word changed")
	}
	done := make(chan struct{})
	go func() {
		lk.lockMu()
		s.unlockMu(lk)
		close(done)
	}()
	for lk.fast.Load()&fastFrozen == 0 {
		runtime.Gosched() // until the freeze has begun: it cannot end without the entry
	}
	tab.set(tok, 3)
	<-done
	st, err := s.State(ctx, "h", true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running != 4 || len(st.Holders) != 2 || st.Holders[0].Token != t1 || st.Holders[0].Weight != 1 || st.Holders[1].Weight != 3 {
		t.Fatalf("state: %+v, want token %d of weight 1 and %d of weight 3", st, t1, tok)
	}
	if err := (&weightedLock{lk, 3}).Release(tok); err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(t1); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.State(ctx, "h", false); st.Running != 0 {
		t.Fatalf("state after the releases: %+v", st)
	}
}

// Weighted grants that would count more extra slots than the fast word
// holds are granted under the mutex: both grants hold, each listed with
// its weight, and the slots left are still free.
func TestWeightedGrantsPastTheWordsExtra(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	if _, err := s.Define(ctx, "h", 16, nil); err != nil {
		t.Fatal(err)
	}
	lk := s.load("h")
	p := (*plainStore)(s)
	a, ta, err := p.AcquireWeighted(ctx, "h", 5, false)
	if err != nil {
		t.Fatal(err)
	}
	if lk.fast.Load()&fastFrozen != 0 {
		t.Fatal("the first grant of 5 froze the lock")
	}
	b, tb, err := p.AcquireWeighted(ctx, "h", 5, false)
	if err != nil {
		t.Fatal(err)
	}
	c, tc, err := p.AcquireWeighted(ctx, "h", 6, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Acquire(ctx, "h", false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a slot with 16 of 16 held: %v", err)
	}
	st, err := s.State(ctx, "h", true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running != 16 || len(st.Holders) != 3 || st.Holders[0].Weight != 5 || st.Holders[1].Weight != 5 || st.Holders[2].Weight != 6 {
		t.Fatalf("state: %+v", st)
	}
	for _, x := range []struct {
		l plain.Lock
		t int64
	}{{a, ta}, {b, tb}, {c, tc}} {
		if err := x.l.Release(x.t); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := s.State(ctx, "h", false); st.Running != 0 {
		t.Fatalf("state after the releases: %+v", st)
	}
}

// A lock whose holders are records (a freeze made them) grants on the
// fast word again once its mutex is let go: the word's extra counts the
// records' slots, so the word grants only the slots they leave, a record
// is released under the mutex, tokens keep growing and State and Stats
// count every holder, on the word or beside it.
func TestWordBesideRecords(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	if _, err := s.Define(ctx, "r", 8, nil); err != nil {
		t.Fatal(err)
	}
	lk := s.load("r")
	p := (*plainStore)(s)
	extra := func(want uint64) {
		t.Helper()
		if w := lk.fast.Load(); w&fastFrozen != 0 || w>>fastExtraShift&fastMaxExtra != want {
			t.Fatalf("word %#x: want unfrozen with %d extra slots", w, want)
		}
	}
	one, t1, err := p.Acquire(ctx, "r", false)
	if err != nil {
		t.Fatal(err)
	}
	heavy, t2, err := p.AcquireWeighted(ctx, "r", 3, false)
	if err != nil {
		t.Fatal(err)
	}
	// A freeze (State takes the mutex) makes both records; the word comes
	// back beside them with their 4 slots counted.
	if st, err := s.State(ctx, "r", true); err != nil || st.Running != 4 || len(st.Holders) != 2 {
		t.Fatalf("state %+v, %v", st, err)
	}
	extra(4)
	var toks []int64
	for {
		tok, ok := lk.tryFast()
		if !ok {
			break
		}
		toks = append(toks, tok)
	}
	if len(toks) != 4 || toks[0] <= t2 {
		t.Fatalf("word grants beside 4 slots of records: %v (last record token %d), want 4 above it", toks, t2)
	}
	st, err := s.State(ctx, "r", true)
	if err != nil || st.Running != 8 || len(st.Holders) != 6 || st.Holders[1].Weight != 3 {
		t.Fatalf("state %+v, %v", st, err)
	}
	if lk.fast.Load()&fastFrozen == 0 {
		t.Fatal("a full lock's word was made again")
	}
	for _, tok := range toks {
		if err := lk.Release(tok); err != nil {
			t.Fatal(err)
		}
	}
	extra(4)
	if err := one.Release(t1); err != nil {
		t.Fatal(err)
	}
	extra(3)
	if err := heavy.Release(t2); err != nil {
		t.Fatal(err)
	}
	extra(0)
	if err := one.Release(t1); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("second release of a record's lease: %v, want ErrNotHeld", err)
	}
	stats, err := s.Stats(ctx)
	if err != nil || len(stats) != 1 || stats[0].Acquisitions != 6 || stats[0].Releases != 6 || stats[0].Running != 0 {
		t.Fatalf("stats %+v, %v", stats, err)
	}
}

// A grant timed by time (see HoldSampling: the next after a Stats read
// made 30 s after the last such) goes the mutex path, and allocates
// nothing either; its release makes the fast word again. A lock nobody
// reads the stats of keeps its fast word from the start.
func TestTimedByTimeAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	if _, err := s.Define(ctx, "h", 2, nil); err != nil {
		t.Fatal(err)
	}
	lk := s.load("h")
	if lk.fast.Load()&fastFrozen != 0 {
		t.Fatal("a new lock has no fast word")
	}
	p := (*plainStore)(s)
	allocs := testing.AllocsPerRun(100, func() {
		lk.lockMu()
		lk.st.due.Store(true) // as a Stats read 30 s on does (rearm)
		s.unlockMu(lk)
		if lk.fast.Load()&fastFrozen == 0 {
			t.Fatal("a lock due to be timed kept its fast word")
		}
		pl, tok, err := p.Acquire(ctx, "h", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.Release(tok); err != nil {
			t.Fatal(err)
		}
		if lk.fast.Load()&fastFrozen != 0 {
			t.Fatal("no fast word after the timed hold")
		}
	})
	if allocs != 0 {
		t.Fatalf("a grant timed by time and its release allocate %.1f times", allocs)
	}
	if n := lk.st.holds.Count; n < 100 {
		t.Fatalf("%d holds timed, want every one of the 100", n)
	}
}
