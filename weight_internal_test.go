package sleeplock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// What the options ask for, read into a config: a call that asks only
// for a weight (and not to wait) may take the plain path; any other option
// leaves it; a nil option and contradicting weights are refused.
func TestOptionsReadIntoConfig(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		opts   []AcquireOption
		plain  bool // the config asks nothing a plain lease lacks
		weight int
		bad    bool // refused
	}{
		{[]AcquireOption{Weight(1)}, true, 1, false},
		{[]AcquireOption{Weight(3)}, true, 3, false},
		{[]AcquireOption{Weight(1000)}, true, 1000, false},
		{[]AcquireOption{Shared()}, true, 1, false},
		{[]AcquireOption{Exclusive()}, true, store.WeightAll, false},
		{[]AcquireOption{Weight(2), NoWait()}, true, 2, false},
		{[]AcquireOption{NoWait(), Exclusive()}, true, store.WeightAll, false},
		{[]AcquireOption{NoWait()}, true, 0, false},
		{[]AcquireOption{Weight(2), Weight(2)}, true, 2, false},
		{[]AcquireOption{}, true, 0, false},
		{[]AcquireOption{Shared(), Exclusive()}, false, 0, true}, // the contradiction is refused
		{[]AcquireOption{Weight(2), nil}, false, 0, true},        // the nil option is refused
		{[]AcquireOption{Weight(0)}, false, 0, true},
		{[]AcquireOption{Weight(2), Ref("r")}, false, 2, false},    // not plain
		{[]AcquireOption{Weight(2), Kind("job")}, false, 2, false}, // not plain
		{[]AcquireOption{Counted(), Weight(2)}, false, 2, false},   // not plain
		{[]AcquireOption{TTL(time.Second)}, false, 0, false},
		{[]AcquireOption{WeightFor("a", 2)}, false, 0, false},
	} {
		for _, wait := range []bool{true, false} {
			weight, waits, plain := plainOptions(c.opts, wait)
			cfg := acquireConfig{plainConfig: plainConfig{wait: wait}}
			for _, o := range c.opts {
				cfg.apply(o)
			}
			if plain && (weight != cfg.weight || waits != cfg.wait) {
				t.Errorf("%d options, wait %v: the plain path reads weight %d, wait %v; the config %d, %v", len(c.opts), wait, weight, waits, cfg.weight, cfg.wait)
			}
			if (cfg.err != nil) != c.bad {
				t.Errorf("%d options: error %v, want refused %v", len(c.opts), cfg.err, c.bad)
				continue
			}
			if c.bad {
				continue
			}
			noWait := slices.Contains(c.opts, NoWait())
			if plain != c.plain || cfg.weight != c.weight || cfg.wait != (wait && !noWait) {
				t.Errorf("%d options, wait %v: plain %v, weight %d, wait %v", len(c.opts), wait, plain, cfg.weight, cfg.wait)
			}
		}
	}

	// What asks only for a weight takes the weighted plain path: a plain lease.
	l := New(nil)
	defer l.Close()
	if err := l.Define(ctx, "gpu", 4); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, "gpu", Weight(3), NoWait())
	if err != nil || lease.plk == nil || lease.Weight() != 3 {
		t.Fatalf("Weight(3), NoWait: plain %v, weight %d, %v", lease.plk != nil, lease.Weight(), err)
	}
	if _, err := l.Acquire(ctx, "gpu", NoWait(), Weight(2)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Weight(2), NoWait beside a hold of 3 of 4: %v, want busy", err)
	}
	_ = lease.Release(ctx)
}
