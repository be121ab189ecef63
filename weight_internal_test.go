package sleeplock

import (
	"context"
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock/store"
)

// The weighted options that plainWeight reads in place, without applying
// them, ask what they ask when applied; the others are left to be applied.
func TestPlainWeightReadsWhatOptionsApply(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		opts []AcquireOption
		read bool // plainWeight reads them
	}{
		{[]AcquireOption{Weight(1)}, true},
		{[]AcquireOption{Weight(3)}, true},
		{[]AcquireOption{Weight(fastWeights)}, true},
		{[]AcquireOption{Weight(fastWeights + 1)}, false},
		{[]AcquireOption{Shared()}, true},
		{[]AcquireOption{Exclusive()}, true},
		{[]AcquireOption{Weight(2), NoWait()}, true},
		{[]AcquireOption{NoWait(), Exclusive()}, true},
		{[]AcquireOption{NoWait()}, false},               // no weight: the general path
		{[]AcquireOption{Weight(2), Weight(2)}, false},   // two weights: applied, to refuse a contradiction
		{[]AcquireOption{Shared(), Exclusive()}, false},  // the contradiction is refused
		{[]AcquireOption{Weight(2), nil}, false},         // the nil option is refused
		{[]AcquireOption{Weight(2), Ref("r")}, false},    // not plain
		{[]AcquireOption{Weight(2), Kind("job")}, false}, // not plain
		{[]AcquireOption{Counted(), Weight(2)}, false},   // not plain
		{[]AcquireOption{}, false},
	} {
		for _, wait := range []bool{true, false} {
			weight, waits, ok := plainWeight(c.opts, wait)
			if ok != c.read {
				t.Errorf("plainWeight(%d options, %v) ok = %v, want %v", len(c.opts), wait, ok, c.read)
				continue
			}
			if !ok {
				continue
			}
			applied := withOptions(acquireConfig{wait: wait}, c.opts)
			if applied.err != nil || !applied.plainButWeight() || weight != applied.weight || waits != applied.wait {
				t.Errorf("%d options, wait %v: read weight %d, wait %v; applied %+v", len(c.opts), wait, weight, waits, applied)
			}
		}
	}
	if w := withOptions(acquireConfig{}, []AcquireOption{Exclusive()}).weight; w != store.WeightAll {
		t.Fatalf("Exclusive applied: weight %d", w)
	}

	// What is read in place takes the weighted plain path: a plain lease.
	l := New(nil)
	defer l.Close()
	if err := l.Define(ctx, "gpu", 4); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, "gpu", Weight(3), NoWait())
	if err != nil || lease.slot == nil || lease.Weight() != 3 {
		t.Fatalf("Weight(3), NoWait: plain %v, weight %d, %v", lease.slot != nil, lease.Weight(), err)
	}
	if _, err := l.Acquire(ctx, "gpu", NoWait(), Weight(2)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Weight(2), NoWait beside a hold of 3 of 4: %v, want busy", err)
	}
	_ = lease.Release(ctx)
}
