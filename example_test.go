package sleeplock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock"
)

func Example() {
	ctx := context.Background()
	locks := sleeplock.New(nil) // the memory store
	defer locks.Close()

	if err := locks.Define(ctx, "payments", 3); err != nil {
		panic(err)
	}
	total, err := sleeplock.Execute(ctx, locks, "payments", func(ctx context.Context) (int, error) {
		return 40 + 2, nil // at most 3 of these run at once
	})
	fmt.Println(total, err)
	st, _ := locks.State(ctx, "payments")
	fmt.Printf("slots %d, running %d, waiting %d\n", st.Slots, st.Running, st.Waiting)
	// Output:
	// 42 <nil>
	// slots 3, running 0, waiting 0
}

func ExampleLocks_TryAcquire() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "backup", 1)

	first, _ := locks.TryAcquire(ctx, "backup", sleeplock.Kind("nightly"))
	_, err := locks.TryAcquire(ctx, "backup")
	var busy *sleeplock.BusyError
	if errors.As(err, &busy) {
		fmt.Printf("%s is held by a %s\n", busy.Lock, busy.Kind)
	}
	_ = first.Release(ctx)
	second, err := locks.TryAcquire(ctx, "backup")
	fmt.Println(err, second.Token() > first.Token())
	_ = second.Release(ctx)
	// Output:
	// backup is held by a nightly
	// <nil> true
}

func ExampleLocks_Acquire() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "gpu", 1)

	holder, _ := locks.Acquire(ctx, "gpu")
	waited := make(chan error)
	go func() {
		// Waits in FIFO order until the slot is free or ctx ends.
		lease, err := locks.Acquire(ctx, "gpu")
		if err == nil {
			err = lease.Release(ctx)
		}
		waited <- err
	}()
	for st, _ := locks.State(ctx, "gpu"); st.Waiting == 0; st, _ = locks.State(ctx, "gpu") {
		time.Sleep(time.Millisecond)
	}
	_ = holder.Release(ctx)
	fmt.Println(<-waited)

	// A waiter gives up when its context ends.
	holder, _ = locks.Acquire(ctx, "gpu")
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err := locks.Acquire(short, "gpu")
	fmt.Println(err)
	_ = holder.Release(ctx)
	// Output:
	// <nil>
	// context deadline exceeded
}

func ExampleLocks_AcquireAll() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "chat/*", 1)
	_ = locks.Define(ctx, "user/*", 1)

	click, _ := locks.TryAcquire(ctx, "user/7", sleeplock.Kind("click"))
	_, err := locks.AcquireAll(ctx, []string{"chat/42", "user/7"},
		sleeplock.Ref("turn-1"), sleeplock.Kind("turn"), sleeplock.NoWait())
	var busy *sleeplock.BusyError
	if errors.As(err, &busy) {
		fmt.Printf("refused: %s is held by a %s\n", busy.Lock, busy.Kind)
	}
	st, _ := locks.State(ctx, "chat/42")
	fmt.Println("chat/42 running:", st.Running) // nothing was taken

	_ = click.Release(ctx)
	turn, err := locks.AcquireAll(ctx, []string{"chat/42", "user/7"},
		sleeplock.Ref("turn-1"), sleeplock.Kind("turn"), sleeplock.NoWait())
	fmt.Println(turn.Names(), err)
	_ = turn.Release(ctx)
	// Output:
	// refused: user/7 is held by a click
	// chat/42 running: 0
	// [chat/42 user/7] <nil>
}

func ExampleRef() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "job", 1)

	a, _ := locks.Acquire(ctx, "job", sleeplock.Ref("job-81"))
	b, _ := locks.Acquire(ctx, "job", sleeplock.Ref("job-81")) // at once: re-entrant
	fmt.Println(b.Reentered(), a.Token() == b.Token())
	_ = b.Release(ctx) // one release frees it
	fmt.Println(a.Release(ctx))
	// Output:
	// true true
	// sleeplock: lease not held
}

func ExampleLease_Context() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "report", 1)

	lease, _ := locks.Acquire(ctx, "report", sleeplock.Ref("worker-3"), sleeplock.TTL(time.Minute))
	// An operator frees the slot by its ref; the holder learns at once.
	byRef, _ := locks.LeaseOf("worker-3", []string{"report"})
	_ = byRef.Release(ctx)
	<-lease.Done()
	fmt.Println(errors.Is(context.Cause(lease.Context()), sleeplock.ErrLeaseLost))
	// Output:
	// true
}

func ExampleLoadConfig() {
	cfg, err := sleeplock.ReadConfig(strings.NewReader(`
locks:
  - name: payments
    slots: 3
  - name: chat/*
    slots: 0
`))
	fmt.Println(cfg, err)
	// Output:
	// <nil> sleeplock: invalid config line 6: locks[1] ("chat/*"): sleeplock: invalid slots 0: slots must be a positive integer no larger than 1000000
}

func ExampleLogEvents() {
	ctx := context.Background()
	events := make(chan string, 10)
	locks := sleeplock.New(nil, sleeplock.WithNotifier(sleeplock.NotifierFunc(func(e sleeplock.Event) {
		events <- fmt.Sprintf("%s %s: running %d, waiting %d", e.Type, e.Lock, e.Running, e.Waiting)
	})))
	_ = locks.Define(ctx, "db", 2)
	lease, _ := locks.Acquire(ctx, "db")
	_ = lease.Release(ctx)
	_ = locks.Close() // delivers the queued events
	close(events)
	for e := range events {
		fmt.Println(e)
	}
	// Output:
	// created db: running 0, waiting 0
	// acquired db: running 1, waiting 0
	// released db: running 0, waiting 0
}

// Stats reads the counters the store keeps in its lock records: no
// notifier needed, nothing paid on the lock path.
func ExampleLocks_Stats() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "reports", 1)
	for range 3 {
		l, _ := locks.TryAcquire(ctx, "reports")
		_ = l.Release(ctx)
	}
	stats, _ := locks.Stats(ctx)
	for _, s := range stats {
		fmt.Printf("%s: %d acquired, %d released, %d running\n", s.Name, s.Acquisitions, s.Releases, s.Running)
	}
	// Output: reports: 3 acquired, 3 released, 0 running
}
