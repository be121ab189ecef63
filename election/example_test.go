package election_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
)

// One leader at a time runs the scheduler; its work ends before it hands
// over, and every write it makes carries its term's fencing token.
func Example() {
	locks := sleeplock.New(nil) // the memory store; pgstore or sqlitestore across processes
	defer locks.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	schedule := func(ctx context.Context, token int64) error {
		fmt.Printf("leading, token %d\n", token)
		stop() // the work is done for this example: Run resigns and returns
		<-ctx.Done()
		return nil
	}
	fmt.Println(runScheduler(ctx, locks, "host-a", "10.0.0.1:8080", schedule))
	// Output:
	// leading, token 1
	// election: no leader
	// context canceled
}

// runScheduler is README's election example: it leads "scheduler" as
// host, advertising addr, and runs schedule while it leads.
func runScheduler(ctx context.Context, locks *sleeplock.Locks, host, addr string, schedule func(context.Context, int64) error) error {
	// readme:begin
	e, err := election.New(locks, "scheduler", election.WithTTL(15*time.Second))
	if err != nil {
		return err
	}
	// Campaign again after each term, until ctx ends; fn's ctx ends with the
	// term, and Run resigns only after fn has returned.
	err = e.Run(ctx, election.Candidate{ID: host, Value: addr},
		func(ctx context.Context, t *election.Term) error {
			return schedule(ctx, t.Token()) // every write carries the token
		})
	// readme:end
	if _, lerr := e.Leader(context.Background()); lerr != nil {
		fmt.Println(lerr) // Run resigned: nobody leads
	}
	return err
}

// Observe starts with the current state and reports every change.
func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	locks := sleeplock.New(nil)
	defer locks.Close()
	e, _ := election.New(locks, "primary")

	events := e.Observe(ctx)
	fmt.Println((<-events).Type)
	term, _ := e.Campaign(ctx, election.Candidate{ID: "db-1", Value: "10.0.0.5:5432"})
	ev := <-events
	fmt.Println(ev.Type, ev.Leader.ID, ev.Leader.Value)
	_ = term.Proclaim(ctx, "10.0.0.6:5432")
	ev = <-events
	fmt.Println(ev.Type, ev.Leader.ID, ev.Leader.Value)
	_ = term.Resign(ctx)
	fmt.Println((<-events).Type)
	// Output:
	// vacant
	// elected db-1 10.0.0.5:5432
	// changed db-1 10.0.0.6:5432
	// vacant
}
