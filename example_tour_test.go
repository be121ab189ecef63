package sleeplock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// charge stands for the scarce thing the tour's lock protects: a payment
// API that allows 3 calls at once.
func charge(_ context.Context, order string) (string, error) {
	return "receipt for " + order, nil
}

// Example_tour is the tour of README.md: the README shows this function's
// body, and TestReadmeTourIsExample keeps the two the same.
func Example_tour() {
	// tour:begin
	ctx := context.Background()
	locks := sleeplock.New(nil) // the memory store: goroutines of one process
	defer locks.Close()

	// A lock with 3 slots: three holders at once. Defining it again is a no-op.
	if err := locks.Define(ctx, "payments", 3); err != nil {
		log.Fatal(err)
	}

	// Run a function holding a slot; it is released on return, error or panic.
	receipt, err := sleeplock.Execute(ctx, locks, "payments", func(ctx context.Context) (string, error) {
		return charge(ctx, "order-17")
	})
	fmt.Println(receipt, err)

	// Or manage slots yourself: Acquire waits in FIFO order, bounded by ctx.
	var leases []sleeplock.Lease
	for _, job := range []string{"job-1", "job-2", "job-3"} {
		lease, err := locks.Acquire(ctx, "payments", sleeplock.Ref(job), sleeplock.Kind("batch"))
		if err != nil {
			log.Fatal(err)
		}
		leases = append(leases, lease)
	}

	// TryAcquire never waits: with all 3 slots taken it is refused at once,
	// and says what holds the lock.
	_, err = locks.TryAcquire(ctx, "payments")
	var busy *sleeplock.BusyError
	if errors.As(err, &busy) {
		fmt.Printf("refused: %v (%s is held by a %s)\n", errors.Is(err, sleeplock.ErrUnavailable), busy.Lock, busy.Kind)
	}

	st, err := locks.State(ctx, "payments")
	fmt.Printf("slots %d, running %d, waiting %d, %v\n", st.Slots, st.Running, st.Waiting, err)

	// Release gives a slot back (ErrNotHeld when the lease was not held).
	for _, lease := range leases {
		fmt.Println(lease.Ref(), lease.Release(ctx))
	}
	// tour:end

	// Output:
	// receipt for order-17 <nil>
	// refused: true (payments is held by a batch)
	// slots 3, running 3, waiting 0, <nil>
	// job-1 <nil>
	// job-2 <nil>
	// job-3 <nil>
}

// README.md shows the body of Example_tour, so that the tour compiles and
// runs.
func TestReadmeTourIsExample(t *testing.T) {
	src, err := os.ReadFile("example_tour_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "\t// tour:begin\n")
	body, _, ok2 := strings.Cut(body, "\t// tour:end\n")
	if !ok || !ok2 {
		t.Fatal("example_tour_test.go has no tour:begin/tour:end markers")
	}
	var tour strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		tour.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if !strings.Contains(string(readme), "```go\n"+tour.String()+"```\n") {
		t.Errorf("README.md's tour is not the body of Example_tour; put this in README.md:\n```go\n%s```", tour.String())
	}
}
