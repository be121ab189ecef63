package memstore

import (
	"context"
	"errors"
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
