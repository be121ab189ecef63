package sleeplock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

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

// The weights example of README.md (its body, between the readme markers):
// a job of 4 of 16 GPUs, and a read-write lock whose writer waits on its
// own goroutine for the reader to leave.
func Example_weights() {
	// readme:begin
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()

	// A job that needs 4 of 16 GPUs: one lease of 4 slots, or wait.
	if err := locks.Define(ctx, "gpu", 16); err != nil {
		log.Fatal(err)
	}
	job, err := locks.Acquire(ctx, "gpu", sleeplock.Weight(4))
	if err != nil {
		log.Fatal(err)
	}
	defer job.Release(ctx)

	// A read-write lock: up to 64 readers at once, or one writer.
	if err := locks.Define(ctx, "catalog", 64); err != nil {
		log.Fatal(err)
	}
	reader, err := locks.Acquire(ctx, "catalog", sleeplock.Shared())
	if err != nil {
		log.Fatal(err)
	}
	// The writer waits for the readers (and readers that come after it
	// wait for it), so it cannot wait on the goroutine of a reader.
	writer := make(chan sleeplock.Lease)
	go func() {
		w, err := locks.Acquire(ctx, "catalog", sleeplock.Exclusive())
		if err != nil {
			log.Fatal(err)
		}
		writer <- w
	}()
	if err := reader.Release(ctx); err != nil { // the last reader leaves
		log.Fatal(err)
	}
	w := <-writer
	fmt.Println("the writer holds", w.Weight(), "of 64 slots")
	if err := w.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// readme:end
	// Output:
	// the writer holds 64 of 64 slots
}
