package sleeplock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sleeplock/sleeplock"
)

// A job takes 4 of 16 GPU slots as one lease; a request for more slots
// than the lock has is refused at once.
func ExampleWeight() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "gpu", 16)

	job, err := locks.Acquire(ctx, "gpu", sleeplock.Weight(4))
	if err != nil {
		panic(err)
	}
	st, _ := locks.StateDetail(ctx, "gpu")
	fmt.Printf("weight %d; %d of %d slots in use by %d lease\n", job.Weight(), st.Running, st.Slots, st.Leases)
	_ = job.Release(ctx)

	_, err = locks.Acquire(ctx, "gpu", sleeplock.Weight(17))
	var we *sleeplock.WeightError
	fmt.Println(errors.Is(err, sleeplock.ErrTooHeavy), errors.As(err, &we) && we.Slots == 16)
	// Output:
	// weight 4; 4 of 16 slots in use by 1 lease
	// true true
}

// Readers share a lock; a writer takes every slot, and while it waits,
// readers that come after it wait too.
func ExampleExclusive() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "catalog", 8)

	r1, _ := locks.Acquire(ctx, "catalog", sleeplock.Shared())
	r2, _ := locks.Acquire(ctx, "catalog", sleeplock.Shared())
	_, err := locks.TryAcquire(ctx, "catalog", sleeplock.Exclusive())
	fmt.Println("writer beside readers:", errors.Is(err, sleeplock.ErrUnavailable))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)

	w, _ := locks.TryAcquire(ctx, "catalog", sleeplock.Exclusive())
	fmt.Println("writer alone, weight", w.Weight())
	_, err = locks.TryAcquire(ctx, "catalog", sleeplock.Shared())
	fmt.Println("reader beside the writer:", errors.Is(err, sleeplock.ErrUnavailable))
	_ = w.Release(ctx)
	// Output:
	// writer beside readers: true
	// writer alone, weight 8
	// reader beside the writer: true
}
